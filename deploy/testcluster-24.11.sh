#!/usr/bin/env bash
# A real Slurm 24.11 cluster ("skynet", the same shape as deploy/testcluster.sh's 22.05 one)
# in a Debian 13 (trixie) root filesystem, in namespaces of its own (PID, mount, UTS, IPC,
# network), beside the host's 22.05 cluster: no shared ports, munge, MariaDB or processes.
#
#   deploy/testcluster-24.11.sh up       build what is missing (rootfs, venv), start the sandbox
#                                        and every daemon, wait until all nodes are usable
#   deploy/testcluster-24.11.sh down     cancel jobs, stop the daemons, end the sandbox
#   deploy/testcluster-24.11.sh status   one line per component; exit 0 only if all are up
#   deploy/testcluster-24.11.sh run CMD  run CMD inside the sandbox as root, from this checkout
#                                        (bind-mounted at the same path), on the venv's Python
#   deploy/testcluster-24.11.sh shell    an interactive shell inside
#   deploy/testcluster-24.11.sh rest-token        mint skybot's slurmrestd token again (rotation)
#   deploy/testcluster-24.11.sh stop-restd        stop slurmrestd only (outage tests)
#   deploy/testcluster-24.11.sh stop-controller   stop slurmctld only (outage tests)
#   deploy/testcluster-24.11.sh stop-accounting   stop slurmdbd only (outage tests)
#   deploy/testcluster-24.11.sh pause-controller  SIGSTOP slurmctld: a hung controller
#   deploy/testcluster-24.11.sh resume-controller SIGCONT it
#
# The same script runs inside the sandbox (the checkout is bind-mounted there): `up`, `status`
# and `stop-controller` inside act on the daemons directly, so tests call the same verbs on
# either cluster. Recipe, problems met and fixes: ../../shared/reference/slurm-24.11-on-one-host.md
# (a second loopback address, CgroupPlugin=disabled, fake GPUs as character devices,
# pre-created accounting database, readiness on ports and registrations, not on sacctmgr).
#
# Needs root with CAP_SYS_ADMIN, util-linux (unshare, nsenter) and mmdebstrap. State lives in
# $TESTCLUSTER_2411_STATE (default /var/lib/skybot-testcluster-24.11), never in the repository.
# Knobs: TESTCLUSTER_TIMEOUT (seconds to wait for nodes, default 90), DEBIAN_MIRROR (default:
# the first Debian archive in this host's apt sources).

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
readonly SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
REPO=$(dirname "$HERE")
readonly REPO

readonly STATE=${TESTCLUSTER_2411_STATE:-/var/lib/skybot-testcluster-24.11}
readonly ROOTFS=$STATE/rootfs
readonly SANDBOX_PID_FILE=$STATE/sandbox.pid
readonly SUITE=trixie   # not `stable`: that name moves to Debian 14 one day
readonly PACKAGES=slurm-wlm,slurmdbd,munge,mariadb-server,python3,python3-venv,sudo,iproute2,procps,ca-certificates
readonly SANDBOX_HOST=slurm2411
# Only the rootfs has this file: it tells the script it runs inside the sandbox.
readonly INSIDE_MARK=/etc/skybot-testcluster-24.11
readonly VENV=/opt/skybot-venv
readonly TIMEOUT=${TESTCLUSTER_TIMEOUT:-90}
# Installed into the rootfs after it is built, not by mmdebstrap: a changed --include list
# would rebuild every existing rootfs (and its venv) for two packages.
readonly RESTD_PACKAGES=(slurmrestd slurm-wlm-jwt-plugin)
# slurmrestd's socket directory: the same path inside and on the host, where it is
# bind-mounted from (the sandbox has its own network, so no TCP from the host).
readonly RESTD_SOCKDIR=/run/skybot-slurmrestd/24.11
# On the host: skybot's token for this cluster.
readonly TOKEN_FILE=/etc/skybot/slurm-24.11.jwt

# Paths inside the sandbox.
readonly ETC=/etc/slurm
readonly LOGDIR=/var/log/slurm
readonly GPUDIR=/var/lib/fakegpu
readonly DB_NAME=slurm_acct_db
readonly DB_USER=slurm
readonly MYSQL_SOCK=/run/mysqld/mysqld.sock
readonly MYSQL_PID=/run/mysqld/mysqld.pid
readonly MUNGE_PID=/run/munge/munged.pid
readonly RUNDIR=/run/slurm
readonly RESTD_PID=$RUNDIR/slurmrestd.pid
# The daemons run from Debian's own second names (what /usr/sbin/slurmctld and slurmd point to),
# so their process names differ from the host cluster's: the host sees the sandbox's
# processes, and a `pkill -x slurmctld` aimed at the 22.05 cluster must not stop this one's.
# argv[0] stays the usual name, which Slurm checks.
readonly CTLD=slurmctld-wlm SLURMD=slurmd-wlm

LOG_TAG=testcluster-24.11
# shellcheck source=deploy/testcluster-lib.sh
source "$HERE/testcluster-lib.sh"

# One node more than the 22.05 cluster: a second a40 node with half clippy's GPUs, to prove
# per-node totals when one GPU type comes in different counts. It is held drained (no idle
# GPUs, no jobs) so the other tests see the same idle GPUs as on 22.05;
# tests/test_slurm_poller_cluster.py resumes it and `up` drains it again.
readonly SPARE_NODE=olaf
readonly SPARE_REASON="spare: resumed only by the mixed-GPU-count test"
NODES+=("$SPARE_NODE")
NODE_PORT[$SPARE_NODE]=6824
NODE_GPU[$SPARE_NODE]=a40
NODE_GPUS[$SPARE_NODE]=2

inside() { [[ -e $INSIDE_MARK ]]; }

# Run a step and log how long it took.
timed() {
    local what=$1 start_ns ms
    shift
    start_ns=$(date +%s%N)
    "$@"
    ms=$((($(date +%s%N) - start_ns) / 1000000))
    log "$(printf '%-28s %d.%03d s' "$what" $((ms / 1000)) $((ms % 1000)))"
}

# =============================================================================================
# Host side: the root filesystem, its venv, the namespaces.

host_preflight() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    local cmd missing=()
    for cmd in unshare nsenter mmdebstrap chroot setsid; do
        command -v "$cmd" >/dev/null || missing+=("$cmd")
    done
    ((${#missing[@]} == 0)) || die "missing commands: ${missing[*]} (apt-get install mmdebstrap util-linux)"
}

debian_mirror() {
    if [[ -n ${DEBIAN_MIRROR:-} ]]; then echo "$DEBIAN_MIRROR"; return; fi
    # deb822 "URIs:" lines first, then one-line "deb URI suite" entries; skip the security archive.
    local uri
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}' |
        grep -v -- '-security' | head -n1 || true)
    [[ -n $uri ]] || uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' |
        grep -v -- '-security' | head -n1 || true)
    [[ -n $uri ]] || die "no Debian archive in this host's apt configuration (/etc/apt/sources.list" \
        "or sources.list.d): add one, or set DEBIAN_MIRROR to the archive to build the 24.11 root from"
    echo "$uri"
}

rootfs_wanted() { echo "$SUITE $PACKAGES"; }

build_rootfs() {
    if [[ -f $ROOTFS/.skybot-rootfs && $(cat "$ROOTFS/.skybot-rootfs") == "$(rootfs_wanted)" ]]; then
        return 0
    fi
    sandbox_pid >/dev/null && stop_sandbox
    local mirror new=$STATE/rootfs.new
    mirror=$(debian_mirror)
    log "building the $SUITE root filesystem from $mirror (about half a minute)"
    rm -rf "$new"
    mmdebstrap --quiet --variant=apt --include="$PACKAGES" "$SUITE" "$new" "$mirror" \
        >"$STATE/mmdebstrap.log" 2>&1 || fail_with_logs "mmdebstrap failed" "$STATE/mmdebstrap.log"
    : >"$new$INSIDE_MARK"
    rootfs_wanted >"$new/.skybot-rootfs"
    rm -rf "$ROOTFS"
    mv "$new" "$ROOTFS"
}

rootfs_has() { in_chroot dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# apt inside the rootfs, from the host's namespaces (the sandbox has no network), with the
# archive mmdebstrap wrote into its sources.
ensure_rootfs_packages() {
    local package missing=()
    for package in "${RESTD_PACKAGES[@]}"; do rootfs_has "$package" || missing+=("$package"); done
    ((${#missing[@]} == 0)) && return 0
    {
        in_chroot DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            in_chroot DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    } >"$STATE/apt.log" 2>&1 || fail_with_logs "apt-get install ${missing[*]} in the rootfs failed" "$STATE/apt.log"
    log "installed ${missing[*]} into the rootfs"
}

# What skybot and its tests need, read from pyproject.toml so the list has one home.
venv_requirements() {
    python3 - "$REPO/pyproject.toml" <<'EOF'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["test"]))
EOF
}

# A command in the rootfs, from the host's namespaces (so with the host's network).
in_chroot() { chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# The venv is filled from the host's namespace: the sandbox has no network. env -i keeps the
# host's SSL_CERT_FILE/PIP_* (paths that do not exist in the rootfs) out; the host's CA bundle
# is copied in, because a proxy's CA may only be in the host's.
build_venv() {
    local wanted
    wanted=$(venv_requirements | sort)
    [[ -f $ROOTFS$VENV/.requirements && $(cat "$ROOTFS$VENV/.requirements") == "$wanted" ]] && return 0
    local ca=/etc/ssl/certs/ca-certificates.crt pip_env=()
    if [[ -s $ca ]]; then
        cp "$ca" "$ROOTFS/etc/ssl/host-ca.crt"
        pip_env+=(PIP_CERT=/etc/ssl/host-ca.crt)
    fi
    [[ -n ${PIP_INDEX_URL:-} && $PIP_INDEX_URL == http* ]] && pip_env+=("PIP_INDEX_URL=$PIP_INDEX_URL")
    [[ -x $ROOTFS$VENV/bin/python ]] || in_chroot python3 -m venv "$VENV"
    printf '%s\n' "$wanted" >"$ROOTFS/tmp/skybot-requirements.txt"
    in_chroot "${pip_env[@]}" PIP_DISABLE_PIP_VERSION_CHECK=1 \
        "$VENV/bin/pip" install --quiet -r /tmp/skybot-requirements.txt >"$STATE/pip.log" 2>&1 ||
        fail_with_logs "pip install into the rootfs venv failed" "$STATE/pip.log"
    rm -f "$ROOTFS/tmp/skybot-requirements.txt"
    printf '%s\n' "$wanted" >"$ROOTFS$VENV/.requirements"
    log "venv $VENV: $(in_chroot "$VENV/bin/python" --version)"
}

# The host PID of the sandbox's PID 1, if it is alive and really is our sandbox.
sandbox_pid() {
    local pid
    [[ -r $SANDBOX_PID_FILE ]] || return 1
    pid=$(tr -dc '0-9' <"$SANDBOX_PID_FILE")
    [[ -n $pid && $(readlink "/proc/$pid/root" 2>/dev/null) == "$ROOTFS" ]] || return 1
    echo "$pid"
}

# PID 1 of the new PID namespace: mounts the kernel filesystems into the rootfs (in the new,
# private mount namespace: the host never sees them), names the host, records its host PID,
# then becomes a shell loop inside the chroot that reaps orphans. The second loopback address
# lets Slurm's getaddrinfo(AI_ADDRCONFIG) find an IPv4 address to listen on.
# shellcheck disable=SC2016
readonly NSINIT='
set -e
R=$1
mount --rbind /dev "$R/dev"
mount -t proc proc "$R/proc"
mount -t sysfs -o ro sysfs "$R/sys"
mount -t tmpfs -o mode=0755 tmpfs "$R/run"
mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
echo "$3" >/proc/sys/kernel/hostname
read -r host_pid _ </proc/self/stat
echo "$host_pid" >"$2.tmp" && mv "$2.tmp" "$2"
exec chroot "$R" /bin/bash -c "ip link set lo up; ip addr add 10.254.254.254/32 dev lo
    trap \"exit 0\" TERM; while :; do sleep 1 & wait \$!; done"
'

start_sandbox() {
    sandbox_pid >/dev/null && return 0
    rm -f "$SANDBOX_PID_FILE"
    setsid unshare --fork --pid --mount --uts --ipc --net --kill-child \
        bash -c "$NSINIT" nsinit "$ROOTFS" "$SANDBOX_PID_FILE" "$SANDBOX_HOST" \
        </dev/null >>"$STATE/sandbox.log" 2>&1 &
    sandbox_ready() { sandbox_pid >/dev/null && in_sandbox ip -4 addr show lo | grep -q 10.254.254.254; }
    wait_for 10 sandbox_ready || fail_with_logs "the sandbox did not start" "$STATE/sandbox.log"
    log "started the sandbox (host pid $(sandbox_pid))"
}

stop_sandbox() {
    local pid
    pid=$(sandbox_pid) || return 0
    # SIGKILL to PID 1 ends everything in its PID namespace; the mounts go with the namespace.
    kill -KILL "$pid"
    wait_for 10 bash -c "! kill -0 $pid" || die "sandbox pid $pid did not end"
    rm -f "$SANDBOX_PID_FILE"
    log "ended the sandbox"
}

# Run a command inside the sandbox (namespaces and chroot), with a clean environment. nsenter
# forks into the PID namespace; --pdeathsig ends the command when nsenter is killed (a test's
# timeout), since nothing else would. EXEC=exec replaces this script with nsenter.
in_sandbox() {
    local pid env=(PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        HOME=/root LANG=C.UTF-8 "TERM=${TERM:-dumb}") name
    pid=$(sandbox_pid) || die "the sandbox is not running: run $0 up"
    for name in $(compgen -e); do
        [[ $name == SKYBOT_* || $name == TESTCLUSTER_* ]] && env+=("$name=${!name}")
    done
    # Inside, the cluster under test is this one: tests reach its daemons through this script.
    [[ -n ${SKYBOT_TESTCLUSTER:-} ]] || env+=("SKYBOT_TESTCLUSTER=$SELF")
    local cwd=$PWD
    [[ $cwd == "$REPO" || $cwd == "$REPO"/* ]] || cwd=$REPO
    # shellcheck disable=SC2016
    local enter_cwd='cd "$1" 2>/dev/null || cd /; shift; exec "$@"'
    ${EXEC:-} nsenter -t "$pid" -m -u -i -n -p -r -w \
        /usr/bin/setpriv --pdeathsig KILL -- /usr/bin/env -i "${env[@]}" \
        /bin/bash -c "$enter_cwd" in_sandbox "$cwd" "$@"
}

# This checkout at the same path inside, in the sandbox's own mount namespace only.
bind_repo() {
    local pid
    pid=$(sandbox_pid)
    # Made in the sandbox's mount namespace: there the rootfs's /tmp, say, is its own tmpfs.
    nsenter -t "$pid" -m mkdir -p "$ROOTFS$REPO"
    nsenter -t "$pid" -m mountpoint -q "$ROOTFS$REPO" && return 0
    nsenter -t "$pid" -m mount --bind "$REPO" "$ROOTFS$REPO"
}

# slurmrestd's socket directory at the same path inside, so host clients reach the socket.
# The host's directory is never removed: a new one would not be the one bound here.
bind_restd_dir() {
    local pid
    pid=$(sandbox_pid)
    mkdir -p "$RESTD_SOCKDIR"
    nsenter -t "$pid" -m mkdir -p "$ROOTFS$RESTD_SOCKDIR"
    nsenter -t "$pid" -m mountpoint -q "$ROOTFS$RESTD_SOCKDIR" && return 0
    nsenter -t "$pid" -m mount --bind "$RESTD_SOCKDIR" "$ROOTFS$RESTD_SOCKDIR"
}

# A token minted inside (where the sandbox's key is), written on the host and, at the same
# path, inside: the cluster lane's tests read this cluster through it from within.
host_rest_token() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    write_token "$TOKEN_FILE" in_sandbox scontrol
    install -d -m 0755 "$ROOTFS$(dirname "$TOKEN_FILE")"
    install -m 0600 -o root -g root "$TOKEN_FILE" "$ROOTFS$TOKEN_FILE"
}

host_up() {
    local start_ns ms
    start_ns=$(date +%s%N)
    host_preflight
    mkdir -p "$STATE"
    chmod 0755 "$STATE"
    timed "rootfs ($SUITE)" build_rootfs
    timed "venv ($VENV)" build_venv
    timed "slurmrestd packages" ensure_rootfs_packages
    timed "sandbox" start_sandbox
    bind_repo
    bind_restd_dir
    in_sandbox "$SELF" up
    if token_stale "$TOKEN_FILE" "$ROOTFS$JWT_KEY" || [[ ! -s $ROOTFS$TOKEN_FILE ]]; then
        host_rest_token
    fi
    ms=$((($(date +%s%N) - start_ns) / 1000000))
    log "cluster $CLUSTER (Slurm 24.11) is up ($(printf '%d.%03d' $((ms / 1000)) $((ms % 1000))) s)"
}

host_down() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    if sandbox_pid >/dev/null; then
        bind_repo
        in_sandbox "$SELF" down || log "warning: stopping the daemons cleanly failed; ending the sandbox anyway"
        stop_sandbox
    fi
    log "cluster $CLUSTER (Slurm 24.11) is down"
}

host_status() {
    local pid
    if [[ -f $ROOTFS/.skybot-rootfs ]]; then
        printf '%-20s %-8s %s\n' rootfs up "$ROOTFS ($(cat "$ROOTFS/.skybot-rootfs" | cut -d' ' -f1))"
    else
        printf '%-20s %-8s %s\n' rootfs down "$ROOTFS"; return 1
    fi
    if ! pid=$(sandbox_pid); then
        printf '%-20s %-8s %s\n' sandbox down ""; return 1
    fi
    printf '%-20s %-8s %s\n' sandbox up "host pid $pid"
    bind_repo
    in_sandbox "$SELF" status
}

# =============================================================================================
# Inside the sandbox: the daemons. The same order as deploy/testcluster.sh.

inside_preflight() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    local version
    version=$(slurmctld -V | awk '{print $2}')
    [[ $version == 24.11.* ]] || log "warning: written for Slurm 24.11, found $version"
}

conf_hash() { cat "$ETC/slurm.conf" "$ETC/gres.conf" "$ETC/cgroup.conf" | sha256sum | cut -d' ' -f1; }

db_password() {
    local f=/var/lib/skybot-testcluster/db-password
    if [[ ! -s $f ]]; then
        mkdir -p "$(dirname "$f")"
        (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$f")
    fi
    cat "$f"
}

# 24.11 drops GPUs whose File= is not a character device (jobs then get no
# CUDA_VISIBLE_DEVICES), so each fake GPU is /dev/null's device number, on a tmpfs of the
# sandbox's own (the rootfs may sit on a nodev filesystem).
ensure_fake_gpus() {
    mkdir -p "$GPUDIR"
    mountpoint -q "$GPUDIR" || mount -t tmpfs -o mode=0755 fakegpu "$GPUDIR"
    local node i
    for node in "${NODES[@]}"; do
        for ((i = 0; i < NODE_GPUS[$node]; i++)); do
            [[ -c $GPUDIR/${node}_gpu$i ]] || mknod -m 0666 "$GPUDIR/${node}_gpu$i" c 1 3
        done
    done
}

write_configs() {
    local node
    mkdir -p "$ETC" /var/spool/slurmctld "$RUNDIR" "$LOGDIR"
    for node in "${NODES[@]}"; do mkdir -p "/var/spool/slurmd-$node"; done
    grep -q "[[:space:]]$SANDBOX_HOST\$" /etc/hosts || echo "127.0.0.1 $SANDBOX_HOST" >>/etc/hosts
    {
        slurm_conf_header deploy/testcluster-24.11.sh "$SANDBOX_HOST" /var/spool/slurmctld \
            "/var/spool/slurmd-%n" "$RUNDIR" "$LOGDIR"
        slurm_conf_policies
        slurm_conf_nodes "$SANDBOX_HOST"
        conf_jwt
    } | install_file "$ETC/slurm.conf" 0644

    {
        echo "# Generated by deploy/testcluster-24.11.sh. Character devices (1,3) stand in for /dev/nvidia*."
        gres_conf_nodes "$GPUDIR"
    } | install_file "$ETC/gres.conf" 0644

    install_file "$ETC/cgroup.conf" 0644 <<<"CgroupPlugin=disabled"

    {
        cat <<EOF
# Generated by deploy/testcluster-24.11.sh.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$LOGDIR/slurmdbd.log
PidFile=$RUNDIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=$DB_USER
StoragePass=$(db_password)
StorageLoc=$DB_NAME
EOF
        conf_jwt
    } | install_file "$ETC/slurmdbd.conf" 0600

    install_file /etc/mysql/mariadb.conf.d/90-skybot-testcluster.cnf 0644 <<EOF
[mysqld]
bind-address=127.0.0.1
socket=$MYSQL_SOCK
pid-file=$MYSQL_PID
log-error=$LOGDIR/mariadb.log
skip-log-bin
innodb_lock_wait_timeout=900
innodb_buffer_pool_size=256M
innodb_flush_log_at_trx_commit=0
EOF
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    install -d -o munge -g munge -m 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
    fi
    if pid_of "$MUNGE_PID" munged >/dev/null && munge_ok; then return 0; fi
    stop_pidfile munged "$MUNGE_PID" munged
    runuser -u munge -- munged --force </dev/null >/dev/null 2>&1 ||
        fail_with_logs "munged failed to start" /var/log/munge/munged.log
    wait_for 10 munge_ok || fail_with_logs "munge does not answer (munge -n | unmunge)" /var/log/munge/munged.log
    log "started munged"
}

mysql_ok() { mariadb-admin --socket="$MYSQL_SOCK" ping >/dev/null 2>&1; }

start_mariadb() {
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if ! mysql_ok; then
        touch "$LOGDIR/mariadb.log"
        chown mysql:mysql "$LOGDIR/mariadb.log"
        setsid mariadbd --user=mysql </dev/null >/dev/null 2>&1 &
        local pid=$!
        wait_for 60 bash -c "mariadb-admin --socket=$MYSQL_SOCK ping || ! kill -0 $pid" || true
        mysql_ok || fail_with_logs "MariaDB did not come up" "$LOGDIR/mariadb.log"
        log "started MariaDB"
    fi
    # Created here, not by slurmdbd: MariaDB 11.8.9 + slurmdbd 24.11.5 fail a fresh database's
    # first start ("_check_mysql_concat_is_sane: null result").
    local pw
    pw=$(db_password)
    mariadb --socket="$MYSQL_SOCK" <<EOF || die "could not create database $DB_NAME / user $DB_USER"
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$pw';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF
}

# Listening, not sacctmgr: sacctmgr against a slurmdbd that is not up blocks for minutes.
port_listening() { [[ -n $(ss -Hltn "sport = :$1") ]]; }
# Wait until PORT listens, failing fast once the daemon behind PIDFILE is gone.
wait_for_port() {
    local port=$1 pidfile=$2 comm=$3 secs=$4 deadline=$((SECONDS + $4))
    until port_listening "$port"; do
        ((SECONDS < deadline)) || return 1
        # A daemon forks and writes its pid file; give it a moment before calling it dead.
        if ((SECONDS > deadline - secs + 3)) && ! pid_of "$pidfile" "$comm" >/dev/null; then return 1; fi
        sleep 0.2
    done
}

start_slurmdbd() {
    if pid_of "$RUNDIR/slurmdbd.pid" slurmdbd >/dev/null; then
        if [[ $ETC/slurmdbd.conf -nt $RUNDIR/slurmdbd.pid ]]; then
            stop_pidfile slurmdbd "$RUNDIR/slurmdbd.pid" slurmdbd
        elif port_listening 6819; then
            return 0
        fi
    fi
    stop_pidfile slurmdbd "$RUNDIR/slurmdbd.pid" slurmdbd
    slurmdbd </dev/null >>"$LOGDIR/slurmdbd.log" 2>&1 ||
        fail_with_logs "slurmdbd failed to start" "$LOGDIR/slurmdbd.log"
    wait_for_port 6819 "$RUNDIR/slurmdbd.pid" slurmdbd 60 ||
        fail_with_logs "slurmdbd is not listening on 6819" "$LOGDIR/slurmdbd.log"
    log "started slurmdbd"
}

start_slurmctld() {
    local hash
    hash=$(conf_hash)
    if pid_of "$RUNDIR/slurmctld.pid" "$CTLD" >/dev/null; then
        if [[ $(cat "$RUNDIR/slurmctld.confhash" 2>/dev/null) == "$hash" ]] && wait_for 10 ctld_ok; then
            return 0
        fi
        stop_pidfile slurmctld "$RUNDIR/slurmctld.pid" "$CTLD"
    fi
    rm -f "$RUNDIR/slurmctld.pid"
    (exec -a slurmctld "/usr/sbin/$CTLD") </dev/null >>"$LOGDIR/slurmctld.log" 2>&1 ||
        fail_with_logs "slurmctld failed to start" "$LOGDIR/slurmctld.log"
    local deadline=$((SECONDS + 30))
    until ctld_ok; do
        ((SECONDS < deadline)) && { ((SECONDS < deadline - 27)) || pid_of "$RUNDIR/slurmctld.pid" "$CTLD" >/dev/null; } ||
            fail_with_logs "slurmctld did not answer scontrol ping" "$LOGDIR/slurmctld.log"
        sleep 0.2
    done
    echo "$hash" >"$RUNDIR/slurmctld.confhash"
    log "started slurmctld"
}

# Node names whose slurmd this run started, with the time it did: the controller's saved state
# can still call a node idle from an earlier run, so readiness is checked on slurmd_start_time.
declare -A STARTED_AT=()

start_slurmds() {
    local node hash stale=()
    hash=$(conf_hash)
    for node in "${NODES[@]}"; do
        if pid_of "$RUNDIR/slurmd-$node.pid" "$SLURMD" >/dev/null &&
            [[ $(cat "$RUNDIR/slurmd-$node.confhash" 2>/dev/null) != "$hash" ]]; then
            stale+=("slurmd $node|$RUNDIR/slurmd-$node.pid|$SLURMD")
        fi
    done
    ((${#stale[@]} == 0)) || stop_daemons "${stale[@]}"
    for node in "${NODES[@]}"; do
        pid_of "$RUNDIR/slurmd-$node.pid" "$SLURMD" >/dev/null && continue
        rm -f "$RUNDIR/slurmd-$node.pid"
        STARTED_AT[$node]=$(date +%s)
        (exec -a slurmd "/usr/sbin/$SLURMD" -N "$node") </dev/null >>"$LOGDIR/slurmd-$node.log" 2>&1 ||
            fail_with_logs "slurmd for node $node failed to start" "$LOGDIR/slurmd-$node.log"
        echo "$hash" >"$RUNDIR/slurmd-$node.confhash"
        log "started slurmd $node"
    done
}

# Prints the nodes not yet usable: schedulable (idle/mixed/allocated, nothing else), and
# registered by the slurmd started in this run where one was.
unusable_nodes() {
    local since=() node
    for node in "${!STARTED_AT[@]}"; do since+=("$node=${STARTED_AT[$node]}"); done
    scontrol show node --json 2>/dev/null | python3 -c '
import json, sys
spare = sys.argv[2]
since = dict(a.split("=") for a in sys.argv[3:])
nodes = {n["name"]: n for n in json.load(sys.stdin)["nodes"]}
for name in sys.argv[1].split(","):
    n = nodes.get(name)
    ok = n is not None and n["state"][0] in ("IDLE", "MIXED", "ALLOCATED") and (
        len(n["state"]) == 1 or (name == spare and n["state"][1:] == ["DRAIN"])
    )
    if ok and name in since:
        ok = n["slurmd_start_time"]["number"] >= int(since[name])
    if not ok:
        print(name, "+".join(n["state"]) if n else "unknown")
' "$(IFS=,; echo "${NODES[*]}")" "$SPARE_NODE" "${since[@]}"
}

wait_for_nodes() {
    local deadline=$((SECONDS + TIMEOUT)) resumed=0 node bad
    while bad=$(unusable_nodes) && [[ -n $bad ]] || ! ctld_ok; do
        if ((SECONDS >= deadline)); then
            printf 'nodes not usable:\n%s\n' "$bad" >&2
            local logs=("$LOGDIR/slurmctld.log")
            for node in "${NODES[@]}"; do logs+=("$LOGDIR/slurmd-$node.log"); done
            fail_with_logs "nodes not usable after ${TIMEOUT} s" "${logs[@]}"
        fi
        # A node drained/downed by an earlier broken run stays so even once healthy; clear it once.
        if ((resumed == 0 && SECONDS + TIMEOUT - deadline > 3)); then
            for node in $(sinfo -h -N -t drain,down,fail -o '%N' 2>/dev/null | sort -u); do
                [[ $node == "$SPARE_NODE" ]] && continue
                scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
                log "resumed node $node"
            done
            resumed=1
        fi
        sleep 0.2
    done
}

hold_spare_node() {
    [[ $(sinfo -h -n "$SPARE_NODE" -o %E | sort -u) == "$SPARE_REASON" ]] && return 0
    scontrol update nodename="$SPARE_NODE" state=drain reason="$SPARE_REASON"
    log "drained spare node $SPARE_NODE"
}

install_runner() { "$REPO/deploy/install-runner.sh" | sed "s/^/[$LOG_TAG] /"; }

inside_up() {
    inside_preflight
    resume_paused "$RUNDIR/slurmctld.pid"
    timed "users" ensure_users
    timed "lab storage" ensure_storage
    timed "images" ensure_images
    timed "fake GPUs" ensure_fake_gpus
    timed "JWT key, slurmrestd user" ensure_jwt_key
    ensure_restd_user
    timed "configs" write_configs
    timed "munged" start_munge
    timed "MariaDB" start_mariadb
    timed "slurmdbd" start_slurmdbd
    timed "accounts" register_accounts
    timed "slurmctld" start_slurmctld
    timed "lab caps" set_lab_caps "$LOGDIR/slurmctld.log" "$LOGDIR/slurmdbd.log"
    timed "slurmd" start_slurmds
    timed "spare node drained" hold_spare_node
    timed "nodes registered" wait_for_nodes
    timed "slurmrestd" start_restd "$RESTD_PID" "$RESTD_SOCKDIR" "$LOGDIR/slurmrestd.log" "$(conf_hash)"
    timed "runner + sudoers" install_runner
    sinfo -h -N -o '%N %T %G' | sort -u | sed 's/^/  node /'
}

inside_down() {
    local node specs=() pid
    cancel_all_jobs
    stop_restd "$RESTD_PID"
    for node in "${NODES[@]}"; do specs+=("slurmd $node|$RUNDIR/slurmd-$node.pid|$SLURMD"); done
    stop_daemons "${specs[@]}" "slurmctld|$RUNDIR/slurmctld.pid|$CTLD"
    # Inside the sandbox's PID namespace every slurmstepd is this cluster's.
    for pid in $(pgrep -x slurmstepd || true); do kill -KILL "$pid" 2>/dev/null || true; done
    stop_daemons "slurmdbd|$RUNDIR/slurmdbd.pid|slurmdbd"
    stop_daemons "MariaDB|$MYSQL_PID|mariadbd" "munged|$MUNGE_PID|munged"
    unmount_storage
}

inside_status() {
    local bad=0 node pid
    row() { printf '%-20s %-8s %s\n' "$1" "$2" "$3"; [[ $2 == up ]] || bad=1; }
    if pid=$(pid_of "$MUNGE_PID" munged) && munge_ok; then row munged up "pid $pid"; else row munged down ""; fi
    if mysql_ok; then row mariadb up "pid $(cat "$MYSQL_PID" 2>/dev/null)"; else row mariadb down ""; fi
    if pid=$(pid_of "$RUNDIR/slurmdbd.pid" slurmdbd) && port_listening 6819; then row slurmdbd up "pid $pid"
    else row slurmdbd down ""; fi
    if pid=$(pid_of "$RUNDIR/slurmctld.pid" "$CTLD") && ctld_ok; then row slurmctld up "pid $pid, $(slurmctld -V)"
    else row slurmctld down ""; fi
    if pid=$(pid_of "$RESTD_PID" slurmrestd) && restd_ok "$RESTD_SOCKDIR"; then
        row slurmrestd up "pid $pid, $RESTD_SOCKDIR/$RESTD_SOCKET_NAME"
    else row slurmrestd down ""; fi
    local states=""
    ctld_ok && states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
    for node in "${NODES[@]}"; do
        local st
        st=$(awk -v n="$node" '$1 == n {print $2}' <<<"$states")
        if pid=$(pid_of "$RUNDIR/slurmd-$node.pid" "$SLURMD"); then
            if [[ $st =~ ^(idle|mixed|allocated)$ || ($node == "$SPARE_NODE" && $st =~ ^(drained|draining)$) ]]; then
                row "slurmd $node" up "pid $pid, node $st"
            else row "slurmd $node" degraded "pid $pid, node ${st:-unknown}"; fi
        else
            row "slurmd $node" down "${st:+node $st}"
        fi
    done
    local lab root
    for lab in "${!LAB_ROOT[@]}"; do
        root=${LAB_ROOT[$lab]}
        if mountpoint -q "$root"; then row "storage $lab" up "$root"; else row "storage $lab" down "$root"; fi
    done
    return $bad
}

usage() {
    sed -n '2,/^$/p' "$SELF" | sed 's/^# \{0,1\}//'
}

if inside; then
    case ${1:-} in
        up) inside_up ;;
        down) inside_down ;;
        status) inside_status ;;
        # By its pid file, as on the host cluster.
        stop-controller) stop_pidfile slurmctld "$RUNDIR/slurmctld.pid" "$CTLD" ;;
        stop-accounting) stop_pidfile slurmdbd "$RUNDIR/slurmdbd.pid" slurmdbd ;;
        stop-restd) stop_restd "$RESTD_PID" ;;
        pause-controller) signal_pidfile STOP slurmctld "$RUNDIR/slurmctld.pid" ;;
        resume-controller) signal_pidfile CONT slurmctld "$RUNDIR/slurmctld.pid" ;;
        -h | --help | help) usage ;;
        *) usage >&2; exit 2 ;;
    esac
else
    case ${1:-} in
        up) host_up ;;
        down) host_down ;;
        status) host_status ;;
        run) shift; bind_repo; EXEC=exec in_sandbox "$@" ;;
        shell) bind_repo; EXEC=exec in_sandbox /bin/bash -i ;;
        stop-controller) in_sandbox "$SELF" stop-controller ;;
        stop-accounting) in_sandbox "$SELF" stop-accounting ;;
        stop-restd) in_sandbox "$SELF" stop-restd ;;
        rest-token) host_rest_token ;;
        pause-controller) in_sandbox "$SELF" pause-controller ;;
        resume-controller) in_sandbox "$SELF" resume-controller ;;
        -h | --help | help) usage ;;
        *) usage >&2; exit 2 ;;
    esac
fi

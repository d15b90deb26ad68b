#!/usr/bin/env bash
# A real Slurm 22.05 cluster ("skynet") on this one host, for skybot's tests and for trying the bot.
#
#   deploy/testcluster.sh up       start (or repair) everything and wait until all nodes are usable
#   deploy/testcluster.sh down     cancel leftover jobs, stop every daemon, unmount the lab storage
#   deploy/testcluster.sh status   one line per component; exit 0 only if everything is up
#
# Needs root and the Debian packages slurm-wlm slurmdbd munge mariadb-server (and sudo for tests).
# Everything else (users, accounts, configs, DB, state dirs, fake GPUs, mounts) is created here,
# so it works on a fresh machine. No systemd: daemons are started directly.
#
# Environment knobs: TESTCLUSTER_TIMEOUT (seconds to wait for nodes, default 90).

set -euo pipefail

readonly CLUSTER=skynet
readonly STATE=/var/lib/skybot-testcluster
readonly LOGDIR=/var/log/skybot-testcluster
readonly RUNDIR=$STATE/run
readonly GPUDIR=$STATE/gpus
readonly ETC=/etc/slurm
readonly DB_NAME=slurm_acct_db
readonly DB_USER=slurm
readonly MYSQL_SOCK=/run/mysqld/mysqld.sock
readonly MYSQL_PID=/run/mysqld/mysqld.pid
readonly MUNGE_PID=/run/munge/munged.pid
readonly TIMEOUT=${TESTCLUSTER_TIMEOUT:-90}

# slurmd defaults to 6818 and slurmdbd to 6819, so the per-node slurmd ports sit above both.
readonly NODES=(clippy xaea-12 baymax)
declare -A NODE_PORT=([clippy]=6821 [xaea-12]=6822 [baymax]=6823)
declare -A NODE_GPU=([clippy]=a40 [xaea-12]=rtx_6000 [baymax]=2080_ti)

readonly LAB_USERS_GROUP=skybot-users
declare -A USER_LAB=([alice]=hoffman-lab [bob]=hoffman-lab [carol]=kira-lab [dave]=kira-lab)
readonly TEST_USERS=(alice bob carol dave)
readonly SERVICE_USER=skybot

# Lab storage: one small tmpfs per lab so tests can drive a real `df` fill level.
declare -A LAB_ROOT=([hoffman-lab]=/srv/hoffman-lab/flash9 [kira-lab]=/srv/kira-lab/share4)
readonly MOUNT_SOURCE=skybot-testcluster   # tmpfs "device" name: marks the mounts as ours
readonly MOUNT_SIZE=64M
# Usage in KiB per user; the human-readable line is derived from it so the two always agree.
declare -A USER_USAGE_K=([alice]=13194139533 [bob]=133284169 [carol]=5046586573 [dave]=897581056)
readonly USAGE_STAMP="2026-11-22 03:00"

# Container images for `/sky images`, named as in the container guide: empty stand-ins for the
# Enroot .sqsh files (skybot only lists them) and the pip-freeze .packages lists beside them.
readonly IMAGE_DIR=/enroot
declare -A IMAGE_PACKAGES=(
    [nvcr.io_nvidia_pytorch_20.03-py3.sqsh]="torch==1.5.0a0+8f84ded torchvision==0.6.0a0 numpy==1.18.1 apex==0.1 tensorboard==1.15.0"
    [nvcr.io_nvidia_pytorch_20.10-py3.sqsh]="torch==1.7.0a0+7036e91 torchvision==0.8.0a0 numpy==1.19.2 apex==0.1 tensorboard==1.15.0"
    [nvcr.io_nvidia_pytorch_23.12-py3.sqsh]="torch==2.2.0a0+81ea7a4 torchvision==0.17.0a0 numpy==1.24.4 transformer-engine==1.1.0+cf6fc89 flash-attn==2.0.4"
    [nvcr.io_nvidia_tensorflow_21.05-tf2-py3.sqsh]="tensorflow==2.4.0 numpy==1.19.5 horovod==0.21.3 tensorboard==2.4.1"
    [huggingface+transformers-pytorch-gpu+latest.sqsh]="torch==1.7.1 transformers==4.1.1 tokenizers==0.9.4 numpy==1.19.4"
)
# An image without a list: `/sky images` says it could not be searched.
readonly IMAGES_WITHOUT_LIST=(nvcr.io_nvidia_cuda_11.8.0-devel-ubuntu22.04.sqsh)

log() { printf '[testcluster] %s\n' "$*"; }
die() { printf '[testcluster] ERROR: %s\n' "$*" >&2; exit 1; }

# Print the last lines of each named log, so a failure explains itself without a second command.
show_logs() {
    local f
    for f in "$@"; do
        [[ -f $f ]] || continue
        printf -- '----- last lines of %s -----\n' "$f" >&2
        tail -n 25 "$f" >&2 || true
    done
}

fail_with_logs() {
    local msg=$1; shift
    printf '[testcluster] ERROR: %s\n' "$msg" >&2
    show_logs "$@"
    exit 1
}

# Poll CMD (a function or command) every 0.2 s for up to SECS seconds.
wait_for() {
    local secs=$1; shift
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# A pid file only counts if its process is alive AND is the program we expect: stale pid files
# from a killed container otherwise point at unrelated processes after a restart.
pid_of() {
    local pidfile=$1 comm=$2 pid
    [[ -r $pidfile ]] || return 1
    pid=$(tr -dc '0-9' <"$pidfile")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]] || return 1
    echo "$pid"
}

# Stop daemons given as "name|pidfile|comm": signal them all first, then wait, so a `down`
# costs the slowest daemon's shutdown rather than the sum of all of them.
stop_daemons() {
    local spec name pidfile comm pid names=() pids=() pidfiles=()
    for spec in "$@"; do
        IFS='|' read -r name pidfile comm <<<"$spec"
        if pid=$(pid_of "$pidfile" "$comm"); then
            kill -TERM "$pid" 2>/dev/null || true
            names+=("$name"); pids+=("$pid")
        fi
        pidfiles+=("$pidfile")
    done
    local alive i deadline=$((SECONDS + 20)) killed=0
    while :; do
        alive=()
        for i in "${!pids[@]}"; do kill -0 "${pids[$i]}" 2>/dev/null && alive+=("$i"); done
        ((${#alive[@]} == 0)) && break
        if ((SECONDS >= deadline)); then
            ((killed == 0)) || die "could not stop: $(for i in "${alive[@]}"; do printf '%s ' "${names[$i]}"; done)"
            for i in "${alive[@]}"; do
                log "${names[$i]} (pid ${pids[$i]}) ignored SIGTERM for 20 s; killing it"
                kill -KILL "${pids[$i]}" 2>/dev/null || true
            done
            killed=1; deadline=$((SECONDS + 5))
        fi
        sleep 0.1
    done
    rm -f "${pidfiles[@]}"
    for name in "${names[@]}"; do log "stopped $name"; done
}

stop_pidfile() { stop_daemons "$1|$2|$3"; }

conf_hash() { cat "$ETC/slurm.conf" "$ETC/gres.conf" | sha256sum | cut -d' ' -f1; }

# ---------------------------------------------------------------------------------------------
# Preparation: users, storage, configs. All of it is rewritten/checked on every `up`.

preflight() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    local cmd missing=()
    for cmd in munged mungekey mysqld_safe mysqladmin mariadb slurmdbd slurmctld slurmd \
               sacctmgr scontrol sinfo squeue useradd mountpoint setsid runuser; do
        command -v "$cmd" >/dev/null || missing+=("$cmd")
    done
    ((${#missing[@]} == 0)) ||
        die "missing commands: ${missing[*]} (apt-get install slurm-wlm slurmdbd munge mariadb-server sudo)"
    local version
    version=$(slurmctld -V | awk '{print $2}')
    [[ $version == 22.05.* ]] || log "warning: written for Slurm 22.05, found $version"
}

ensure_user() {
    local user=$1 supplementary=$2
    if ! id -u "$user" >/dev/null 2>&1; then
        useradd -m -s /bin/bash -U ${supplementary:+-G "$supplementary"} "$user"
        log "created user $user"
    elif [[ -n $supplementary ]] && ! id -nG "$user" | tr ' ' '\n' | grep -qx "$supplementary"; then
        usermod -aG "$supplementary" "$user"
    fi
    (($(id -u "$user") >= 1000)) || die "user $user exists with uid < 1000; remove it or fix it by hand"
}

ensure_users() {
    getent group "$LAB_USERS_GROUP" >/dev/null || groupadd "$LAB_USERS_GROUP"
    local u
    for u in "${TEST_USERS[@]}"; do ensure_user "$u" "$LAB_USERS_GROUP"; done
    ensure_user "$SERVICE_USER" ""
}

# du-style human size with one decimal, rounded up as du does (127.11G -> 127.2G).
human_k() {
    awk -v k="$1" 'BEGIN {
        split("K M G T P", unit, " "); v = k; i = 1
        while (v >= 1024 && i < 5) { v /= 1024; i++ }
        r = int(v * 10); if (r < v * 10) r++
        printf "%.1f%s\n", r / 10, unit[i] }'
}

ensure_storage() {
    local lab root user dir
    for lab in "${!LAB_ROOT[@]}"; do
        root=${LAB_ROOT[$lab]}
        mkdir -p "$root"
        if ! mountpoint -q "$root"; then
            mount -t tmpfs -o "size=$MOUNT_SIZE,mode=0755" "$MOUNT_SOURCE" "$root"
            log "mounted $MOUNT_SIZE tmpfs on $root"
        fi
    done
    for user in "${TEST_USERS[@]}"; do
        dir=${LAB_ROOT[${USER_LAB[$user]}]}/$user
        mkdir -p "$dir"
        chown "$user:$user" "$dir"
        chmod 0755 "$dir"
        # The cluster's weekly admin job writes these as root; tests may have edited them, so
        # `up` restores the known content.
        printf 'Updated: %s\nUsage (human-readable): %s\nUsage (K): %s\n' \
            "$USAGE_STAMP" "$(human_k "${USER_USAGE_K[$user]}")" "${USER_USAGE_K[$user]}" \
            >"$dir/disk-usage.txt"
        chown root:root "$dir/disk-usage.txt"
        chmod 0644 "$dir/disk-usage.txt"
    done
}

ensure_images() {
    local image
    install -d -m 0755 "$IMAGE_DIR"
    for image in "${!IMAGE_PACKAGES[@]}" "${IMAGES_WITHOUT_LIST[@]}"; do
        [[ -e $IMAGE_DIR/$image ]] || : >"$IMAGE_DIR/$image"
    done
    # install_file keeps an unchanged list's mtime, so skybot's poller does not re-read it.
    for image in "${!IMAGE_PACKAGES[@]}"; do
        tr ' ' '\n' <<<"${IMAGE_PACKAGES[$image]}" | install_file "$IMAGE_DIR/$image.packages" 0644
    done
}

# Write FILE from stdin only if the content changed, so config mtimes mean something.
install_file() {
    local dest=$1 mode=$2 tmp
    tmp=$(mktemp "$dest.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    if [[ -f $dest ]] && cmp -s "$tmp" "$dest"; then
        rm -f "$tmp"
        chmod "$mode" "$dest"
    else
        mv -f "$tmp" "$dest"
        log "wrote $dest"
    fi
}

db_password() {
    local f=$STATE/db-password
    if [[ ! -s $f ]]; then
        (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$f")
    fi
    cat "$f"
}

write_configs() {
    local host node gpu all_nodes
    host=$(hostname -s)
    all_nodes=$(IFS=,; echo "${NODES[*]}")
    mkdir -p "$ETC" "$STATE/slurmctld" "$RUNDIR" "$GPUDIR" "$LOGDIR"
    for node in "${NODES[@]}"; do
        mkdir -p "$STATE/slurmd-$node"
        # Fake GPUs: slurmd only needs the device files to exist to count them.
        touch "$GPUDIR/${node}_gpu"{0..3}
    done

    {
        cat <<EOF
# Generated by deploy/testcluster.sh: edits here are overwritten by the next \`up\`.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd-%n
SlurmctldPidFile=$RUNDIR/slurmctld.pid
SlurmdPidFile=$RUNDIR/slurmd-%n.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info

# No cgroups in a container without systemd: cgroup plugins make slurmd exit.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Nodes declare more CPUs/memory than the host has; without this they go INVAL/DRAIN.
SlurmdParameters=config_overrides
ReturnToService=2

# Snappy for tests: jobs start at submit time (and at worst on the next 2 s pass), finished
# jobs leave squeue after 10 s (pollers must use sacct), killed/preempted jobs get 5 s to exit,
# and a job hits TIMEOUT exactly at its limit.
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2,batch_sched_delay=0
MinJobAge=10
KillWait=5
OverTimeLimit=0

SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default every job is given the whole node's memory and only one job fits per node.
DefMemPerCPU=1000
GresTypes=gpu

# Overcap jobs are requeued as soon as a lab partition (higher PriorityTier) needs their GPUs.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PreemptExemptTime=0
JobRequeue=1

AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageEnforce=associations,limits,qos
# Must be known to slurmctld before sacctmgr can set GrpTRES=gres/gpu=N.
AccountingStorageTRES=gres/gpu,gres/gpu:a40,gres/gpu:rtx_6000,gres/gpu:2080_ti
# sacct then reports job comments: skybot finds a chat submission whose job already ended
# (by its skybot:TAG comment) instead of submitting it twice after a crash.
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGDIR/jobcomp.log

EOF
        for node in "${NODES[@]}"; do
            gpu=${NODE_GPU[$node]}
            echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=${NODE_PORT[$node]} CPUs=32 RealMemory=64000 Gres=gpu:$gpu:4 Feature=$gpu State=UNKNOWN"
        done
        cat <<EOF

PartitionName=hoffman-lab Nodes=$all_nodes PriorityTier=10 PreemptMode=OFF AllowAccounts=hoffman-lab MaxTime=INFINITE State=UP
PartitionName=kira-lab Nodes=$all_nodes PriorityTier=10 PreemptMode=OFF AllowAccounts=kira-lab MaxTime=INFINITE State=UP
PartitionName=debug Nodes=$all_nodes PriorityTier=20 PreemptMode=OFF AllowAccounts=hoffman-lab,kira-lab MaxTime=4:00:00 State=UP
PartitionName=overcap Nodes=$all_nodes PriorityTier=1 PreemptMode=REQUEUE AllowAccounts=overcap MaxTime=INFINITE State=UP
EOF
    } | install_file "$ETC/slurm.conf" 0644

    {
        echo "# Generated by deploy/testcluster.sh. Plain empty files stand in for /dev/nvidia*."
        echo "AutoDetect=off"
        for node in "${NODES[@]}"; do
            echo "NodeName=$node Name=gpu Type=${NODE_GPU[$node]} File=$GPUDIR/${node}_gpu[0-3]"
        done
    } | install_file "$ETC/gres.conf" 0644

    # slurmdbd refuses to start unless this file (it holds the DB password) is mode 600.
    install_file "$ETC/slurmdbd.conf" 0600 <<EOF
# Generated by deploy/testcluster.sh.
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
}

# ---------------------------------------------------------------------------------------------
# Daemons, in dependency order.

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        install -d -o munge -g munge -m 0700 /etc/munge
        runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
        log "created /etc/munge/munge.key"
    fi
    if pid_of "$MUNGE_PID" munged >/dev/null && munge_ok; then return 0; fi
    stop_pidfile munged "$MUNGE_PID" munged
    # A dead munged leaves its socket behind, and munged will not replace it without --force.
    runuser -u munge -- munged --force </dev/null >/dev/null 2>&1 ||
        fail_with_logs "munged failed to start" /var/log/munge/munged.log
    wait_for 10 munge_ok || fail_with_logs "munge does not answer (munge -n | unmunge)" /var/log/munge/munged.log
    log "started munged"
}

mysql_ok() { mysqladmin --socket="$MYSQL_SOCK" ping >/dev/null 2>&1; }

start_mariadb() {
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        install -d -o mysql -g mysql -m 0755 /var/lib/mysql
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOGDIR/mariadb-install.log" 2>&1 ||
            fail_with_logs "mariadb-install-db failed" "$LOGDIR/mariadb-install.log"
        log "initialised /var/lib/mysql"
    fi
    if ! mysql_ok; then
        # mariadbd writes its error log as the mysql user.
        touch "$LOGDIR/mariadb.log"
        chown mysql:mysql "$LOGDIR/mariadb.log"
        # setsid: mysqld_safe stays in the foreground and must not die with this shell's session.
        setsid mysqld_safe --bind-address=127.0.0.1 --innodb-lock-wait-timeout=900 \
            --log-error="$LOGDIR/mariadb.log" </dev/null >/dev/null 2>&1 &
        local safe_pid=$!
        # Give up early if mysqld_safe itself exits (bad datadir, permissions) instead of waiting.
        wait_for 60 bash -c "mysqladmin --socket=$MYSQL_SOCK ping || ! kill -0 $safe_pid" || true
        mysql_ok || fail_with_logs "MariaDB did not come up" "$LOGDIR/mariadb.log"
        log "started MariaDB"
    fi
    # Root logs in over the unix socket (Debian's default), so no root password is involved.
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

dbd_ok() { sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; }

start_slurmdbd() {
    if pid_of "$RUNDIR/slurmdbd.pid" slurmdbd >/dev/null; then
        # slurmdbd.conf holds the DB password, which a fresh state dir regenerates.
        if [[ $ETC/slurmdbd.conf -nt $RUNDIR/slurmdbd.pid ]]; then
            stop_pidfile slurmdbd "$RUNDIR/slurmdbd.pid" slurmdbd
        elif wait_for 10 dbd_ok; then
            return 0
        fi
    fi
    stop_pidfile slurmdbd "$RUNDIR/slurmdbd.pid" slurmdbd
    slurmdbd </dev/null >>"$LOGDIR/slurmdbd.log" 2>&1 ||
        fail_with_logs "slurmdbd failed to start" "$LOGDIR/slurmdbd.log"
    # The first start creates all tables, which takes a few seconds.
    wait_for 60 dbd_ok || fail_with_logs "slurmdbd did not answer sacctmgr within 60 s" "$LOGDIR/slurmdbd.log"
    log "started slurmdbd"
}

sacctmgr_q() { sacctmgr -n -P "$@"; }

# One query for the whole association tree: each sacctmgr call costs ~0.2 s, and a warm `up`
# should stay fast. Lines look like "account|user|grptres"; account-level lines have no user.
assoc_snapshot() { sacctmgr_q show assoc cluster="$CLUSTER" format=account,user,grptres; }

register_accounts() {
    local assoc acct user a
    assoc=$(assoc_snapshot)
    # Every registered cluster has a root association.
    if ! grep -q '^root||' <<<"$assoc"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
        log "registered cluster $CLUSTER"
    fi
    for acct in hoffman-lab kira-lab overcap; do
        if ! grep -q "^$acct||" <<<"$assoc"; then
            sacctmgr -i add account "$acct" cluster="$CLUSTER" description="$acct" organization="$acct" >/dev/null
            log "added account $acct"
        fi
    done
    for user in "${TEST_USERS[@]}"; do
        for a in "${USER_LAB[$user]}" overcap; do
            if ! grep -q "^$a|$user|" <<<"$assoc"; then
                sacctmgr -i add user "$user" account="$a" cluster="$CLUSTER" defaultaccount="${USER_LAB[$user]}" >/dev/null
                log "added association $user -> $a"
            fi
        done
    done
}

ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
no_active_jobs() { [[ -z $(squeue -h -t running,completing -o %A 2>/dev/null) ]]; }

start_slurmctld() {
    local hash
    hash=$(conf_hash)
    if pid_of "$RUNDIR/slurmctld.pid" slurmctld >/dev/null; then
        # Node and partition definitions only take effect on restart.
        if [[ $(cat "$RUNDIR/slurmctld.confhash" 2>/dev/null) == "$hash" ]] && wait_for 10 ctld_ok; then
            return 0
        fi
        stop_pidfile slurmctld "$RUNDIR/slurmctld.pid" slurmctld
    fi
    rm -f "$RUNDIR/slurmctld.pid"
    slurmctld </dev/null >>"$LOGDIR/slurmctld.log" 2>&1 ||
        fail_with_logs "slurmctld failed to start" "$LOGDIR/slurmctld.log"
    wait_for 30 ctld_ok || fail_with_logs "slurmctld did not answer scontrol ping within 30 s" "$LOGDIR/slurmctld.log"
    echo "$hash" >"$RUNDIR/slurmctld.confhash"
    log "started slurmctld"
}

gpu_tres_known() { sacctmgr_q show tres type=gres format=name | grep -qx gpu; }

set_lab_caps() {
    # slurmctld registers AccountingStorageTRES with slurmdbd at startup; until then sacctmgr
    # rejects GrpTRES=gres/gpu ("no TRES known by type gres/gpu").
    wait_for 30 gpu_tres_known ||
        fail_with_logs "slurmdbd never learned TRES gres/gpu from slurmctld" "$LOGDIR/slurmctld.log" "$LOGDIR/slurmdbd.log"
    local acct want have assoc
    assoc=$(assoc_snapshot)
    for acct in hoffman-lab kira-lab overcap; do
        case $acct in overcap) want="" ;; *) want="gres/gpu=4" ;; esac
        have=$(awk -F'|' -v a="$acct" '$1 == a && $2 == "" {print $3}' <<<"$assoc")
        [[ $have == "$want" ]] && continue
        # -1 is how sacctmgr clears a limit.
        sacctmgr -i modify account where name="$acct" cluster="$CLUSTER" set GrpTRES="${want:-gres/gpu=-1}" >/dev/null
        log "set $acct GrpTRES=${want:-none}"
    done
}

start_slurmd() {
    local node=$1 hash pidfile=$RUNDIR/slurmd-$1.pid
    hash=$(conf_hash)
    if pid_of "$pidfile" slurmd >/dev/null; then
        [[ $(cat "$RUNDIR/slurmd-$node.confhash" 2>/dev/null) == "$hash" ]] && return 0
        stop_pidfile "slurmd $node" "$pidfile" slurmd
    fi
    rm -f "$pidfile"
    slurmd -N "$node" </dev/null >>"$LOGDIR/slurmd-$node.log" 2>&1 ||
        fail_with_logs "slurmd for node $node failed to start" "$LOGDIR/slurmd-$node.log"
    echo "$hash" >"$RUNDIR/slurmd-$node.confhash"
    log "started slurmd $node"
}

# "Usable" means schedulable: idle, or mixed/allocated when jobs survived a repair run.
nodes_usable() {
    local states
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u) || return 1
    local node
    for node in "${NODES[@]}"; do
        grep -Eq "^$node (idle|mixed|allocated)$" <<<"$states" || return 1
    done
}

wait_for_nodes() {
    local deadline=$((SECONDS + TIMEOUT)) resumed=0 node
    until nodes_usable; do
        if ((SECONDS >= deadline)); then
            {
                echo "node states:"; sinfo -N -o '%N %T %E' 2>&1 || true
            } >&2
            local logs=("$LOGDIR/slurmctld.log")
            for node in "${NODES[@]}"; do logs+=("$LOGDIR/slurmd-$node.log"); done
            fail_with_logs "nodes not usable after ${TIMEOUT} s" "${logs[@]}"
        fi
        # A node drained/downed by an earlier broken run stays so even once healthy; clear it once.
        if ((resumed == 0 && SECONDS + TIMEOUT - deadline > 3)); then
            for node in $(sinfo -h -N -t drain,down,fail -o '%N' 2>/dev/null | sort -u); do
                scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
                log "resumed node $node"
            done
            resumed=1
        fi
        sleep 0.2
    done
}

cmd_up() {
    local start_ns
    start_ns=$(date +%s%N)
    preflight
    mkdir -p "$STATE" "$LOGDIR" "$RUNDIR"
    chmod 0755 "$STATE" "$LOGDIR"
    ensure_users
    ensure_storage
    ensure_images
    write_configs
    start_munge
    start_mariadb
    start_slurmdbd
    register_accounts
    start_slurmctld
    set_lab_caps
    local node stale=() hash
    hash=$(conf_hash)
    # After a config change, stop the outdated slurmds together: one by one costs ~2 s each.
    for node in "${NODES[@]}"; do
        if pid_of "$RUNDIR/slurmd-$node.pid" slurmd >/dev/null &&
            [[ $(cat "$RUNDIR/slurmd-$node.confhash" 2>/dev/null) != "$hash" ]]; then
            stale+=("slurmd $node|$RUNDIR/slurmd-$node.pid|slurmd")
        fi
    done
    ((${#stale[@]} == 0)) || stop_daemons "${stale[@]}"
    for node in "${NODES[@]}"; do start_slurmd "$node"; done
    wait_for_nodes
    local ms=$((($(date +%s%N) - start_ns) / 1000000))
    sinfo -h -N -o '%N %T %G' | sort -u | sed 's/^/  node /'
    log "cluster $CLUSTER is up ($(printf '%d.%03d' $((ms / 1000)) $((ms % 1000))) s)"
}

cmd_down() {
    [[ $EUID -eq 0 ]] || die "must run as root"
    local node
    # Cancel jobs while the controller can still tell slurmd to kill them cleanly; otherwise job
    # processes outlive the cluster and keep the lab mounts busy.
    if ctld_ok; then
        local jobs
        jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
        if [[ -n ${jobs// } ]]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            log "cancelled jobs: $jobs"
            wait_for 20 no_active_jobs ||
                log "warning: some jobs were still completing after 20 s"
        fi
    fi
    local specs=()
    for node in "${NODES[@]}"; do specs+=("slurmd $node|$RUNDIR/slurmd-$node.pid|slurmd"); done
    # slurmctld goes with the slurmds; slurmdbd only after it, since slurmctld flushes its
    # last accounting records to slurmdbd on the way down.
    stop_daemons "${specs[@]}" "slurmctld|$RUNDIR/slurmctld.pid|slurmctld"
    # Any step daemon left on this host can only belong to this cluster's dead slurmds.
    local pid
    for pid in $(pgrep -x slurmstepd || true); do
        kill -KILL "$pid" 2>/dev/null || true
        log "killed leftover slurmstepd $pid"
    done
    stop_daemons "slurmdbd|$RUNDIR/slurmdbd.pid|slurmdbd"
    # SIGTERM is mariadbd's clean shutdown; mysqld_safe then exits on its own.
    stop_daemons "MariaDB|$MYSQL_PID|mariadbd" "munged|$MUNGE_PID|munged"
    local lab root
    for lab in "${!LAB_ROOT[@]}"; do
        root=${LAB_ROOT[$lab]}
        if mountpoint -q "$root" && [[ $(findmnt -n -o SOURCE --target "$root") == "$MOUNT_SOURCE" ]]; then
            umount "$root" || die "cannot unmount $root (busy? see: fuser -vm $root)"
            log "unmounted $root"
        fi
    done
    log "cluster $CLUSTER is down"
}

cmd_status() {
    local bad=0 node pid
    row() { printf '%-20s %-8s %s\n' "$1" "$2" "$3"; [[ $2 == up ]] || bad=1; }

    if pid=$(pid_of "$MUNGE_PID" munged) && munge_ok; then row munged up "pid $pid"; else row munged down ""; fi
    if mysql_ok; then
        pid=$(cat "$MYSQL_PID" 2>/dev/null || true)
        row mariadb up "${pid:+pid $pid}"
    else
        row mariadb down ""
    fi
    if pid=$(pid_of "$RUNDIR/slurmdbd.pid" slurmdbd) && dbd_ok; then row slurmdbd up "pid $pid"
    else row slurmdbd down "${pid:+pid $pid but sacctmgr gets no answer}"; fi
    if pid=$(pid_of "$RUNDIR/slurmctld.pid" slurmctld) && ctld_ok; then row slurmctld up "pid $pid"
    else row slurmctld down ""; fi
    local states=""
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
    for node in "${NODES[@]}"; do
        local st
        st=$(awk -v n="$node" '$1 == n {print $2}' <<<"$states")
        if pid=$(pid_of "$RUNDIR/slurmd-$node.pid" slurmd); then
            if [[ $st =~ ^(idle|mixed|allocated)$ ]]; then row "slurmd $node" up "pid $pid, node $st"
            else row "slurmd $node" degraded "pid $pid, node ${st:-unknown}"; fi
        else
            row "slurmd $node" down "${st:+node $st}"
        fi
    done
    local lab root
    for lab in "${!LAB_ROOT[@]}"; do
        root=${LAB_ROOT[$lab]}
        if mountpoint -q "$root"; then
            row "storage $lab" up "$root $(df -h --output=used,size "$root" | tail -n1 | awk '{print $1 "/" $2}')"
        else
            row "storage $lab" down "$root"
        fi
    done
    return $bad
}

usage() {
    cat <<EOF
usage: $0 up|down|status

  up      create users, lab storage, sample images in $IMAGE_DIR, configs, accounts;
          start munge, MariaDB, slurmdbd, slurmctld and slurmd for ${NODES[*]};
          wait until all nodes are usable.
          Safe to re-run: it repairs whatever is missing or stopped.
  down    cancel remaining jobs, stop all daemons, unmount lab storage.
  status  one line per component; exit status 0 only if all are up.

State: $STATE   Logs: $LOGDIR   Config: $ETC
EOF
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    -h | --help | help) usage ;;
    *) usage >&2; exit 2 ;;
esac

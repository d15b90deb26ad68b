# shellcheck shell=bash
# Shared by deploy/testcluster.sh (Slurm 22.05 on this host) and deploy/testcluster-24.11.sh
# (Slurm 24.11 in a Debian 13 sandbox): the cluster's shape (nodes, GPUs, labs, users, storage,
# images), the scheduling and accounting settings both clusters run with, and the helpers that
# bring those parts up. Sourced, never run. The caller sets LOG_TAG before sourcing.

readonly CLUSTER=skynet

# slurmd defaults to 6818 and slurmdbd to 6819, so the per-node slurmd ports sit above both.
# A script may add nodes before it writes its configs.
NODES=(clippy xaea-12 baymax)
declare -A NODE_PORT=([clippy]=6821 [xaea-12]=6822 [baymax]=6823)
declare -A NODE_GPU=([clippy]=a40 [xaea-12]=rtx_6000 [baymax]=2080_ti)
declare -A NODE_GPUS=([clippy]=4 [xaea-12]=4 [baymax]=4)

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

log() { printf '[%s] %s\n' "$LOG_TAG" "$*"; }
die() { printf '[%s] ERROR: %s\n' "$LOG_TAG" "$*" >&2; exit 1; }

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
    printf '[%s] ERROR: %s\n' "$LOG_TAG" "$msg" >&2
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

# SIGSTOP or SIGCONT a daemon by its pid file: a hung daemon, as real outages often look
# (it holds its port and accepts connections, but answers nothing).
signal_pidfile() {
    local signal=$1 name=$2 pidfile=$3 pid
    pid=$(cat "$pidfile" 2>/dev/null) || die "$name is not running (no $pidfile)"
    kill "-$signal" "$pid" || die "could not send SIG$signal to $name (pid $pid)"
    log "sent SIG$signal to $name (pid $pid)"
}

# `up` after a test that died between pause and resume: a stopped daemon looks alive.
resume_paused() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 0
    kill -CONT "$pid" 2>/dev/null || true
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

# ---------------------------------------------------------------------------------------------
# Users, storage and images: the same on both clusters.

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

unmount_storage() {
    local lab root
    for lab in "${!LAB_ROOT[@]}"; do
        root=${LAB_ROOT[$lab]}
        if mountpoint -q "$root" && [[ $(findmnt -n -o SOURCE --target "$root") == "$MOUNT_SOURCE" ]]; then
            umount "$root" || die "cannot unmount $root (busy? see: fuser -vm $root)"
            log "unmounted $root"
        fi
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

# ---------------------------------------------------------------------------------------------
# slurm.conf and gres.conf: scheduling, preemption, accounting, nodes and partitions.

# slurm.conf's opening: who the controller is, where each daemon keeps its state, pid and log
# files, and the settings a cluster without cgroups needs. $1: the script that writes it,
# $2: the controller's host name, $3: slurmctld's state directory, $4: slurmd's spool
# directories (%n: the node's name), $5: pid files' directory, $6: logs' directory.
slurm_conf_header() {
    local script=$1 host=$2 state=$3 spool=$4 rundir=$5 logdir=$6
    cat <<EOF
# Generated by $script: edits here are overwritten by the next \`up\`.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# Neither cluster has a mail program; slurmctld complains about a missing one.
MailProg=/bin/true
StateSaveLocation=$state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$rundir/slurmctld.pid
SlurmdPidFile=$rundir/slurmd-%n.pid
SlurmctldLogFile=$logdir/slurmctld.log
SlurmdLogFile=$logdir/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/filetxt
JobCompLoc=$logdir/jobcomp.log

# No cgroups without systemd (24.11 also needs CgroupPlugin=disabled in cgroup.conf):
# cgroup plugins make slurmd exit.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Nodes declare more CPUs/memory than the host has; without this they go INVAL/DRAIN.
SlurmdParameters=config_overrides
ReturnToService=2

EOF
}

# The scheduling, preemption and accounting part of slurm.conf both clusters share.
slurm_conf_policies() {
    cat <<'EOF'
# Snappy for tests: jobs start at submit time (and at worst on the next 2 s pass), finished
# jobs leave squeue after 10 s (pollers must use sacct), killed/preempted jobs get 5 s to exit,
# and a job hits TIMEOUT exactly at its limit.
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2,batch_sched_delay=0
MinJobAge=10
KillWait=5
# A requeued (preempted) job may start again cred_expire seconds later (120 s by default): the
# tests that wait for an overcap job's restart wait 30 s instead. Job credentials live as long,
# ample for a batch launch on one host.
AuthInfo=cred_expire=30
# Above the default 10,000: benchmarks/controller_cost.py queues 20,000 held jobs and more.
MaxJobCount=50000
# Above the default 1001: an array of 5,000 tasks (tests/test_big_array_cluster.py, issue 40).
MaxArraySize=5001
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

# Multifactor priority with fair-share, as most GPU sites run it: `/sky why` quotes a job's
# sprio factors and their weights, and the cluster tests compare them with sprio's (issue 43).
# Fair-share (from slurmdbd's usage, per user) outweighs the rest, so two users' jobs that
# compete for the same GPUs may start in either submission order: a test that needs an order
# submits as one user or says it with --nice. Age reaches its weight only after
# PriorityMaxAge (7 days): about 0 in a test.
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightJobSize=1000
PriorityWeightPartition=1000
PriorityWeightAge=100
PriorityWeightQOS=0

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
# Sampled every 5 s (30 s by default): a test job need only hold its memory for seconds.
JobAcctGatherFrequency=5
EOF
}

# slurm.conf's nodes and partitions. $1: the host name the nodes' slurmd run on.
slurm_conf_nodes() {
    local host=$1 node gpu all_nodes
    all_nodes=$(IFS=,; echo "${NODES[*]}")
    echo
    for node in "${NODES[@]}"; do
        gpu=${NODE_GPU[$node]}
        echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=${NODE_PORT[$node]} CPUs=32 RealMemory=64000 Gres=gpu:$gpu:${NODE_GPUS[$node]} Feature=$gpu State=UNKNOWN"
    done
    cat <<EOF

PartitionName=hoffman-lab Nodes=$all_nodes PriorityTier=10 PreemptMode=OFF AllowAccounts=hoffman-lab MaxTime=INFINITE State=UP
PartitionName=kira-lab Nodes=$all_nodes PriorityTier=10 PreemptMode=OFF AllowAccounts=kira-lab MaxTime=INFINITE State=UP
PartitionName=debug Nodes=$all_nodes PriorityTier=20 PreemptMode=OFF AllowAccounts=hoffman-lab,kira-lab MaxTime=4:00:00 State=UP
PartitionName=overcap Nodes=$all_nodes PriorityTier=1 PreemptMode=REQUEUE AllowAccounts=overcap MaxTime=INFINITE State=UP
EOF
}

# gres.conf lines: $1 is the directory holding each node's fake GPU device files.
gres_conf_nodes() {
    local gpudir=$1 node
    echo "AutoDetect=off"
    for node in "${NODES[@]}"; do
        echo "NodeName=$node Name=gpu Type=${NODE_GPU[$node]} File=$gpudir/${node}_gpu[0-$((NODE_GPUS[$node] - 1))]"
    done
}

# ---------------------------------------------------------------------------------------------
# Accounts and caps (slurmdbd must answer sacctmgr before any of these run).

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

gpu_tres_known() { sacctmgr_q show tres type=gres format=name | grep -qx gpu; }

# $@: logs to show if slurmdbd never learns the gpu TRES.
set_lab_caps() {
    # slurmctld registers AccountingStorageTRES with slurmdbd at startup; until then sacctmgr
    # rejects GrpTRES=gres/gpu ("no TRES known by type gres/gpu").
    wait_for 30 gpu_tres_known ||
        fail_with_logs "slurmdbd never learned TRES gres/gpu from slurmctld" "$@"
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

ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
no_active_jobs() { [[ -z $(squeue -h -t running,completing -o %A 2>/dev/null) ]]; }

# Cancel jobs while the controller can still tell slurmd to kill them cleanly; otherwise job
# processes outlive the cluster and keep the lab mounts busy.
cancel_all_jobs() {
    ctld_ok || return 0
    local jobs
    jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ -n ${jobs// } ]] || return 0
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    log "cancelled jobs: $jobs"
    wait_for 20 no_active_jobs || log "warning: some jobs were still completing after 20 s"
}

# ---------------------------------------------------------------------------------------------
# slurmrestd with JWT: the same on both clusters. Recipe and pitfalls:
# ../../shared/reference/slurmrestd-on-one-host.md. The JWT lines are part of the generated
# slurm.conf and slurmdbd.conf, so every `up` writes the same files and a config written without
# them (an older checkout's `up`) changes the config hash, which restarts the daemons with them.

readonly JWT_KEY=/etc/slurm/jwt_hs256.key
# slurmrestd refuses to run as root or as SlurmUser (root here), so it has a user of its own.
readonly RESTD_USER=slurmrestd
# The account skybot's slurmrestd source reads as: the bot's own service user, not SlurmUser.
# A SlurmUser token may act as anyone (a job submitted with it and X-SLURM-USER-NAME: alice
# runs as alice); skybot's token can only read what any user can, and cancel nothing but its
# own (no) jobs, so a leaked token file costs no one's jobs.
readonly RESTD_READER=$SERVICE_USER
# The minted token's lifespan (s); `up` mints a new one after half of it.
readonly TOKEN_LIFESPAN=${TESTCLUSTER_JWT_LIFESPAN:-604800}
readonly RESTD_SOCKET_NAME=slurmrestd.sock

# Appended to both slurm.conf and slurmdbd.conf: slurmctld checks the tokens slurmrestd passes
# on, slurmdbd those of the accounting requests.
conf_jwt() {
    printf '\n# JWT beside munge: slurmrestd (SLURM_JWT=daemon) passes each request'"'"'s token on.\n'
    printf 'AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n' "$JWT_KEY"
}

ensure_jwt_key() {
    mkdir -p "$(dirname "$JWT_KEY")"
    if [[ ! -s $JWT_KEY ]]; then
        (umask 077; dd if=/dev/random of="$JWT_KEY" bs=32 count=1 status=none)
        log "created $JWT_KEY"
    fi
    # Whoever reads the key can mint a token for anyone: only SlurmUser (root) may.
    chown root:root "$JWT_KEY"
    chmod 0600 "$JWT_KEY"
}

ensure_restd_user() {
    id -u "$RESTD_USER" >/dev/null 2>&1 && return 0
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$RESTD_USER"
    log "created system user $RESTD_USER"
}

restd_ok() { [[ -S $1/$RESTD_SOCKET_NAME ]]; }

# Start (or keep) slurmrestd. $1: pid file, $2: socket directory, $3: log file, $4: the
# config hash it runs with (a changed slurm.conf restarts it), then any extra listen addresses.
# The socket's mode is 0777 whatever the umask: the directory (0755) guards only against
# replacing it; a request without a valid token gets HTTP 401 however it connects.
start_restd() {
    local pidfile=$1 sockdir=$2 logfile=$3 hash=$4
    shift 4
    if pid_of "$pidfile" slurmrestd >/dev/null; then
        if [[ $(cat "$pidfile.confhash" 2>/dev/null) == "$hash" ]] && restd_ok "$sockdir"; then
            return 0
        fi
        stop_pidfile slurmrestd "$pidfile" slurmrestd
    fi
    # Never removed and made again: the 24.11 sandbox has this directory bind-mounted.
    mkdir -p "$sockdir"
    chown "$RESTD_USER:$RESTD_USER" "$sockdir"
    chmod 0755 "$sockdir"
    rm -f "$sockdir/$RESTD_SOCKET_NAME"
    # SLURM_JWT=daemon: without it every token gets HTTP 401 ("Rejecting thread config token").
    # setpriv rather than runuser, so that $! is slurmrestd itself.
    SLURM_JWT=daemon setsid setpriv --reuid="$RESTD_USER" --regid="$RESTD_USER" --init-groups -- \
        slurmrestd -a rest_auth/jwt "$@" "unix:$sockdir/$RESTD_SOCKET_NAME" \
        </dev/null >>"$logfile" 2>&1 &
    echo $! >"$pidfile"
    wait_for 15 restd_ok "$sockdir" || fail_with_logs "slurmrestd did not open its socket" "$logfile"
    echo "$hash" >"$pidfile.confhash"
    log "started slurmrestd on ${*:+$* and }$sockdir/$RESTD_SOCKET_NAME"
}

stop_restd() {
    stop_pidfile slurmrestd "$1" slurmrestd
    rm -f "$1.confhash"
}

# Whether the token file $1 should be minted again: missing, older than the key $2 (a new key
# voids every token) or past half its lifespan.
token_stale() {
    local file=$1 key=${2:-$JWT_KEY} age
    [[ -s $file && ! $key -nt $file ]] || return 0
    age=$(($(date +%s) - $(stat -c %Y "$file")))
    ((age > TOKEN_LIFESPAN / 2))
}

# Write a token for RESTD_READER to FILE ($1), root-owned 0600, from the command given after it
# (`scontrol`, here or inside the sandbox). Written whole and renamed, so a reader that re-reads
# it on change never sees half a token; re-running it is the rotation.
write_token() {
    local file=$1 out tmp
    shift
    out=$("$@" token username="$RESTD_READER" lifespan="$TOKEN_LIFESPAN" 2>&1) ||
        die "scontrol token failed: $out"
    [[ $out == SLURM_JWT=* ]] || die "scontrol token printed no token: $out"
    install -d -m 0755 "$(dirname "$file")"
    tmp=$(mktemp "$file.XXXXXX")
    chmod 0600 "$tmp"
    printf '%s\n' "$out" >"$tmp"
    mv -f "$tmp" "$file"
    log "minted $file (user $RESTD_READER, lifespan $TOKEN_LIFESPAN s)"
}

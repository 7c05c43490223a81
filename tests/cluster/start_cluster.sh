#!/usr/bin/env bash
# Start a single-node SLURM test cluster on this machine (as root, no systemd needed):
# Debian's slurm-wlm + munge, fake GPUs as gres, proctrack/pgid. Idempotent: a second run with
# the same configuration leaves the running daemons alone; a changed configuration restarts the
# daemons this script started. tests/cluster/stop_cluster.sh stops only what this script started.
#
# Environment:
#   SLURM_FAKE_GPUS     number of fake GPUs (default 4)
#   SLURM_FAKE_DEV_DIR  folder of the gres device files (default $STATE/fakegpu, /dev/null links);
#                       on a real GPU runner: SLURM_FAKE_DEV_DIR=/dev to use /dev/nvidiaN
#   SLURM_CPUS          CPUs the node advertises (default 8, more than the machine may have, so
#                       that several one-CPU jobs run at once)
#   SLURM_MIN_JOB_AGE   seconds finished jobs stay visible to squeue (default 3600; the
#                       Snakemake plugin's squeue status command needs them, no slurmdbd here)
set -euo pipefail

STATE=/var/lib/nnunet-ci-slurm            # what this script started and created is listed here
FAKE_GPUS=${SLURM_FAKE_GPUS:-4}
DEV_DIR=${SLURM_FAKE_DEV_DIR:-$STATE/fakegpu}
CPUS=${SLURM_CPUS:-8}
MIN_JOB_AGE=${SLURM_MIN_JOB_AGE:-3600}
NODE=$(hostname -s)
t0=$(date +%s%N)
log() { echo "[start_cluster $(( ($(date +%s%N) - t0) / 1000000 )) ms] $*"; }

if [ "$(id -u)" != 0 ]; then
    echo "start_cluster.sh: must run as root (it installs packages and starts slurmctld/slurmd)" >&2
    exit 1
fi

# 1. Packages (only the 8 needed; recommends would pull in ~40).
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

mkdir -p "$STATE" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm /etc/slurm

# 2. Fake GPUs: slurm only stat()s the files and needs a character device; /dev/null links do.
if [ "$DEV_DIR" = "$STATE/fakegpu" ]; then
    mkdir -p "$DEV_DIR"
    for ((i = 0; i < FAKE_GPUS; i++)); do
        [ -e "$DEV_DIR/nvidia$i" ] || ln -s /dev/null "$DEV_DIR/nvidia$i"
    done
fi
for ((i = 0; i < FAKE_GPUS; i++)); do
    if [ ! -c "$DEV_DIR/nvidia$i" ]; then
        echo "start_cluster.sh: $DEV_DIR/nvidia$i is not a character device" >&2
        exit 1
    fi
done

# 3. Configuration.
MEM_MB=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
SLURM_CONF=$(cat <<EOF
# Written by tests/cluster/start_cluster.sh (single-node test cluster).
ClusterName=ci
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# pgid: a step's leftover processes die with the step's main process, as with cgroup tracking
# on real clusters (so an orphaned trainer cannot make a signal test pass by accident).
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.txt
# No slurmdbd: finished jobs must stay visible to squeue (Snakemake: slurm-status-command squeue).
MinJobAge=$MIN_JOB_AGE
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
MpiDefault=none
KillWait=5
InactiveLimit=0
Waittime=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:fake:$FAKE_GPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
)
GRES_CONF="AutoDetect=off
NodeName=$NODE Name=gpu Type=fake File=$DEV_DIR/nvidia[0-$((FAKE_GPUS - 1))]"
# slurmd always loads a cgroup plugin; autodetect fails on hybrid/container mounts.
CGROUP_CONF="CgroupPlugin=cgroup/v1"

changed=0
write_conf() {  # path content: write if different, back up a file this script did not write
    if [ ! -f "$1" ] || [ "$(cat "$1")" != "$2" ]; then
        if [ -f "$1" ] && [ ! -f "$STATE/wrote$(echo "$1" | tr / _)" ]; then
            cp -n "$1" "$STATE/orig$(echo "$1" | tr / _)"
        fi
        printf '%s\n' "$2" >"$1"
        touch "$STATE/wrote$(echo "$1" | tr / _)"
        changed=1
    fi
}
write_conf /etc/slurm/slurm.conf "$SLURM_CONF"
write_conf /etc/slurm/gres.conf "$GRES_CONF"
write_conf /etc/slurm/cgroup.conf "$CGROUP_CONF"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# 4. munge (munged refuses to run as root).
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "starting munged"
    mkdir -p /run/munge
    chown munge:munge /run/munge
    [ -f /etc/munge/munge.key ] || { /usr/sbin/mungekey --create 2>/dev/null || /usr/sbin/create-munge-key; }
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do
        [ -f /run/munge/munged.pid ] && break
        sleep 0.1
    done
    cp /run/munge/munged.pid "$STATE/munged.pid"
fi

# 5. slurmctld and slurmd: restart ours on a changed configuration; start missing ones.
for daemon in slurmctld slurmd; do
    if [ "$changed" = 1 ] && alive "$STATE/$daemon.pid"; then
        log "configuration changed: stopping $daemon"
        pid=$(cat "$STATE/$daemon.pid")
        kill "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$STATE/$daemon.pid"
    fi
done
if ! alive /run/slurm/slurmctld.pid; then
    log "starting slurmctld"
    slurmctld
    for _ in $(seq 50); do alive /run/slurm/slurmctld.pid && break; sleep 0.1; done
    cp /run/slurm/slurmctld.pid "$STATE/slurmctld.pid"
elif [ "$changed" = 1 ]; then
    scontrol reconfigure
fi
if ! alive /run/slurm/slurmd.pid; then
    log "starting slurmd"
    slurmd
    for _ in $(seq 50); do alive /run/slurm/slurmd.pid && break; sleep 0.1; done
    cp /run/slurm/slurmd.pid "$STATE/slurmd.pid"
fi

# 6. Wait for the node; a node left DOWN/DRAINED by an earlier configuration is resumed.
for _ in $(seq 150); do
    state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null | head -n 1 || true)
    case "$state" in
        idle | mix | alloc) break ;;
        down* | drain* | drng*) scontrol update nodename="$NODE" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.2
done
state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null | head -n 1 || true)
case "$state" in
    idle | mix | alloc) log "node $NODE is $state ($FAKE_GPUS fake GPUs, $CPUS CPUs)" ;;
    *)
        echo "start_cluster.sh: node $NODE is '$state'; see /var/log/slurm/" >&2
        tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
        exit 1
        ;;
esac

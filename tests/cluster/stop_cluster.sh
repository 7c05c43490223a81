#!/usr/bin/env bash
# Stop what tests/cluster/start_cluster.sh started (by the pids it recorded), nothing else.
# --purge also removes the configuration files it wrote (restoring the originals it saved),
# its fake GPU links and the SLURM state and logs.
set -euo pipefail
STATE=/var/lib/nnunet-ci-slurm
[ -d "$STATE" ] || { echo "stop_cluster.sh: nothing was started ($STATE missing)"; exit 0; }

for daemon in slurmd slurmctld munged; do
    pidfile=$STATE/$daemon.pid
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    # Only the process we started: the pid must still belong to that program.
    if kill -0 "$pid" 2>/dev/null && grep -q "$daemon" "/proc/$pid/comm" 2>/dev/null; then
        echo "stopping $daemon ($pid)"
        kill "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile"
done

if [ "${1:-}" = "--purge" ]; then
    for conf in /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/cgroup.conf; do
        key=$(echo "$conf" | tr / _)
        if [ -f "$STATE/wrote$key" ]; then
            rm -f "$conf"
            [ -f "$STATE/orig$key" ] && cp "$STATE/orig$key" "$conf"
        fi
    done
    rm -rf /var/spool/slurmctld/* /var/spool/slurmd/* /var/log/slurm/slurmctld.log \
        /var/log/slurm/slurmd.log /var/log/slurm/jobcomp.txt "$STATE"
fi

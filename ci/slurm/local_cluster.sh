#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, from Debian's packages (slurmctld, slurmd, munge), for the
# tests of ci/slurm/ (as root, as CI runs). State, logs and slurm.conf live in build/slurm/.
#
#   ci/slurm/local_cluster.sh start             installs what is missing, starts munged, slurmctld and slurmd,
#                                               waits until the node is idle; prints `export SLURM_CONF=...`
#   ci/slurm/local_cluster.sh stop              stops the daemons it started
#
# No cgroups (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none): it runs in containers too. Ports
# 16817/16818 on 127.0.0.1, so that a real cluster's daemons on this machine are left alone.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir="$root/build/slurm"
conf="$dir/slurm.conf"
node=flashcheck-node
log() { printf '[slurm] %s\n' "$*" >&2; }

stop() {
  for d in slurmd slurmctld; do
    if [ -f "$dir/$d.pid" ] && kill -0 "$(cat "$dir/$d.pid")" 2> /dev/null; then
      local pid
      pid=$(cat "$dir/$d.pid")
      kill "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2> /dev/null && kill -KILL "$pid"
      log "stopped $d"
    fi
  done
  if [ -f "$dir/munged.started" ] && [ -f /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2> /dev/null && log "stopped munged"
    rm -f "$dir/munged.started"
  fi
}

start() {
  [ "$(id -u)" = 0 ] || { echo "ci/slurm/local_cluster.sh: run as root (the daemons and jobs run as root)" >&2; exit 2; }
  local missing=()
  for p in slurmctld slurmd slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
  fi
  stop
  rm -rf "$dir"
  mkdir -p "$dir/state" "$dir/spool"
  # munge: the key the package made, the daemon as its own user.
  [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key && chown munge:munge /etc/munge/munge.key; }
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! munge -n 2> /dev/null | unmunge > /dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
    touch "$dir/munged.started"
    for _ in $(seq 1 50); do munge -n 2> /dev/null | unmunge > /dev/null 2>&1 && break; sleep 0.1; done
  fi
  munge -n | unmunge > /dev/null || { echo "munged does not answer" >&2; exit 1; }
  cat > "$conf" <<CONF
ClusterName=flashcheck
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=$node NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$conf
  slurmctld -f "$conf" || { tail -20 "$dir/slurmctld.log" >&2; exit 1; }
  slurmd -f "$conf" -N "$node" || { tail -20 "$dir/slurmd.log" >&2; exit 1; }
  local state=""
  for _ in $(seq 1 120); do
    state=$(sinfo -h -n "$node" -o %T 2> /dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
  done
  if [ "$state" != idle ]; then
    log "node $node is '$state', not idle, after 60 s"; tail -20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2; stop; exit 1
  fi
  log "node $node idle ($(nproc) CPUs); logs in $dir"
  echo "export SLURM_CONF=$conf"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: ci/slurm/local_cluster.sh start|stop" >&2; exit 2 ;;
esac

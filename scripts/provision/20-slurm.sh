#!/usr/bin/env bash
# A real two-node Slurm cluster on this machine, from Debian packages (Slurm 22.05):
# munge, slurmctld, slurmd for node1 (127.0.1.1) and node2 (127.0.1.2), and slurmdbd backed by
# a private MariaDB, so `sacct` works too. Ready in seconds; a healthy running cluster is reused.
#
#   . scripts/provision/20-slurm.sh        # start (or reuse) it and export SLURM_CONF
#   bash scripts/provision/20-slurm.sh stop       # stop every daemon it started
#   bash scripts/provision/20-slurm.sh stop-dbd   # stop only slurmdbd (accounting goes away)
#   bash scripts/provision/20-slurm.sh start-dbd  # start slurmdbd again
#   bash scripts/provision/20-slurm.sh status     # exit 0 iff the cluster is healthy
#
# State (config, spool, logs, database) lives in /var/lib/anylaunch-backends/slurm and pid files
# in /run/anylaunch-backends/slurm, so every clone of the repository shares one cluster.
# Why the configuration looks as it does (measured on this machine):
# - het jobs need a node per component, and two nodes cannot both be 127.0.0.1 names;
# - config_overrides lets each node advertise 4 CPUs on a 2-core machine;
# - a container has no cgroups to spare: proctrack/linuxproc, task/none;
# - bf_interval=1: the default 30 s backfill interval makes het jobs wait ~27 s; sched_interval=1
#   and cred_expire=5: a requeued job (a retry) may start again after ~6 s instead of 2-3 min;
# - DefMemPerCPU: without it a job takes a whole node's memory and jobs run one per node.

_anylaunch_slurm() {
  local mode=${1:-start}
  local state=/var/lib/anylaunch-backends/slurm
  local run=/run/anylaunch-backends/slurm
  local conf=$state/etc/slurm.conf
  local dbd_conf=$state/etc/slurmdbd.conf
  local db_sock=$run/mariadb/mariadb.sock db_port=13306 db_pass=anylaunch-slurm
  local ctld_port=16817 dbd_port=16819 node_ports=(16821 16822)
  local nodes=(node1 node2) addrs=(127.0.1.1 127.0.1.2)

  _al_log() { echo "[slurm] $*" >&2; }
  _al_pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
  _al_stop_pid() { # pidfile...: TERM them all, wait up to 15 s for them to end, then KILL
    local pidfile pid i pids=()
    for pidfile in "$@"; do
      [ -s "$pidfile" ] || continue
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null && pids+=("$pid")
    done
    for i in $(seq 150); do
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
      [ -z "${pid:-}" ] && break
      sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    rm -f "$@"
  }
  _al_wait() { # seconds description command...: poll until the command succeeds
    local secs=$1 what=$2 i
    shift 2
    for i in $(seq $((secs * 10))); do
      if "$@" >/dev/null 2>&1; then return 0; fi
      sleep 0.1
    done
    _al_log "timed out after ${secs}s waiting for $what"
    return 1
  }
  _al_nodes_up() { # both nodes respond (idle, mixed or allocated; not down or drained)
    local states
    states=$(SLURM_CONF=$conf sinfo -h -N -p debug -o '%N %t' 2>/dev/null | sort -u) || return 1
    [ "$(grep -cE '^node[12] (idle|mix|alloc|comp)$' <<<"$states")" = 2 ]
  }
  _al_dbd_up() { SLURM_CONF=$conf sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx anylaunch; }
  _al_healthy() {
    [ -f "$conf" ] && _al_pid_alive "$run/slurmctld.pid" && _al_pid_alive "$run/slurmd-node1.pid" \
      && _al_pid_alive "$run/slurmd-node2.pid" && _al_pid_alive "$run/slurmdbd.pid" \
      && SLURM_CONF=$conf scontrol ping 2>/dev/null | grep -q UP && _al_nodes_up && _al_dbd_up
  }

  _al_install() {
    local missing=0 bin
    for bin in slurmctld slurmd slurmdbd sbatch munged mariadbd; do
      command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || missing=1
    done
    [ "$missing" = 0 ] && return 0
    _al_log "installing Debian packages"
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
      --no-install-recommends slurm-wlm slurmctld slurmd slurm-client munge slurmdbd \
      mariadb-server >/dev/null
  }

  _al_hosts() {
    local i
    for i in 0 1; do
      grep -qE "^${addrs[$i]}[[:space:]]+${nodes[$i]}([[:space:]]|$)" /etc/hosts \
        || echo "${addrs[$i]} ${nodes[$i]}" >>/etc/hosts
    done
  }

  _al_munge() {
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 755 /run/munge
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
      _al_log "starting munged"
      runuser -u munge -- /usr/sbin/munged --force
      _al_wait 10 munged sh -c 'munge -n | unmunge'
    fi
  }

  _al_mariadb() {
    local data=$state/mysql
    if [ ! -d "$data/mysql" ]; then
      _al_log "initializing MariaDB in $data"
      mkdir -p "$data" && chown mysql:mysql "$data"
      mariadb-install-db --no-defaults --datadir="$data" --user=mysql \
        --auth-root-authentication-method=socket >/dev/null
    fi
    if ! mariadb-admin --no-defaults --socket="$db_sock" ping >/dev/null 2>&1; then
      _al_log "starting MariaDB on 127.0.0.1:$db_port"
      rm -f "$db_sock"
      mkdir -p "$run/mariadb" && chown mysql:mysql "$run/mariadb"
      setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$data" \
        --socket="$db_sock" --port="$db_port" --bind-address=127.0.0.1 \
        --pid-file="$run/mariadb/mariadb.pid" --log-error="$data/mariadb.err" \
        --skip-log-bin --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
      _al_wait 30 MariaDB mariadb-admin --no-defaults --socket="$db_sock" ping
    fi
    mariadb --no-defaults --socket="$db_sock" -u root <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$db_pass';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
  }

  _al_write_if_changed() { # path mode content: returns 0 if the file changed
    local path=$1 perm=$2 content=$3
    if [ -f "$path" ] && [ "$(cat "$path")" = "$content" ]; then return 1; fi
    printf '%s\n' "$content" >"$path.tmp" && chmod "$perm" "$path.tmp" && mv "$path.tmp" "$path"
  }

  _al_configs() { # returns 0 if slurm.conf changed (the daemons must restart)
    local host changed=1 i
    host=$(hostname -s)
    local slurm_conf="# generated by scripts/provision/20-slurm.sh
ClusterName=anylaunch
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job waits cred_expire+1 s before it may start again (default 120 s): retries
# would dominate the tests
AuthInfo=cred_expire=5
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd-%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
PropagateResourceLimits=NONE
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=64
KillWait=2
MinJobAge=10
InactiveLimit=0
JobRequeue=1
MaxJobCount=20000
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=${nodes[0]} NodeAddr=${addrs[0]} NodeHostname=${nodes[0]} Port=${node_ports[0]} CPUs=4 RealMemory=4096 State=UNKNOWN
NodeName=${nodes[1]} NodeAddr=${addrs[1]} NodeHostname=${nodes[1]} Port=${node_ports[1]} CPUs=4 RealMemory=4096 State=UNKNOWN
PartitionName=debug Nodes=${nodes[0]},${nodes[1]} Default=YES MaxTime=INFINITE State=UP
PartitionName=batch Nodes=${nodes[0]},${nodes[1]} Default=NO MaxTime=INFINITE State=UP"
    local dbd="# generated by scripts/provision/20-slurm.sh
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
AuthType=auth/munge
PidFile=$run/slurmdbd.pid
LogFile=$state/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db"
    _al_write_if_changed "$dbd_conf" 600 "$dbd" || true
    _al_write_if_changed "$conf" 644 "$slurm_conf" && changed=0
    return $changed
  }

  _al_start_dbd() {
    _al_pid_alive "$run/slurmdbd.pid" && _al_dbd_up && return 0
    _al_stop_pid "$run/slurmdbd.pid"
    _al_log "starting slurmdbd on port $dbd_port"
    # slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF
    SLURM_CONF=$conf setsid /usr/sbin/slurmdbd </dev/null >/dev/null 2>&1
    _al_wait 30 slurmdbd _al_dbd_up_or_add
  }
  _al_dbd_up_or_add() { # the first start registers the cluster
    SLURM_CONF=$conf sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 || return 1
    _al_dbd_up || SLURM_CONF=$conf sacctmgr -i add cluster anylaunch >/dev/null 2>&1
    _al_dbd_up
  }

  _al_stop_all() { # the Slurm daemons together, then the database slurmdbd wrote to
    _al_stop_pid "$run/slurmd-node1.pid" "$run/slurmd-node2.pid" "$run/slurmctld.pid" \
      "$run/slurmdbd.pid"
    _al_stop_pid "$run/mariadb/mariadb.pid"
  }

  _al_start() {
    local t0=$SECONDS n i
    _al_install
    mkdir -p "$state/etc" "$state/ctld" "$state/log" "$state/spool/node1" "$state/spool/node2" "$run"
    if _al_configs; then
      _al_log "configuration changed: (re)starting slurmctld and slurmd"
      _al_stop_pid "$run/slurmd-node1.pid" "$run/slurmd-node2.pid" "$run/slurmctld.pid"
    elif _al_healthy; then
      _al_log "reusing the running cluster ($conf)"
      return 0
    fi
    _al_hosts
    _al_munge
    _al_mariadb
    _al_start_dbd
    if ! _al_pid_alive "$run/slurmctld.pid"; then
      _al_log "starting slurmctld on port $ctld_port"
      setsid /usr/sbin/slurmctld -f "$conf" </dev/null >/dev/null 2>&1
    fi
    _al_wait 30 slurmctld sh -c "SLURM_CONF=$conf scontrol ping | grep -q UP"
    for i in 0 1; do
      n=${nodes[$i]}
      if ! _al_pid_alive "$run/slurmd-$n.pid"; then
        _al_log "starting slurmd $n on ${addrs[$i]}:${node_ports[$i]}"
        setsid /usr/sbin/slurmd -f "$conf" -N "$n" </dev/null >/dev/null 2>&1
      fi
    done
    if ! _al_wait 30 "both nodes" _al_nodes_up; then
      # a node left down or drained by an earlier crash: bring it back
      SLURM_CONF=$conf scontrol update nodename=node1,node2 state=resume 2>/dev/null || true
      _al_wait 20 "both nodes" _al_nodes_up
    fi
    _al_log "cluster up in $((SECONDS - t0))s (SLURM_CONF=$conf)"
  }

  case $mode in
    start) _al_start ;;
    stop) _al_stop_all ;;
    stop-dbd) _al_stop_pid "$run/slurmdbd.pid" ;;
    start-dbd) _al_start_dbd ;;
    status) _al_healthy ;;
    *) _al_log "unknown mode '$mode': use start, stop, stop-dbd, start-dbd or status"; return 2 ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  _anylaunch_slurm "${1:-start}"
else
  # sourced (scripts/test.sh): the caller's positional parameters are not ours
  _anylaunch_slurm start
  export SLURM_CONF=/var/lib/anylaunch-backends/slurm/etc/slurm.conf
fi

#!/usr/bin/env bash
# Redis from Debian's packages (bookworm: redis-server 7.0), the Celery broker of the
# distributed Airflow deployment test (tests/deployments, CeleryExecutor).
#
#   . scripts/provision/50-redis.sh         start (or reuse) it and export where it is
#   bash scripts/provision/50-redis.sh      the same, in a subshell (exports are lost)
#   bash scripts/provision/50-redis.sh stop stop it (its data goes with it: a test broker)
#
# Loopback only, on a fixed port, no persistence (a broker for tests), no password (loopback).
# Fixed machine paths, so every clone shares one server:
#   pidfile   /run/anylaunch-backends/redis/redis.pid
#   log, dir  /var/lib/anylaunch-backends/redis/{redis.log,}
# Exports:
#   ANYLAUNCH_REDIS_URL=redis://127.0.0.1:16379/0
# Sourced by scripts/test.sh under `set -euo pipefail`: never exits on success, fails loudly.

_anylaunch_redis_main() {
  local mode=${1:-start}
  local run_dir=/run/anylaunch-backends/redis
  local state_dir=/var/lib/anylaunch-backends/redis
  local port=16379

  _redis_alive() { [ -s "$run_dir/redis.pid" ] && kill -0 "$(cat "$run_dir/redis.pid")" 2>/dev/null; }
  _redis_up() { [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; }
  _redis_stop() {
    local pid i
    if _redis_alive; then
      pid=$(cat "$run_dir/redis.pid")
      kill "$pid" 2>/dev/null || true
      for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$run_dir/redis.pid"
  }

  if [ "$mode" = stop ]; then
    _redis_stop
    echo "redis: stopped"
    return 0
  fi
  if [ "$mode" != start ]; then
    echo "usage: bash scripts/provision/50-redis.sh [start|stop]" >&2
    return 2
  fi

  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis: installing Debian's redis-server"
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
      --no-install-recommends redis-server >/dev/null
  fi
  mkdir -p "$run_dir" "$state_dir"
  local lock_fd
  exec {lock_fd}>"$state_dir/provision.lock"
  if ! flock -w 120 "$lock_fd"; then
    exec {lock_fd}>&-
    echo "redis: another provisioning run holds $state_dir/provision.lock" >&2
    return 1
  fi
  if _redis_alive && _redis_up; then
    exec {lock_fd}>&-
    echo "redis: reusing the server at 127.0.0.1:$port"
    return 0
  fi
  _redis_stop
  if _redis_up; then
    exec {lock_fd}>&-
    echo "redis: port $port is taken by a process without our pidfile; stop it first" >&2
    return 1
  fi
  echo "redis: starting redis-server on 127.0.0.1:$port"
  # --daemonize yes: the server detaches (outlives the shell and the test run) and writes its
  # own pidfile; the lock's fd is closed for it so it does not hold the lock while it runs
  redis-server --bind 127.0.0.1 --port "$port" --protected-mode no --daemonize yes \
    --pidfile "$run_dir/redis.pid" --logfile "$state_dir/redis.log" --dir "$state_dir" \
    --save '' --appendonly no --databases 64 </dev/null {lock_fd}>&-
  local i
  for i in $(seq 100); do _redis_up && break; sleep 0.1; done
  exec {lock_fd}>&-
  if ! _redis_up; then
    echo "redis: the server did not come up on 127.0.0.1:$port; tail of $state_dir/redis.log:" >&2
    tail -n 30 "$state_dir/redis.log" >&2
    return 1
  fi
  echo "redis: server at 127.0.0.1:$port"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  _anylaunch_redis_main "${1:-start}"
else
  # sourced: the caller's positional parameters are not ours, so always start
  _anylaunch_redis_main start
  export ANYLAUNCH_REDIS_URL=redis://127.0.0.1:16379/0
fi
unset -f _anylaunch_redis_main _redis_alive _redis_up _redis_stop

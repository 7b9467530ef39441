#!/usr/bin/env bash
# moto server: AWS APIs (Batch, SageMaker, CloudWatch Logs, IAM, S3, ...) on loopback, served to
# real botocore over HTTP, for the aws_batch and aws_sagemaker schedulers' tests.
#
#   . scripts/provision/40-moto.sh         start (or reuse) it and export where it is
#   bash scripts/provision/40-moto.sh      the same, in a subshell (exports are lost)
#   bash scripts/provision/40-moto.sh stop stop it (its in-memory AWS state goes with it)
#
# moto runs AWS Batch jobs as containers on the Docker engine named by DOCKER_HOST (exported by
# 10-docker.sh, which runs first); the server is restarted when DOCKER_HOST changes.
# Fixed machine paths, so every clone shares one server:
#   pidfile, docker host   /run/anylaunch-backends/moto/{moto.pid,docker_host}
#   log                    /var/lib/anylaunch-backends/moto/moto.log
# Exports (the tests turn them into AWS_ENDPOINT_URL and credentials inside their own fixtures,
# so nothing else in the run talks to moto by accident):
#   ANYLAUNCH_MOTO_URL=http://127.0.0.1:15000
#   ANYLAUNCH_MOTO_REGION=us-east-1
#   ANYLAUNCH_MOTO_ACCESS_KEY_ID=testing  ANYLAUNCH_MOTO_SECRET_ACCESS_KEY=testing  (fake)
# Sourced by scripts/test.sh under `set -euo pipefail`: never exits on success, fails loudly.

_anylaunch_moto_main() {
  local mode=${1:-start}
  local run_dir=/run/anylaunch-backends/moto
  local state_dir=/var/lib/anylaunch-backends/moto
  local port=15000
  local url="http://127.0.0.1:$port"
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

  _moto_alive() { [ -s "$run_dir/moto.pid" ] && kill -0 "$(cat "$run_dir/moto.pid")" 2>/dev/null; }
  _moto_up() { curl -fsS -o /dev/null --max-time 2 "$url/moto-api/data.json" 2>/dev/null; }
  _moto_stop() {
    local pid i
    if _moto_alive; then
      pid=$(cat "$run_dir/moto.pid")
      kill "$pid" 2>/dev/null || true
      for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$run_dir/moto.pid" "$run_dir/docker_host"
  }

  if [ "$mode" = stop ]; then
    _moto_stop
    echo "moto: stopped"
    return 0
  fi
  if [ "$mode" != start ]; then
    echo "usage: bash scripts/provision/40-moto.sh [start|stop]" >&2
    return 2
  fi

  mkdir -p "$run_dir" "$state_dir"
  local lock_fd
  exec {lock_fd}>"$state_dir/provision.lock"
  if ! flock -w 120 "$lock_fd"; then
    exec {lock_fd}>&-
    echo "moto: another provisioning run holds $state_dir/provision.lock" >&2
    return 1
  fi
  local docker_host=${DOCKER_HOST:-}
  if _moto_alive && _moto_up && [ "$(cat "$run_dir/docker_host" 2>/dev/null)" = "$docker_host" ]; then
    exec {lock_fd}>&-
    echo "moto: reusing the server at $url (DOCKER_HOST=${docker_host:-unset})"
    return 0
  fi
  _moto_stop
  if _moto_up; then
    exec {lock_fd}>&-
    echo "moto: port $port is taken by a process without our pidfile; stop it first" >&2
    return 1
  fi
  local moto_server="$repo/.venv/bin/moto_server"
  if [ ! -x "$moto_server" ]; then
    exec {lock_fd}>&-
    echo "moto: $moto_server is missing; run 'uv sync --all-extras' (moto[server] is a dev dependency)" >&2
    return 1
  fi
  [ -n "$docker_host" ] || echo "moto: DOCKER_HOST is not set: AWS Batch jobs will fail instead of running" >&2
  echo "moto: starting $moto_server on $url (DOCKER_HOST=${docker_host:-unset})"
  # setsid: the server outlives the shell (and the test run) that started it. MOTO_PORT is what
  # moto tells the Batch containers it started, should they call back.
  # The server writes its own pid (setsid may fork), and must not inherit the lock's fd: an
  # inherited copy would hold the lock for as long as the server runs.
  # shellcheck disable=SC2016
  DOCKER_HOST=$docker_host MOTO_PORT=$port setsid sh -c 'echo $$ >"$0"; exec "$1" -H 127.0.0.1 -p "$2"' \
    "$run_dir/moto.pid" "$moto_server" "$port" >>"$state_dir/moto.log" 2>&1 </dev/null {lock_fd}>&- &
  printf '%s' "$docker_host" >"$run_dir/docker_host"
  local i
  for i in $(seq 100); do _moto_up && break; sleep 0.1; done
  exec {lock_fd}>&-
  if ! _moto_up; then
    echo "moto: the server did not come up on $url; tail of $state_dir/moto.log:" >&2
    tail -n 30 "$state_dir/moto.log" >&2
    return 1
  fi
  echo "moto: server at $url"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  _anylaunch_moto_main "${1:-start}"
else
  # sourced: the caller's positional parameters are not ours, so always start
  _anylaunch_moto_main start
  export ANYLAUNCH_MOTO_URL=http://127.0.0.1:15000
  export ANYLAUNCH_MOTO_REGION=us-east-1
  export ANYLAUNCH_MOTO_ACCESS_KEY_ID=testing
  export ANYLAUNCH_MOTO_SECRET_ACCESS_KEY=testing
fi
unset -f _anylaunch_moto_main _moto_alive _moto_up _moto_stop

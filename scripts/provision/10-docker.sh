#!/usr/bin/env bash
# Docker engine for the local_docker scheduler and the Docker workspace; the kubelet's
# dockershim and moto's AWS Batch run their containers on this same engine.
#
#   . scripts/provision/10-docker.sh          install (apt), start idempotently, build images
#   bash scripts/provision/10-docker.sh       the same, in a subshell (exports are lost)
#   bash scripts/provision/10-docker.sh stop  stop the registry and dockerd (state is kept)
#
# Fixed machine paths, so every clone shares one engine:
#   socket      /run/anylaunch-backends/docker/docker.sock   (exec-root, pidfiles next to it)
#   state       /var/lib/anylaunch-backends/docker/{data,registry,*.log}
# Exports:
#   DOCKER_HOST=unix:///run/anylaunch-backends/docker/docker.sock
#   ANYLAUNCH_DOCKER_REGISTRY=127.0.0.1:5555   a local registry (Debian docker-registry) that the
#                                              engine pushes to without TLS (127.0.0.0/8)
# Images, made locally (no public registry is reachable):
#   busybox:latest         /bin/busybox from busybox-static with every applet linked;
#                          PATH set, CMD ["sh"] (has sh, nc, wget, nslookup, httpd, ...)
#   anylaunch-python:3.11  Debian bookworm (debootstrap --variant=minbase --include=python3):
#                          python3 is Python 3.11. Built once (~1 min) and cached as
#                          ${ANYLAUNCH_CACHE_DIR:-$HOME/.cache/anylaunch}/docker/anylaunch-python-3.11-bookworm-v1.tar.gz,
#                          then `docker load`ed whenever the engine lacks it.
# Sourced by scripts/test.sh under `set -euo pipefail`: never exits on success, fails loudly.

_anylaunch_docker_main() {
  local run_dir=/run/anylaunch-backends/docker
  local state_dir=/var/lib/anylaunch-backends/docker
  local sock="$run_dir/docker.sock"
  local registry_addr=127.0.0.1:5555
  local cache_dir="${ANYLAUNCH_CACHE_DIR:-$HOME/.cache/anylaunch}/docker"
  local python_tar="$cache_dir/anylaunch-python-3.11-bookworm-v1.tar.gz"
  local mirror="${ANYLAUNCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  local mode="${1:-start}"

  _dk() { docker -H "unix://$sock" "$@"; }
  _alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
  _engine_up() { [ -S "$sock" ] && _dk version >/dev/null 2>&1; }

  if [ "$mode" = stop ]; then
    local pidfile pid
    for pidfile in "$run_dir/registry.pid" "$run_dir/docker.pid"; do
      if _alive "$pidfile"; then
        pid=$(cat "$pidfile")
        kill "$pid"
        # dockerd stops running containers first (their stop timeout), so allow some time
        for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
      fi
      rm -f "$pidfile"
    done
    echo "docker: stopped (state kept in $state_dir)"
    return 0
  fi
  if [ "$mode" != start ]; then
    echo "usage: bash scripts/provision/10-docker.sh [start|stop]" >&2
    return 2
  fi

  # --- packages ----------------------------------------------------------------------------
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "docker: installing ${missing[*]}"
    local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >/dev/null; then
      apt-get -o DPkg::Lock::Timeout=600 -qq update
      DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >/dev/null
    fi
  fi
  command -v docker >/dev/null 2>&1 || { echo "docker: no docker CLI after install" >&2; return 1; }

  mkdir -p "$run_dir" "$state_dir" "$cache_dir"
  # one provisioner at a time (another clone's test run may be sourcing this script too)
  local lock_fd
  exec {lock_fd}>"$state_dir/provision.lock"
  if ! flock -w 900 "$lock_fd"; then
    exec {lock_fd}>&-
    echo "docker: another provisioning run holds $state_dir/provision.lock" >&2
    return 1
  fi
  local rc=0
  _anylaunch_docker_start || rc=$?
  exec {lock_fd}>&-
  return "$rc"
}

_anylaunch_docker_start() {
  # Called in an `||` list, where `set -e` does not apply: every step checks its own result.
  local i tmp
  # --- dockerd -----------------------------------------------------------------------------
  if ! _engine_up; then
    if _alive "$run_dir/docker.pid"; then
      kill "$(cat "$run_dir/docker.pid")" 2>/dev/null || true  # alive but not answering
      sleep 2
    fi
    rm -f "$run_dir/docker.pid" "$sock"
    echo "docker: starting dockerd on $sock"
    # setsid: the engine outlives the shell (and test run) that started it; it must not
    # inherit the provisioning lock, or the next run would wait for it forever
    setsid dockerd -H "unix://$sock" --data-root "$state_dir/data" --exec-root "$run_dir/exec" \
      --pidfile "$run_dir/docker.pid" >>"$state_dir/dockerd.log" 2>&1 </dev/null {lock_fd}>&- &
    for i in $(seq 120); do _engine_up && break; sleep 0.25; done
    if ! _engine_up; then
      echo "docker: dockerd did not come up; tail of $state_dir/dockerd.log:" >&2
      tail -n 30 "$state_dir/dockerd.log" >&2
      return 1
    fi
  fi

  # --- local registry (for image_repo pushes) ----------------------------------------------
  if ! curl -fsS "http://$registry_addr/v2/" >/dev/null 2>&1; then
    mkdir -p "$state_dir/registry"
    cat >"$state_dir/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $state_dir/registry
  delete:
    enabled: true
http:
  addr: $registry_addr
EOF
    setsid docker-registry serve "$state_dir/registry.yml" \
      >>"$state_dir/registry.log" 2>&1 </dev/null {lock_fd}>&- &
    echo $! >"$run_dir/registry.pid"
    for i in $(seq 40); do curl -fsS "http://$registry_addr/v2/" >/dev/null 2>&1 && break; sleep 0.25; done
    if ! curl -fsS "http://$registry_addr/v2/" >/dev/null 2>&1; then
      echo "docker: registry did not come up on $registry_addr; tail of its log:" >&2
      tail -n 30 "$state_dir/registry.log" >&2
      return 1
    fi
  fi

  # --- images ------------------------------------------------------------------------------
  if ! _dk image inspect busybox:latest >/dev/null 2>&1; then
    echo "docker: building busybox:latest from busybox-static"
    tmp=$(mktemp -d)
    mkdir -p "$tmp/bin" "$tmp/sbin" "$tmp/usr/bin" "$tmp/usr/sbin" "$tmp/etc" "$tmp/root" "$tmp/tmp"
    chmod 1777 "$tmp/tmp"
    cp /bin/busybox "$tmp/bin/busybox"
    local applet
    for applet in $("$tmp/bin/busybox" --list-full); do
      [ -e "$tmp/$applet" ] || ln -s /bin/busybox "$tmp/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$tmp/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$tmp/etc/group"
    tar -C "$tmp" -c . | _dk import \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      -c 'CMD ["sh"]' - busybox:latest >/dev/null || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
  fi

  if ! _dk image inspect anylaunch-python:3.11 >/dev/null 2>&1; then
    if [ ! -s "$python_tar" ]; then
      echo "docker: building anylaunch-python:3.11 with debootstrap (once; cached in $python_tar)"
      tmp=$(mktemp -d)
      if ! debootstrap --variant=minbase --include=python3 bookworm "$tmp/rootfs" "$mirror" \
        >"$state_dir/debootstrap.log" 2>&1; then
        echo "docker: debootstrap failed; tail of $state_dir/debootstrap.log:" >&2
        tail -n 30 "$state_dir/debootstrap.log" >&2
        rm -rf "$tmp"
        return 1
      fi
      rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"*
      tar -C "$tmp/rootfs" -c . | _dk import \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' - anylaunch-python:3.11 >/dev/null \
        || { rm -rf "$tmp"; return 1; }
      rm -rf "$tmp"
      if _dk save anylaunch-python:3.11 | gzip -1 >"$python_tar.tmp"; then
        mv "$python_tar.tmp" "$python_tar"
      else
        rm -f "$python_tar.tmp"
        echo "docker: could not cache anylaunch-python:3.11 (next runs rebuild it)" >&2
      fi
    else
      echo "docker: loading anylaunch-python:3.11 from $python_tar"
      _dk load -q -i "$python_tar" >/dev/null || { echo "docker: $python_tar does not load; delete it" >&2; return 1; }
    fi
  fi
  for i in busybox:latest anylaunch-python:3.11; do
    _dk image inspect "$i" >/dev/null 2>&1 || { echo "docker: image $i is missing" >&2; return 1; }
  done
  echo "docker: engine at unix://$sock; images busybox:latest anylaunch-python:3.11; registry $registry_addr"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  _anylaunch_docker_main "${1:-start}"
else
  # sourced: the caller's positional parameters are not ours, so always start
  _anylaunch_docker_main start
  export DOCKER_HOST=unix:///run/anylaunch-backends/docker/docker.sock
  export ANYLAUNCH_DOCKER_REGISTRY=127.0.0.1:5555
fi
unset -f _anylaunch_docker_main _anylaunch_docker_start _dk _alive _engine_up

#!/usr/bin/env bash
# A one-node Kubernetes 1.20 cluster for the kubernetes and kubernetes_mcad schedulers.
#
#   . scripts/provision/30-kubernetes.sh          build (once), start idempotently, export
#   bash scripts/provision/30-kubernetes.sh       the same, in a subshell (exports are lost)
#   bash scripts/provision/30-kubernetes.sh stop  stop every daemon (state is kept)
#
# No kube-apiserver binary is packaged for Debian, so kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet are built from Debian's `kubernetes` source package by
# kubernetes/build.sh (~4-6 min, once) and cached in
#   ${ANYLAUNCH_CACHE_DIR:-$HOME/.cache/anylaunch}/kubernetes-1.20/
# together with the pod sandbox ("pause") binary built from kubernetes/pause.go.
#
# Control plane: Debian's etcd (127.0.0.1:12379) and kube-apiserver on https://127.0.0.1:6443
# (token auth, AlwaysAllow, its own CA), kube-controller-manager (Jobs, garbage collection,
# service account tokens) and kube-scheduler. Node: a kubelet named anylaunch-node with
# dockershim on the engine of 10-docker.sh (pods use the docker bridge network; no CNI, no
# kube-proxy, no cluster DNS). Custom resources installed: Volcano Job, MCAD AppWrapper and
# scheduler-plugins PodGroup (kubernetes/crds/), schemas only: no Volcano/MCAD controllers.
#
# Fixed machine paths, so every clone shares one cluster:
#   state   /var/lib/anylaunch-backends/kubernetes/{etcd,pki,kubelet,*.log,admin.kubeconfig}
#           audit.log: the API server's audit log (a JSON line per request: client, verb,
#           object; no bodies), rotated at 100 MB into audit-<time>.log, two of them kept
#   pids    /run/anylaunch-backends/kubernetes/*.pid
# Exports:
#   KUBECONFIG=/var/lib/anylaunch-backends/kubernetes/admin.kubeconfig
#   ANYLAUNCH_KUBERNETES_NODE=anylaunch-node   the node that runs pods
# Sourced by scripts/test.sh under `set -euo pipefail`: never exits on success, fails loudly.

_anylaunch_k8s_main() {
  local here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kubernetes"
  local state=/var/lib/anylaunch-backends/kubernetes
  local run=/run/anylaunch-backends/kubernetes
  local bin="${ANYLAUNCH_CACHE_DIR:-$HOME/.cache/anylaunch}/kubernetes-1.20"
  local docker_sock=/run/anylaunch-backends/docker/docker.sock
  local node=anylaunch-node
  local mode="${1:-start}"
  local daemons=(kubelet kube-scheduler kube-controller-manager kube-apiserver etcd)

  if [ "$mode" = stop ]; then
    local d pid
    for d in "${daemons[@]}"; do
      if [ -s "$run/$d.pid" ] && kill -0 "$(cat "$run/$d.pid")" 2>/dev/null; then
        pid=$(cat "$run/$d.pid")
        kill "$pid"
        for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
      fi
      rm -f "$run/$d.pid"
    done
    # pod containers outlive the kubelet: remove them so a restart starts clean
    if [ -S "$docker_sock" ]; then
      local ids
      ids=$(docker -H "unix://$docker_sock" ps -aq --filter label=io.kubernetes.pod.name 2>/dev/null || true)
      [ -z "$ids" ] || docker -H "unix://$docker_sock" rm -f $ids >/dev/null 2>&1 || true
    fi
    # and so do the pods' volume mounts (tmpfs for secrets and /dev/shm): unmount them,
    # deepest first, so the state directory can be removed
    local mnt
    for mnt in $(awk -v root="$state/" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r); do
      umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
    done
    echo "kubernetes: stopped (state kept in $state)"
    return 0
  fi
  if [ "$mode" != start ]; then
    echo "usage: bash scripts/provision/30-kubernetes.sh [start|stop]" >&2
    return 2
  fi

  mkdir -p "$state" "$run"
  local lock_fd
  exec {lock_fd}>"$state/provision.lock"
  if ! flock -w 1800 "$lock_fd"; then
    exec {lock_fd}>&-
    echo "kubernetes: another provisioning run holds $state/provision.lock" >&2
    return 1
  fi
  local rc=0
  _anylaunch_k8s_start || rc=$?
  exec {lock_fd}>&-
  return "$rc"
}

_anylaunch_k8s_start() {
  _alive() {  # the pidfile's process runs and is that daemon (not a reused pid)
    [ -s "$run/$1.pid" ] && grep -qa -- "$1" "/proc/$(cat "$run/$1.pid")/cmdline" 2>/dev/null
  }
  _wait() {  # seconds, command...: polls every 0.25 s
    local n=$(($1 * 4))
    shift
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
    "$@" >/dev/null 2>&1
  }
  _etcd_ok() { curl -fsS --max-time 2 http://127.0.0.1:12379/health; }
  _api_ok() { _api https://127.0.0.1:6443/readyz; }
  _kubelet_ok() { curl -fsS --max-time 2 http://127.0.0.1:10248/healthz; }
  _fail() {
    echo "kubernetes: $1; tail of $state/$2.log:" >&2
    tail -n 30 "$state/$2.log" >&2 || true
    return 1
  }
  _spawn() {  # name, then the command: detached (setsid), logging to $state/name.log
    local name=$1
    shift
    # the daemon must not inherit the provisioning lock (it would hold it while it runs)
    setsid "$@" >>"$state/$name.log" 2>&1 </dev/null {lock_fd}>&- &
    echo $! >"$run/$name.pid"
  }
  _api() { curl -fsS --max-time 10 --cacert "$state/pki/ca.crt" -H "Authorization: Bearer $token" "$@"; }

  # --- packages and binaries ---------------------------------------------------------------
  local missing=()
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v go >/dev/null 2>&1 || [ -x "$bin/pause" ] || missing+=(golang-go)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "kubernetes: installing ${missing[*]}"
    local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >/dev/null; then
      apt-get -o DPkg::Lock::Timeout=600 -qq update
      DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >/dev/null
    fi
  fi
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    if [ ! -x "$bin/$b" ]; then
      echo "kubernetes: building Kubernetes 1.20 from Debian's source package (once; cached in $bin)"
      bash "$here/build.sh" "$bin" >"$state/build.log" 2>&1 || _fail "the build failed" build || return 1
      break
    fi
  done
  if [ ! -x "$bin/pause" ]; then
    (cd "$here" && CGO_ENABLED=0 GO111MODULE=off GOCACHE="${bin}.gocache" go build -o "$bin/pause.tmp" pause.go) &&
      mv "$bin/pause.tmp" "$bin/pause"
  fi

  # --- credentials (once) ------------------------------------------------------------------
  local pki=$state/pki node_ip
  node_ip=$(ip -4 route get 192.0.2.254 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}' | head -n1)
  [ -n "$node_ip" ] || node_ip=$(hostname -I | awk '{print $1}')
  if [ ! -s "$pki/tokens.csv" ]; then
    mkdir -p "$pki"
    (
      cd "$pki"
      openssl genrsa -out ca.key 2048 2>/dev/null
      openssl req -x509 -new -key ca.key -days 3650 -subj /CN=anylaunch-kubernetes-ca -out ca.crt 2>/dev/null
      openssl genrsa -out apiserver.key 2048 2>/dev/null
      openssl req -new -key apiserver.key -subj /CN=kube-apiserver -out apiserver.csr 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:10.96.0.1\n' >san.ext
      openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile san.ext -out apiserver.crt 2>/dev/null
      openssl genrsa -out sa.key 2048 2>/dev/null
      openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
      printf '%s,admin,admin,system:masters\n' "$(openssl rand -hex 16)" >tokens.csv.tmp
      chmod 600 ./*.key tokens.csv.tmp
      mv tokens.csv.tmp tokens.csv
    )
  fi
  local token
  token=$(cut -d, -f1 "$pki/tokens.csv")
  local kubeconfig=$state/admin.kubeconfig
  cat >"$kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: anylaunch
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: anylaunch
  context: {cluster: anylaunch, user: admin, namespace: default}
current-context: anylaunch
EOF
  chmod 600 "$kubeconfig.tmp"
  mv "$kubeconfig.tmp" "$kubeconfig"

  # --- etcd ----------------------------------------------------------------------------------
  if ! _alive etcd; then
    echo "kubernetes: starting etcd"
    _spawn etcd etcd --name anylaunch --data-dir "$state/etcd" \
      --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
      --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
      --initial-cluster anylaunch=http://127.0.0.1:12380 --log-level warn
  fi
  _wait 30 _etcd_ok || _fail "etcd is not healthy" etcd || return 1

  # --- kube-apiserver --------------------------------------------------------------------------
  # audit log: one JSON event per request (Metadata level: who, verb, object; no bodies), read by
  # the engine-scale benchmark to count the requests each client made
  printf '%s\n' 'apiVersion: audit.k8s.io/v1' 'kind: Policy' 'omitStages: [RequestReceived]' \
    'rules:' '- level: Metadata' >"$state/audit-policy.yaml.tmp"
  mv "$state/audit-policy.yaml.tmp" "$state/audit-policy.yaml"
  if _alive kube-apiserver &&
    ! grep -qa -- --audit-log-path= "/proc/$(cat "$run/kube-apiserver.pid")/cmdline"; then
    # never restarted behind the back of whoever uses the cluster now
    echo "kubernetes: note: the running kube-apiserver writes no audit log until it is restarted"
  fi
  # TTLAfterFinished (alpha in 1.20, on by default from 1.21): Jobs with ttlSecondsAfterFinished
  # are deleted by the controller-manager, as on the clusters users run; the API server drops
  # the field without the gate. A daemon started without it is restarted once, here.
  local gates=--feature-gates=TTLAfterFinished=true d
  for d in kube-apiserver kube-controller-manager; do
    if _alive "$d" && ! grep -qa -- "$gates" "/proc/$(cat "$run/$d.pid")/cmdline"; then
      echo "kubernetes: restarting $d with $gates"
      kill "$(cat "$run/$d.pid")"
      for _ in $(seq 40); do _alive "$d" || break; sleep 0.25; done
      rm -f "$run/$d.pid"
    fi
  done
  if ! _alive kube-apiserver; then
    echo "kubernetes: starting kube-apiserver on https://127.0.0.1:6443"
    _spawn kube-apiserver "$bin/kube-apiserver" \
      --etcd-servers=http://127.0.0.1:12379 \
      --bind-address=127.0.0.1 --secure-port=6443 --advertise-address="$node_ip" \
      --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
      --token-auth-file="$pki/tokens.csv" --authorization-mode=AlwaysAllow \
      --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
      --service-account-issuer=https://kubernetes.default.svc \
      --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
      --kubelet-preferred-address-types=InternalIP --profiling=false \
      --audit-policy-file="$state/audit-policy.yaml" --audit-log-path="$state/audit.log" \
      --audit-log-format=json --audit-log-maxsize=100 --audit-log-maxbackup=2 "$gates" --v=1
  fi
  _wait 90 _api_ok || _fail "kube-apiserver is not ready" kube-apiserver || return 1

  # --- controller-manager, scheduler -----------------------------------------------------------
  if ! _alive kube-controller-manager; then
    echo "kubernetes: starting kube-controller-manager"
    _spawn kube-controller-manager "$bin/kube-controller-manager" \
      --kubeconfig="$kubeconfig" --leader-elect=false --port=0 --bind-address=127.0.0.1 \
      --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
      --use-service-account-credentials=false --controllers='*,-csrsigning,-nodeipam' \
      "$gates" --v=1
  fi
  if ! _alive kube-scheduler; then
    echo "kubernetes: starting kube-scheduler"
    _spawn kube-scheduler "$bin/kube-scheduler" \
      --kubeconfig="$kubeconfig" --leader-elect=false --port=0 --bind-address=127.0.0.1 --v=1
  fi

  # --- kubelet (needs 10-docker.sh's engine) ---------------------------------------------------
  if [ ! -S "$docker_sock" ]; then
    echo "kubernetes: no Docker engine at $docker_sock (run scripts/provision/10-docker.sh first)" >&2
    return 1
  fi
  local dk=(docker -H "unix://$docker_sock")
  if ! "${dk[@]}" image inspect anylaunch/pause:3.2 >/dev/null 2>&1; then
    local tmp
    tmp=$(mktemp -d)
    cp "$bin/pause" "$tmp/pause"
    tar -C "$tmp" -c pause | "${dk[@]}" import -c 'ENTRYPOINT ["/pause"]' - anylaunch/pause:3.2 >/dev/null
    rm -rf "$tmp"
  fi
  if ! _alive kubelet; then
    mkdir -p "$state/kubelet"
    cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
oomScoreAdj: 0
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 250
resolvConf: /etc/resolv.conf
EOF
    echo "kubernetes: starting kubelet (node $node, dockershim on $docker_sock)"
    _spawn kubelet "$bin/kubelet" \
      --kubeconfig="$kubeconfig" --config="$state/kubelet.yaml" \
      --container-runtime=docker --docker-endpoint="unix://$docker_sock" \
      --pod-infra-container-image=anylaunch/pause:3.2 \
      --root-dir="$state/kubelet" --cert-dir="$state/kubelet-pki" \
      --experimental-dockershim-root-directory="$state/dockershim" \
      --hostname-override="$node" --node-ip="$node_ip" --v=1
  fi
  # the node object may still say Ready from an earlier kubelet: wait for this one first
  _wait 90 _kubelet_ok || _fail "the kubelet is not healthy" kubelet || return 1

  # --- custom resource definitions -------------------------------------------------------------
  local py=python3
  [ -x "$here/../../../.venv/bin/python" ] && py="$here/../../../.venv/bin/python"
  local crd name
  for crd in "$here"/crds/*.yaml; do
    name=$("$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$crd")
    if ! _api "https://127.0.0.1:6443/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name" >/dev/null 2>&1; then
      "$py" -c 'import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' "$crd" |
        _api -X POST -H 'Content-Type: application/json' --data-binary @- \
          https://127.0.0.1:6443/apis/apiextensions.k8s.io/v1/customresourcedefinitions >/dev/null ||
        { echo "kubernetes: could not install the CRD $crd" >&2; return 1; }
    fi
  done

  # --- wait: node Ready, default service account, CRDs established -----------------------------
  local ready=""
  for _ in $(seq 240); do
    if _api "https://127.0.0.1:6443/api/v1/nodes/$node" 2>/dev/null |
      "$py" -c 'import json, sys; c = json.load(sys.stdin)["status"].get("conditions", []); sys.exit(0 if any(x["type"] == "Ready" and x["status"] == "True" for x in c) else 1)' 2>/dev/null &&
      _api https://127.0.0.1:6443/api/v1/namespaces/default/serviceaccounts/default >/dev/null 2>&1; then
      ready=1
      break
    fi
    sleep 0.5
  done
  [ -n "$ready" ] || _fail "node $node did not become Ready (or no default service account)" kubelet || return 1
  for crd in "$here"/crds/*.yaml; do
    name=$("$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$crd")
    for _ in $(seq 40); do
      _api "https://127.0.0.1:6443/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name" |
        grep -q '"type": *"Established"' && break
      sleep 0.25
    done
  done
  echo "kubernetes: cluster up (API https://127.0.0.1:6443, node $node Ready); KUBECONFIG=$kubeconfig"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  _anylaunch_k8s_main "${1:-start}"
else
  # sourced: the caller's positional parameters are not ours, so always start
  _anylaunch_k8s_main start
  export KUBECONFIG=/var/lib/anylaunch-backends/kubernetes/admin.kubeconfig
  export ANYLAUNCH_KUBERNETES_NODE=anylaunch-node
fi
unset -f _anylaunch_k8s_main _anylaunch_k8s_start _alive _wait _fail _spawn _api _etcd_ok _api_ok \
  _kubelet_ok

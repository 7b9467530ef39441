#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet 1.20 from Debian's
# `kubernetes` source package (no server binary is packaged) into $1 (the binary cache).
# Why each step (measured on Debian bookworm, see the project's backend notes):
# - GOPATH mode with Debian's Go 1.19: the 1.20 tree predates the module layout Go 1.19 expects.
# - `make gen_openapi`: pkg/generated/openapi is not in the source tarball.
# - The vendored modern-go/reflect2 1.0.1 crashes under Go >= 1.18 (`fatal error: fault` in
#   mapiterinit): Debian's reflect2 / json-iterator copies are used instead.
# - This kernel refuses negative oom_score_adj, so the kubelet's negative constants become 0.
set -euo pipefail

out=${1:?usage: build.sh OUTPUT_DIR}
work=${K8S_BUILD_DIR:-${out}.build}
log() { echo "[kubernetes build] $*" >&2; }

apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

src_list=/etc/apt/sources.list.d/anylaunch-deb-src.sources
if [ ! -e "$src_list" ]; then
  log "adding a deb-src entry for bookworm"
  cat >"$src_list" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt_get update -qq
fi
pkgs=(golang-go make rsync dpkg-dev golang-github-modern-go-reflect2-dev
  golang-github-json-iterator-go-dev)
if ! dpkg -s "${pkgs[@]}" >/dev/null 2>&1; then
  log "installing the Go toolchain"
  apt_get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

mkdir -p "$work"
cd "$work"
if ! ls -d kubernetes-*/ >/dev/null 2>&1; then
  log "fetching the kubernetes source package"
  apt-get source --download-only kubernetes >/dev/null 2>&1 || apt-get source --download-only kubernetes
  dpkg-source --no-check -x ./kubernetes_*.dsc >/dev/null
fi
src=$(cd "$(ls -d kubernetes-*/ | head -n1)" && pwd)
export GOPATH=$work/gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE=$work/gocache
mkdir -p "$GOPATH/src/k8s.io"
ln -sfn "$src" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"

if [ ! -e .anylaunch-patched ]; then
  log "replacing vendored reflect2/json-iterator with Debian's copies"
  for dep in github.com/modern-go/reflect2 github.com/json-iterator/go; do
    rm -rf "vendor/$dep"
    mkdir -p "vendor/$dep"
    cp -r "/usr/share/gocode/src/$dep/." "vendor/$dep/"
    rm -f "vendor/$dep/go.mod" "vendor/$dep/go.sum"
  done
  log "patching negative oom_score_adj constants to 0"
  grep -rlE -- '= -99[789]\b' pkg/kubelet/dockershim pkg/kubelet/qos pkg/kubelet/cm 2>/dev/null |
    xargs -r sed -i -E 's/= -99([789])\b/= 0 \/\/ anylaunch: was -99\1 (kernel refuses negative oom_score_adj)/'
  touch .anylaunch-patched
fi

if [ ! -e pkg/generated/openapi/zz_generated.openapi.go ]; then
  log "generating openapi (make gen_openapi)"
  make gen_openapi >/dev/null
fi

mkdir -p "$out.tmp"
# in GOPATH mode the version packages live under the vendor path
version_flags=""
for pkg in component-base/version client-go/pkg/version; do
  for kv in gitVersion=v1.20.2 gitMajor=1 gitMinor=20 gitTreeState=clean; do
    version_flags+=" -X k8s.io/kubernetes/vendor/k8s.io/$pkg.$kv"
  done
done
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  log "go build ./cmd/$cmd"
  go build -o "$out.tmp/$cmd" -ldflags "-s -w $version_flags" "./cmd/$cmd"
done
rm -rf "$out"
mv "$out.tmp" "$out"
log "binaries in $out"
if [ -z "${K8S_KEEP_BUILD:-}" ]; then
  cd /
  rm -rf "$work"  # ~2 GB of sources and build cache; the binaries are all that is needed
fi

#!/usr/bin/env bash
# Build a real Kubernetes control plane for the k8s_real test tier from Debian's packages only (no Docker, no
# Go module proxy): kube-apiserver + kube-controller-manager v1.20.2 from Debian 12's `kubernetes` source
# package (it ships vendor/), etcd 3.4.23 from Debian 12's etcd-server .deb, Go 1.19 from golang-1.19-go.
# Nothing is installed system-wide: the .debs are unpacked under the cache dir.
#
# Usage: build.sh [CACHE_DIR]   (default $ECHO_MEMORY_K8S_REAL_DIR or ~/.cache/echo-memory/k8s-real)
# Result: CACHE_DIR/bin/{kube-apiserver,kube-controller-manager,etcd}. A finished build is reused: the stamp
# CACHE_DIR/bin/.complete names the source version, so a second run costs nothing.
set -euo pipefail
W=${1:-${ECHO_MEMORY_K8S_REAL_DIR:-$HOME/.cache/echo-memory/k8s-real}}
VERSION=1.20.5+really1.20.2-1.1+deb12u1
STAMP="$W/bin/.complete"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION" ] && [ -x "$W/bin/kube-apiserver" ] \
   && [ -x "$W/bin/kube-controller-manager" ] && [ -x "$W/bin/etcd" ]; then
  echo "k8s-real: reusing $W/bin (kubernetes $VERSION)"
  exit 0
fi
for tool in apt-get dpkg-source dpkg openssl; do
  command -v "$tool" >/dev/null || { echo "k8s-real: '$tool' is required to build the control plane" >&2; exit 1; }
done
[ -f /etc/apt/sources.list.d/debian.sources ] || {
  echo "k8s-real: /etc/apt/sources.list.d/debian.sources not found: the build needs Debian 12 apt sources" >&2; exit 1; }
start=$(date +%s)
mkdir -p "$W"/{apt/sources.list.d,apt/lists/partial,apt/cache/archives/partial,src,debs,root,bin,gocache,home}
# The machine's own Debian sources with source packages enabled, in a private apt state (the system's is untouched).
sed 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources >"$W/apt/sources.list.d/src.sources"
A=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$W/apt/sources.list.d"
   -o "Dir::State::Lists=$W/apt/lists" -o "Dir::Cache=$W/apt/cache")
fail() { echo "k8s-real: $1; the k8s_real tier (part of make test) cannot run without this build" >&2; exit 1; }
apt-get "${A[@]}" update -qq || fail "apt-get update of the Debian sources (with deb-src) failed"
cd "$W/src"
if [ ! -d k8s ]; then
  apt-get "${A[@]}" source --download-only "kubernetes=$VERSION" \
    || fail "Debian source package kubernetes=$VERSION is not available from the apt sources"
  dpkg-source -x "kubernetes_$VERSION.dsc" k8s.partial >/dev/null
  mv k8s.partial k8s
fi
cd "$W/debs"
apt-get "${A[@]}" download golang-1.19-go golang-1.19-src etcd-server golang-github-modern-go-reflect2-dev \
  || fail "Debian packages golang-1.19-go, etcd-server or golang-github-modern-go-reflect2-dev could not be downloaded"
for d in "$W"/debs/*.deb; do dpkg -x "$d" "$W/root"; done
# The vendored reflect2 1.0.1 crashes under Go >= 1.18: swap in Debian's 1.0.2.
R="$W/src/k8s/vendor/github.com/modern-go/reflect2"
rm -rf "$R" && cp -a "$W/root/usr/share/gocode/src/github.com/modern-go/reflect2" "$R" && rm -f "$R"/go.mod "$R"/*_test.go
# Kubernetes 1.20 builds in GOPATH mode (its hack/lib/init.sh sets GO111MODULE=off).
export GOROOT="$W/root/usr/lib/go-1.19" PATH="$W/root/usr/lib/go-1.19/bin:$PATH" GOCACHE="$W/gocache" \
       GOPATH="$W/gopath" GO111MODULE=off CGO_ENABLED=0 GOFLAGS= HOME="$W/home"
mkdir -p "$GOPATH/src/k8s.io" && ln -sfn "$W/src/k8s" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"
# pkg/generated/openapi is generated at build time (the source tarball lacks it).
go build -o "$W/bin/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
INPUTS=$( (grep -Rl --include='*.go' '^// *+k8s:openapi-gen=' pkg/apis vendor/k8s.io || true) |
          grep -v -E '^vendor/k8s.io/(code-generator|sample-apiserver)/' | xargs -r dirname | LC_ALL=C sort -u |
          sed 's#^#k8s.io/kubernetes/#' | paste -sd, -)
"$W/bin/openapi-gen" --logtostderr -i "$INPUTS" -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
  -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$W/openapi-violations.report" >/dev/null 2>&1
V=k8s.io/kubernetes/vendor/k8s.io
LD="-s -w -X $V/component-base/version.gitVersion=v1.20.2 -X $V/component-base/version.gitMajor=1 \
 -X $V/component-base/version.gitMinor=20 -X $V/client-go/pkg/version.gitVersion=v1.20.2"
for cmd in kube-apiserver kube-controller-manager; do
  nice -n 10 go build -p 2 -tags selinux,notest -ldflags "$LD" -o "$W/bin/$cmd" "./cmd/$cmd"
done
ln -sf "$W/root/usr/bin/etcd" "$W/bin/etcd"
"$W/bin/kube-apiserver" --version
"$W/bin/etcd" --version | sed -n 1p  # sed reads it all: head would SIGPIPE etcd, failing the script under pipefail
echo "$VERSION" >"$STAMP"
# Go's build cache and the unpacked source are only needed to build: drop them (~1.5 GB).
rm -rf "$W/gocache" "$W/gopath" "$W/src/k8s"
echo "k8s-real: built $W/bin in $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# Builds the Kubernetes control plane the Kubernetes tests run (test/helpers/kubernetes/cluster.ts):
# kube-apiserver, kube-controller-manager and kube-scheduler v1.20.2 from Debian 12's own source
# package (no registry or release download is reachable here; docs/testing-kubernetes.md).
# Cached outside the work tree in $BERTH_K8S_CACHE (default /var/cache/berth-k8s), keyed by the source
# package's version in bin/VERSION: does nothing when the three binaries of that version are there.
# etcd comes from Debian's etcd-server (scripts/install-system.sh); the packages below are for the
# build only.
set -euo pipefail

VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE=${BERTH_K8S_CACHE:-/var/cache/berth-k8s}
BIN=$CACHE/bin
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler)

built() {
  [ "$(cat "$BIN/VERSION" 2>/dev/null)" = "$VERSION" ] || return 1
  for binary in "${BINARIES[@]}"; do [ -x "$BIN/$binary" ] || return 1; done
}
built && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
mkdir -p "$CACHE"
# One build at a time: a second caller waits for the first one's binaries.
exec 9>"$CACHE/.lock"
flock 9
built && exit 0

echo "berth: building Kubernetes $VERSION's control plane into $BIN (tests only)" >&2
echo "berth: a cold build takes about 10 minutes on two cores and 2.6 GB in $CACHE; it is done once" >&2
started=$SECONDS
export DEBIAN_FRONTEND=noninteractive
# Source entries derived from the machine's own binary entries (the same mirror and suites).
if [ ! -f /etc/apt/sources.list.d/debian-src.sources ]; then
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
    $SUDO tee /etc/apt/sources.list.d/debian-src.sources >/dev/null
fi
$SUDO apt-get update -qq
BUILD_PACKAGES=(golang-1.19-go dpkg-dev golang-github-modern-go-reflect2-dev rsync)
$SUDO apt-get install -y -q --no-install-recommends "${BUILD_PACKAGES[@]}" >&2

cd "$CACHE"
SOURCE=$CACHE/kubernetes-${VERSION%%-*}
rm -rf "$SOURCE"
apt-get source -qq "kubernetes=$VERSION" >&2
cd "$SOURCE"
# The vendored modern-go/reflect2 v1.0.1 segfaults under Go >= 1.18: Debian's 1.0.2 has the same API.
R=vendor/github.com/modern-go/reflect2
rm -f "$R"/*.go "$R"/*.s
cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go /usr/share/gocode/src/github.com/modern-go/reflect2/*.s "$R/"
mkdir -p "$CACHE/home"
PATH=/usr/lib/go-1.19/bin:$PATH HOME=$CACHE/home GOFLAGS= GOPROXY=off \
  nice make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" >&2
mkdir -p "$BIN"
for binary in "${BINARIES[@]}"; do install -m 0755 "_output/bin/$binary" "$BIN/$binary"; done
echo "$VERSION" >"$BIN/VERSION"
echo "berth: Kubernetes control plane built in $((SECONDS - started)) s" >&2

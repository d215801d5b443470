#!/bin/bash
# The arm64 libraries and headers of an aarch64 build (issue #33 §1), in a private root:
# Debian bookworm's arm64 packages are fetched with `apt-get download` under a private apt
# configuration (APT_CONFIG: Architecture arm64; sources, lists and cache under CROSS_CACHE) and
# unpacked with `dpkg -x` into CROSS_ROOT, the recipe of the e2e suites (tests/e2e/lib.sh
# debian_root, which this script calls). The system's apt sources, its lists, its dpkg database and
# its dpkg architectures are not touched; the mirror is the one this machine's apt already uses.
# The cross compiler itself is Debian's g++-aarch64-linux-gnu (scripts/deps.sh cross).
#
# Usage: scripts/cross-root.sh CROSS_ROOT [PKG...]   (default PKGs: $CROSS_PKGS, else the list below)
#   Idempotent: packages already unpacked there are not fetched again. Prints nothing on success;
#   exit 1 with the reason on stderr when the packages cannot be fetched (no network, no mirror).
#        scripts/cross-root.sh --kernel CROSS_ROOT
#   Fetches bookworm's arm64 kernel (the package linux-image-arm64 depends on), keeps only its
#   /boot/vmlinuz-* (beside CROSS_ROOT, in kernel/) and prints its path (tests/aarch64.sh boots it).
set -euo pipefail
KERNEL=0; [ "${1:-}" = --kernel ] && { KERNEL=1; shift; }
[ $# -ge 1 ] || { echo "usage: scripts/cross-root.sh CROSS_ROOT [PKG...]" >&2; exit 2; }
ROOT=$1; shift
# What the aarch64 binaries link or include: the static hook and the unit tests (protobuf-lite,
# nettle, yaml-cpp; the header-only JSON, CLI11, toml11, Catch2), the two dynamically linked
# companions (gRPC for nri-qos-cri, libsystemd for nri-qos-systemd, cpp-httplib for nri-qos-metrics,
# with the libraries their .so files need at link time), and the image's static busybox.
DEFAULT_PKGS="libprotobuf-dev libprotobuf32 libprotobuf-lite32 nettle-dev libnettle8 libhogweed6 libgmp-dev libgmp10
  libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libcli11-dev libtoml11-dev catch2 zlib1g zlib1g-dev
  libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 libc-ares2 libc-ares-dev libre2-9 libre2-dev libssl3 libssl-dev
  libabsl-dev libabsl20220623 libupb-dev libsystemd-dev libsystemd0 libcap2 libgcrypt20 libgpg-error0 liblz4-1
  liblzma5 libzstd1 libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1 busybox-static"
[ $# -gt 0 ] || set -- ${CROSS_PKGS:-$DEFAULT_PKGS}

CROSS_CACHE=$(dirname "$ROOT")
mkdir -p "$CROSS_CACHE"
# arm64 lists only: every apt-get of debian_apt/debian_fetch reads this file first
printf 'APT::Architecture "arm64";\nAPT::Architectures { "arm64"; };\n' > "$CROSS_CACHE/apt-arm64.conf"
export APT_CONFIG=$CROSS_CACHE/apt-arm64.conf
# tests/e2e/lib.sh's private-root helpers write $E2E_CACHE/<suite>-root: point them at CROSS_ROOT
# shellcheck source-path=SCRIPTDIR source=../tests/e2e/lib.sh
. "$(dirname "$0")/../tests/e2e/lib.sh"
E2E_CACHE=$CROSS_CACHE
SUITE=$(basename "$ROOT"); SUITE=${SUITE%-root}
[ "$E2E_CACHE/$SUITE-root" = "$ROOT" ] || { echo "cross-root.sh: CROSS_ROOT must end in <suite>-root (got $ROOT)" >&2; exit 2; }
if [ $KERNEL = 1 ]; then
  K=$CROSS_CACHE/kernel
  v=$(ls "$K"/boot/vmlinuz-* 2>/dev/null | head -1 || true)
  [ -n "$v" ] && { echo "$v"; exit 0; }
  debian_apt "$SUITE"
  img=$(apt-cache "${APT_OPTS[@]}" depends linux-image-arm64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
  [ -n "$img" ] || { echo "cross-root.sh: linux-image-arm64 names no kernel" >&2; exit 1; }
  mkdir -p "$K"
  (cd "$K" && apt-get "${APT_OPTS[@]}" download -qq "$img" </dev/null) || { echo "cross-root.sh: apt-get download $img failed" >&2; exit 1; }
  dpkg-deb --fsys-tarfile "$K/${img}"_*.deb | tar -x -C "$K" ./boot
  rm -f "$K/${img}"_*.deb
  v=$(ls "$K"/boot/vmlinuz-* 2>/dev/null | head -1 || true)
  [ -n "$v" ] || { echo "cross-root.sh: no vmlinuz in $img" >&2; exit 1; }
  echo "$v"; exit 0
fi
debian_root "$SUITE" "$@"

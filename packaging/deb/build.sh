#!/bin/bash
# Build the Debian package build/deb/nri-qos_VERSION_<arch>.deb.
# Usage: packaging/deb/build.sh VERSION        (make deb)
#        ARCH=aarch64 packaging/deb/build.sh VERSION   (make deb ARCH=aarch64: the arm64 package,
#        cross-built on this x86_64 machine, build/aarch64/deb/nri-qos_VERSION_arm64.deb;
#        dpkg-buildpackage -a arm64 -d: the arm64 build dependencies are in the private root of
#        scripts/cross-root.sh, not installed; docs/aarch64.md)
#
# Steps: scripts/dist.sh VERSION (the source tarball, same file list as the RPM), unpack it
# into a scratch tree build/deb/nri-qos-VERSION/, copy packaging/deb/debian/ into it, set the
# changelog's version to VERSION, dpkg-buildpackage -us -uc -b (builds from source with the
# upstream Makefile, static binary). The repository tree itself is never modified.
set -euo pipefail
[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: packaging/deb/build.sh VERSION" >&2; exit 2; }
VERSION=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
scripts/deps.sh build pkg
scripts/dist.sh "$VERSION"

OUT=$ROOT/build/deb
ARCH_DEB=$(dpkg --print-architecture)
CROSS=()
case "${ARCH:-}" in
  "" | "$(uname -m)") ;;
  aarch64) OUT=$ROOT/build/aarch64/deb; ARCH_DEB=arm64; CROSS=(-a arm64 -d) ;;
  *) echo "deb/build.sh: ARCH=$ARCH: only aarch64 can be cross-built (docs/aarch64.md)" >&2; exit 2 ;;
esac
SRC=$OUT/nri-qos-$VERSION
rm -rf "$OUT"
mkdir -p "$OUT"
tar -xzf "dist/nri-qos-$VERSION.tar.gz" -C "$OUT"
rm -rf "$SRC/debian"
cp -a packaging/deb/debian "$SRC/debian"
# dh_installsystemd --name=nri-qos-reconcile picks these up (one source for rpm and deb)
cp packaging/systemd/nri-qos-reconcile.service "$SRC/debian/nri-qos.nri-qos-reconcile.service"
cp packaging/systemd/nri-qos-reconcile.timer "$SRC/debian/nri-qos.nri-qos-reconcile.timer"
cp packaging/systemd/nri-qos-relay.service "$SRC/debian/nri-qos.nri-qos-relay.service"
# dh_installlogrotate installs debian/nri-qos.logrotate as /etc/logrotate.d/nri-qos (a conffile)
cp packaging/logrotate/nri-qos "$SRC/debian/nri-qos.logrotate"
sed -i "1s/^nri-qos ([^)]*)/nri-qos ($VERSION)/" "$SRC/debian/changelog"

# the caller's parallel=N wins; otherwise one job per CPU (Debian policy 4.9.1: one parallel=)
opts=${DEB_BUILD_OPTIONS:-}
case " $opts " in *" parallel="*) ;; *) opts="parallel=$(nproc) $opts" ;; esac
(cd "$SRC" && DEB_BUILD_OPTIONS="$opts" \
   dpkg-buildpackage -us -uc -b "${CROSS[@]}") > "$OUT/build.log" 2>&1 || {
  tail -n 40 "$OUT/build.log" >&2
  echo "deb/build.sh: dpkg-buildpackage failed, full log: $OUT/build.log" >&2
  exit 1
}
DEB=$OUT/nri-qos_${VERSION}_${ARCH_DEB}.deb
[ -f "$DEB" ] || { echo "deb/build.sh: $DEB not produced (see $OUT/build.log)" >&2; exit 1; }
echo "$DEB"

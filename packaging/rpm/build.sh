#!/bin/bash
# Build the RPM: build/rpm/RPMS/<arch>/nri-qos-VERSION-1.<arch>.rpm (+ the SRPM).
# Usage: packaging/rpm/build.sh VERSION        (make rpm)
#        ARCH=aarch64 packaging/rpm/build.sh VERSION   (make rpm ARCH=aarch64: the aarch64
#        package, cross-built on this x86_64 machine, in build/aarch64/rpm/RPMS/aarch64/;
#        docs/aarch64.md)
#
# Source: dist/nri-qos-VERSION.tar.gz, (re)made here by scripts/dist.sh (cheap, reproducible).
# rpmbuild runs with --nodeps: the spec's BuildRequires use openEuler/Fedora package names,
# which Debian's rpm database does not know; the build uses the Debian toolchain and static
# libraries installed by `scripts/deps.sh build pkg`.
set -euo pipefail
[ $# -eq 1 ] && [ -n "$1" ] || { echo "usage: packaging/rpm/build.sh VERSION" >&2; exit 2; }
VERSION=$1
# rpm's version field forbids '-'; VERSION comes from the VERSION file (e.g. 0.1.0).
case "$VERSION" in *-*) echo "rpm/build.sh: VERSION must not contain '-'" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
scripts/deps.sh build pkg
TARBALL=dist/nri-qos-$VERSION.tar.gz
scripts/dist.sh "$VERSION"

TOP=$ROOT/build/rpm
TARGET=()
case "${ARCH:-}" in
  "" | "$(uname -m)") ;;
  aarch64)
    # rpmbuild --target aarch64: the package's arch; the spec's %build runs the Makefile's cross
    # build (make ARCH=aarch64, into build/aarch64/) and its %check runs the binary under
    # qemu-user. rpm strips with the cross binutils (the build machine's strip reads no aarch64).
    TOP=$ROOT/build/aarch64/rpm
    TARGET=(--target aarch64 --define "nri_qos_cross aarch64"
            --define "__strip /usr/bin/aarch64-linux-gnu-strip" --define "__objdump /usr/bin/aarch64-linux-gnu-objdump") ;;
  *) echo "rpm/build.sh: ARCH=$ARCH: only aarch64 can be cross-built (docs/aarch64.md)" >&2; exit 2 ;;
esac
rm -rf "$TOP"
mkdir -p "$TOP"/{BUILD,BUILDROOT,RPMS,SOURCES,SPECS,SRPMS}
cp "$TARBALL" "$TOP/SOURCES/"
cp packaging/rpm/nri-qos.spec "$TOP/SPECS/"

rpmbuild -ba --nodeps "${TARGET[@]}" \
  --define "_topdir $TOP" \
  --define "nri_qos_version $VERSION" \
  --define "_smp_mflags -j$(nproc)" \
  "$TOP/SPECS/nri-qos.spec"
ls -1 "$TOP"/RPMS/*/nri-qos-"$VERSION"-*.rpm "$TOP"/SRPMS/nri-qos-"$VERSION"-*.src.rpm

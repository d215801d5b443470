#!/bin/bash
# Build the RPM: build/rpm/RPMS/<arch>/nri-qos-VERSION-1.<arch>.rpm (+ the SRPM).
# Usage: packaging/rpm/build.sh VERSION        (make rpm)
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
rm -rf "$TOP"
mkdir -p "$TOP"/{BUILD,BUILDROOT,RPMS,SOURCES,SPECS,SRPMS}
cp "$TARBALL" "$TOP/SOURCES/"
cp packaging/rpm/nri-qos.spec "$TOP/SPECS/"

rpmbuild -ba --nodeps \
  --define "_topdir $TOP" \
  --define "nri_qos_version $VERSION" \
  --define "_smp_mflags -j$(nproc)" \
  "$TOP/SPECS/nri-qos.spec"
ls -1 "$TOP"/RPMS/*/nri-qos-"$VERSION"-*.rpm "$TOP"/SRPMS/nri-qos-"$VERSION"-*.src.rpm

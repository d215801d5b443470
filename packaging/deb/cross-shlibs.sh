#!/bin/bash
# debian/shlibs.local for the arm64 package cross-built on an x86_64 machine (make deb
# ARCH=aarch64; debian/rules override_dh_shlibdeps; docs/aarch64.md).
#
# The companions (nri-qos-cri, nri-qos-systemd, nri-qos-metrics) link bookworm's arm64 libraries,
# which are unpacked in a private root (scripts/cross-root.sh), not installed: dpkg knows no package
# for them, and dpkg-shlibdeps would find no dependency information. Their libc, libstdc++ and
# libgcc come from the cross toolchain's *-arm64-cross packages, whose names are not the target's.
# So every NEEDED soname of the given ELF files is mapped here to the arm64 package that ships it
# (the .deb the private root was unpacked from, kept in CROSS_CACHE/debs-bookworm), or to libc6,
# libstdc++6, libgcc-s1 for the toolchain's, with ">= its upstream version"; dpkg-shlibdeps reads
# debian/shlibs.local before any other source (dpkg-shlibdeps(1), "shlibs files").
#
# Usage: packaging/deb/cross-shlibs.sh CROSS_CACHE ELF... > debian/shlibs.local
#   exit 1, naming the soname, when one cannot be mapped (never a silently missing Depends).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: packaging/deb/cross-shlibs.sh CROSS_CACHE ELF..." >&2; exit 2; }
CACHE=$1; shift
DEBS=$CACHE/debs-bookworm
upstream() { sed -E 's/^[0-9]+://; s/-[^-]*$//; s/cross[0-9]+$//' <<<"$1"; }
declare -A seen=()
for so in $(for f in "$@"; do aarch64-linux-gnu-readelf -dW "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; done | sort -u); do
  [ -z "${seen[$so]:-}" ] || continue; seen[$so]=1
  # libNAME.so.VERSION -> shlibs "libNAME VERSION"; ld-linux-aarch64.so.1 -> "ld-linux-aarch64 1"
  name=${so%%.so.*}; ver=${so#*.so.}
  [ "$name" != "$so" ] || { echo "cross-shlibs.sh: $so: no version in the soname" >&2; exit 1; }
  if [ -e "/usr/aarch64-linux-gnu/lib/$so" ]; then
    cross=$(dpkg -S "/usr/aarch64-linux-gnu/lib/$so" | cut -d: -f1)
    pkg=${cross%-arm64-cross}
    v=$(upstream "$(dpkg-query -W -f '${Version}' "$cross")")
  else
    # the file or the symlink named SO (dpkg-deb -c: field 6 is the path; "-> target" follows a symlink)
    deb=$(for d in "$DEBS"/*.deb; do
            dpkg-deb -c "$d" | awk -v so="$so" '{ n = split($6, p, "/"); if (p[n] == so) f = 1 } END { exit !f }' && echo "$d" && break
          done || true)
    [ -n "$deb" ] || { echo "cross-shlibs.sh: $so: in no package of $DEBS nor of the cross toolchain" >&2; exit 1; }
    pkg=$(dpkg-deb -f "$deb" Package)
    v=$(upstream "$(dpkg-deb -f "$deb" Version)")
  fi
  echo "$name $ver $pkg (>= $v)"
done

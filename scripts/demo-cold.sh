#!/bin/bash
# How long `make demo` takes on a fresh Debian bookworm machine (issue #33 §5: under 5 minutes on
# 2 CPUs). The README's set-up is a fresh Debian machine, as root, with the tree and make:
#   - a minimal bookworm root (mmdebstrap --variant=minbase plus make and git, the README's
#     prerequisites), cached as a tarball in DEMO_COLD_CACHE (the tarball keeps no apt lists, so
#     `apt-get update` is part of the measure, as on a fresh machine); its apt sources name the
#     mirror this machine's apt already uses (tests/e2e/lib.sh debian_mirror; none in this tree);
#   - unpacked afresh on every run in DEMO_COLD_DIR (no compiler, no ccache: nothing is warm),
#     with a `git clone` of this tree's HEAD (committed work only) in /root/nri-qos;
#   - `make demo` run there as root: chroot in a private mount and pid namespace (unshare) with
#     its own /proc and the host's /dev, the host's network (apt needs it) and the same CPUs;
#   - each phase timed from make's own echo of the demo target's three commands: apt
#     dependencies (scripts/deps.sh demo; split into apt-get update, download and install from
#     the root's apt lists and dpkg.log), build (the parallel make of build/nri-qos) and demo run
#     (scripts/demo.sh); CPU time (user+sys) of each phase from a cpuacct cgroup; the load
#     average sampled every 5 s, because a shared machine inflates the wall clock.
# The root is removed at the end (--keep leaves it); the cached base root stays (--rebuild-base
# makes it again).
#
# Usage (root; mmdebstrap installed):  scripts/demo-cold.sh [--keep] [--rebuild-base]
#   Prints the phases and a summary on stdout; make demo's whole output is kept in
#   DEMO_COLD_CACHE/last-run.log. Exit status: make demo's (2 on a set-up error).
#   Takes the base root once (about 1 minute) plus make demo's own time.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${DEMO_COLD_CACHE:-/var/cache/nri-qos-demo-cold}
WORK=${DEMO_COLD_DIR:-/var/tmp/nri-qos-demo-cold}
KEEP=0 REBUILD=0
for a in "$@"; do
  case $a in
    --keep) KEEP=1 ;;
    --rebuild-base) REBUILD=1 ;;
    *) echo "usage: scripts/demo-cold.sh [--keep] [--rebuild-base]" >&2; exit 2 ;;
  esac
done
die() { echo "demo-cold: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (chroot, mounts, apt inside the root)"
command -v mmdebstrap >/dev/null || die "needs mmdebstrap (apt-get install mmdebstrap)"
# shellcheck source-path=SCRIPTDIR source=../tests/e2e/lib.sh
. "$REPO/tests/e2e/lib.sh"
mirror=$(debian_mirror) || die "no Debian mirror in this machine's apt sources"
mkdir -p "$CACHE"
BASE=$CACHE/bookworm-minbase.tar
LOG=$CACHE/last-run.log
R=$WORK/root

if [ ! -s "$BASE" ] || [ $REBUILD = 1 ]; then
  echo "demo-cold: building the base root (bookworm minbase + make git) into $BASE" >&2
  t0=$(date +%s)
  mmdebstrap --quiet --variant=minbase --include=make,git --format=tar bookworm "$BASE.tmp" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" || { rm -f "$BASE.tmp"; die "mmdebstrap failed"; }
  mv "$BASE.tmp" "$BASE"
  echo "demo-cold: base root built in $(( $(date +%s) - t0 )) s (cached, not part of the measure)" >&2
fi

rm -rf "$WORK"; mkdir -p "$R"
tar -C "$R" -xf "$BASE" || die "cannot unpack $BASE"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
rev=$(git -C "$REPO" rev-parse HEAD)
git clone -q --no-hardlinks --no-checkout "$REPO" "$R/root/nri-qos" && git -C "$R/root/nri-qos" checkout -q --detach "$rev" \
  || die "cannot clone $REPO"
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] || echo "demo-cold: note: uncommitted changes are not measured" >&2

# CPU accounting: a cpuacct cgroup (v1) or a cgroup2 group holding the namespace's processes
CG="" CGV=""
for d in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if [ -f "$d/cpuacct.stat" ] && mkdir -p "$d/nri-qos-demo-cold.$$" 2>/dev/null; then CG=$d/nri-qos-demo-cold.$$ CGV=1; break; fi
  if [ -f "$d/cgroup.controllers" ] && mkdir -p "$d/nri-qos-demo-cold.$$" 2>/dev/null; then
    [ -f "$d/nri-qos-demo-cold.$$/cpu.stat" ] && { CG=$d/nri-qos-demo-cold.$$ CGV=2; break; }
    rmdir "$d/nri-qos-demo-cold.$$"
  fi
done
HZ=$(getconf CLK_TCK)
cpu() { # user+sys seconds of the group so far ("" without a group)
  case $CGV in
    1) awk -v hz="$HZ" '{ s += $2 } END { printf "%.1f", s / hz }' "$CG/cpuacct.stat" ;;
    2) awk '$1 == "user_usec" || $1 == "system_usec" { s += $2 } END { printf "%.1f", s / 1e6 }' "$CG/cpu.stat" ;;
  esac
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
LOADS=$WORK/loads
( while sleep 5; do cut -d' ' -f1 /proc/loadavg; done ) > "$LOADS" &
sampler=$!
cleanup() {
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
  [ $KEEP = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "demo-cold: tree $rev ($(git -C "$REPO" log -1 --format=%cd --date=short "$rev")), $(nproc) CPUs, load at start $(load)"
echo "demo-cold: make demo in a fresh bookworm root (log: $LOG)"
declare -A T C
LOAD0=$(load)
T[start]=$(date +%s.%N) C[start]=$(cpu)
(
  [ -n "$CG" ] && echo "$BASHPID" > "$CG/cgroup.procs"
  # shellcheck disable=SC2016
  exec unshare --mount --propagation private --pid --fork bash -c '
    R=$1
    mount -t proc proc "$R/proc" && mount --rbind /dev "$R/dev" || exit 2
    exec chroot "$R" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "cd /root/nri-qos && make demo"' demo-cold "$R"
) 2>&1 | while IFS= read -r line; do
  printf '%s\n' "$line"
  ph=""
  case $line in
    "scripts/deps.sh demo") ph=deps ;;
    "scripts/demo.sh") ph=demo ;;
    make*" -j"*build/nri-qos) ph=build ;;
  esac
  [ -n "$ph" ] && printf '%s %s %s\n' "$ph" "$(date +%s.%N)" "$(cpu)" >> "$WORK/marks"
done > "$LOG"
rc=${PIPESTATUS[0]}
T[end]=$(date +%s.%N) C[end]=$(cpu)
while read -r ph t c; do T[$ph]=$t C[$ph]=$c; done < "$WORK/marks" 2>/dev/null

# apt: the last list written ends `apt-get update`; dpkg's first line after the start begins the install
upd=$(find "$R/var/lib/apt/lists" -maxdepth 1 -type f -name '*Packages*' -printf '%T@\n' 2>/dev/null | sort -n | tail -1)
inst=""
if [ -f "$R/var/log/dpkg.log" ]; then
  first=$(awk -v s="$(date -u -d "@${T[start]%.*}" '+%F %T')" '($1 " " $2) >= s { print $1 " " $2; exit }' "$R/var/log/dpkg.log")
  [ -n "$first" ] && inst=$(TZ=UTC date -d "$first" +%s)
fi
ndebs=$(find "$R/var/cache/apt/archives" -maxdepth 1 -name '*.deb' 2>/dev/null | wc -l)
mb=$(du -sm "$R/var/cache/apt/archives" 2>/dev/null | cut -f1)
nobj=$(grep -c -- ' -c .* -o ' "$LOG")

d() { [ -n "${T[$1]:-}" ] && [ -n "${T[$2]:-}" ] && awk -v a="${T[$1]}" -v b="${T[$2]}" 'BEGIN { printf "%.0f", b - a }'; }
c() { [ -n "${C[$1]:-}" ] && [ -n "${C[$2]:-}" ] && awk -v a="${C[$1]}" -v b="${C[$2]}" 'BEGIN { printf "%.0f", b - a }'; }
sub() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }
echo
echo "demo-cold: make demo exit $rc"
printf '  %-10s %6s s wall %6s s CPU\n' "apt deps" "$(d deps build)" "$(c deps build)"
[ -n "$upd" ] && [ -n "$inst" ] && \
  printf '    update %s s, download %s s (%s packages, %s MB), install %s s\n' "$(sub "${T[deps]}" "$upd")" \
    "$(sub "$upd" "$inst")" "$ndebs" "$mb" "$(sub "$inst" "${T[build]}")"
printf '  %-10s %6s s wall %6s s CPU (%s objects compiled)\n' "build" "$(d build demo)" "$(c build demo)" "$nobj"
printf '  %-10s %6s s wall %6s s CPU\n' "demo run" "$(d demo end)" "$(c demo end)"
printf '  %-10s %6s s wall %6s s CPU\n' "total" "$(d start end)" "$(c start end)"
printf '  load: at start %s; during the run mean %s, max %s (1-min average every 5 s); at end %s\n' \
  "$LOAD0" "$(awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n }' "$LOADS")" "$(sort -n "$LOADS" | tail -1)" "$(load)"
# On an idle machine the build takes about its CPU time over the CPUs (make -j$(nproc); the link
# and the generators are serial, so this is a lower bound); apt and the demo are not CPU-bound.
printf '  idle estimate: apt %s s + build >= %s s (CPU / %s CPUs) + demo %s s\n' "$(d deps build)" \
  "$(awk -v c="$(c build demo)" -v n="$(nproc)" 'BEGIN { printf "%.0f", c / n }')" "$(nproc)" "$(d demo end)"
[ "$rc" = 0 ] || { echo "demo-cold: make demo failed; the end of its output:"; tail -20 "$LOG"; }
exit "$rc"

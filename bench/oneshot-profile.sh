#!/bin/bash
# One-shot profile of a plain `nri-qos invoke` cache hit (issue #34 item 4): the figures that
# bench/run.sh reports for the row hit:1.6-container-create, and where they come from.
#
#   bench/oneshot-profile.sh [BINARY (default build/nri-qos)]
#
# Prints, for the captured containerd 1.6.20 container create with the bundled policy, in a
# private root where the plain command line (no options) sees a scratch /etc/nri, /run/nri-qos
# and cgroup tree (scripts/private-root.sh), with the compiled-policy cache and the memo warm:
#   1. instructions (valgrind callgrind, as bench/run.sh callgrind_plain) and the top inclusive
#      functions (PROFILE_TOP entries, default 30);
#   2. minor page faults per run (bench/driver.c: wait4 ru_minflt, PROFILE_N runs, default 200),
#      of the static-C floor (bench/floor.c) and of the hit, interleaved;
#   3. where the hit's faults are (perf record -e minor-faults -d, every fault, when perf is
#      there): each faulting address put in its region — a section of the binary (.text split
#      into the hot-text part of src/hot-text.ld and the rest, .rodata, .data, .bss, ...),
#      heap, stack, vdso, or kernel (faults the kernel takes on the process's behalf, e.g.
#      copying to user memory at exec) — with the count of distinct 4 KiB pages;
#      PROFILE_DETAIL=1 lists every fault with the symbols at its address and instruction.
# PROFILE_HOTDATA=1 also dumps the hit's .bss at _exit (gdb) and regenerates src/hot-data.ld
# (scripts/hot-data.py); PROFILE_KEEP=1 keeps the scratch root (callgrind output cg.out).
# Needs root (mount and pid namespaces), gcc, valgrind; perf is optional.
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(readlink -f "${1:-$TOP/build/nri-qos}")
N=${PROFILE_N:-200}
TOPN=${PROFILE_TOP:-30}
BB=$TOP/build/bench
FIX=$TOP/tests/fixtures/requests
REQ=$FIX/containerd-1.6.20/container-create.json
[ -x "$BIN" ] || { echo "oneshot-profile: $BIN missing (run make)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "oneshot-profile: needs root (scripts/private-root.sh)" >&2; exit 2; }
mkdir -p "$BB"
gcc -O2 -static -o "$BB/floor" "$TOP/bench/floor.c"
gcc -O2 -static -o "$BB/driver" "$TOP/bench/driver.c"

base=/tmp
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && base=/dev/shm
S=$(mktemp -d "$base/nri-qos-profile.XXXXXX")
S=$(cd "$S" && pwd -P)
if [ "${PROFILE_KEEP:-0}" = 1 ]; then echo "# scratch: $S" >&2; else trap 'rm -rf "$S"' EXIT; fi
cp=$(sed -n 's/.*"cgroupsPath":"\([^"]*\)".*/\1/p' "$REQ")
for rel in "$cp" "$(dirname "$cp")"; do
  for ctl in cpu memory cpuset pids blkio; do mkdir -p "$S/cgroup/$ctl$rel"; done
  touch "$S/cgroup/cpu$rel"/{cpu.shares,cpu.cfs_quota_us,cpu.cfs_burst_us,cpu.qos_level,cpu.idle} \
        "$S/cgroup/memory$rel"/{memory.high,memory.qos_level,memory.limit_in_bytes}
done
mkdir -p "$S/etc/nri"
cp "$TOP/conf/nri.d/nri-qos.toml" "$S/etc/nri/nri-qos.toml"
touch -d '-1 hour' "$S/etc/nri/nri-qos.toml"
sleep 2.2  # out of the cache's racy window (policy_cache.hpp kRacySeconds)

# The regions of the binary: name start end (hex), from its section headers; .text is split
# at the end of the hot part (the symbol __nriqos_hot_text_end, src/hot-text.ld) when present.
readelf -SW "$BIN" | sed -n 's/^ *\[ *[0-9]*\] *//p' | while read -r name _ addr _ size _; do
  [ "${addr//0/}" = "" ] || printf '%s %s %x\n' "$name" "$addr" $((16#$addr + 16#$size))
done >"$S/sections"
nm "$BIN" 2>/dev/null | awk '$3 == "__nriqos_hot_text_start" || $3 == "__nriqos_hot_text_end" { print $3, $1 }' >"$S/hot" || true

# the zero-initialised data: .bss.hot (src/hot-data.ld), if there is one, and .bss
BSS_LO=$(awk '$1 == ".bss.hot" || $1 == ".bss" { print $2; exit }' "$S/sections")
BSS_HI=$(awk '$1 == ".bss" { print $3 }' "$S/sections")
export BSS_LO BSS_HI
inroot() { "$TOP/scripts/private-root.sh" "$S" "$@"; }
# shellcheck disable=SC2016
inroot bash -c '
  set -e
  bin=$1 req=$2 s=$3 bb=$4 n=$5 topn=$6
  "$bin" invoke <"$req" >/dev/null 2>&1   # warm: the cache (new overlay, new st_dev) and the memo
  "$bin" invoke <"$req" >"$s/out.hit" 2>&1
  echo "## 1. instructions (callgrind, plain invoke, cache hit)"
  valgrind --tool=callgrind --callgrind-out-file="$s/cg.out" "$bin" invoke <"$req" 2>&1 >/dev/null | sed -n "s/.*Collected : \([0-9]*\).*/instructions: \1/p"
  callgrind_annotate --inclusive=yes "$s/cg.out" 2>/dev/null | grep -E "^ *[0-9,]+ \(" | head -n "$topn" | cut -c1-150
  echo
  echo "## 2. minor page faults per run (driver: wait4 ru_minflt, $n runs, interleaved)"
  "$bb/driver" -n "$n" -w 5 -i "$req" floor "$bb/floor" --- hit "$bin" invoke | sed -n "s/^\([^ ]*\) .* p50_us=\([^ ]*\) .* rss_kib_p50=\([^ ]*\) .*minflt=\([^ ]*\).*/\1: minflt=\4 p50_us=\2 rss_kib_p50=\3/p"
  if [ "${PROFILE_HOTDATA:-0}" = 1 ]; then  # the .bss at _exit, for scripts/hot-data.py
    printf "set pagination off\nbreak _exit\nrun invoke <%s >/dev/null 2>&1\ndump binary memory %s 0x%s 0x%s\nkill\nquit\n" \
      "$req" "$s/bss.bin" "$BSS_LO" "$BSS_HI" >"$s/gdb.cmd"
    gdb -q -batch -x "$s/gdb.cmd" "$bin" >/dev/null 2>&1 || true
  fi
  if command -v perf >/dev/null 2>&1; then
    perf record -q -e minor-faults -c 1 -d -o "$s/perf.data" "$bin" invoke <"$req" >/dev/null 2>&1 || true
    perf script -i "$s/perf.data" -F addr,ip 2>/dev/null >"$s/faults" || true
  fi' profile "$BIN" "$REQ" "$S" "$BB" "$N" "$TOPN"

if [ -s "$S/faults" ]; then
  echo
  echo "## 3. where the hit's minor faults are (perf record -e minor-faults -d, one run)"
  nm -n -S -C "$BIN" >"$S/nm" 2>/dev/null || true
  python3 - "$S/sections" "$S/hot" "$S/faults" "$S/nm" "${PROFILE_DETAIL:-0}" <<'PY'
import bisect
import sys, collections
secs = []
for line in open(sys.argv[1]):
    name, lo, hi = line.split()
    secs.append((int(lo, 16), int(hi, 16), name))
hot = {}
for line in open(sys.argv[2]):
    k, v = line.split(); hot[k] = int(v, 16)
def region(a, ip):
    for lo, hi, name in secs:
        if lo <= a < hi:
            if name == ".text" and "__nriqos_hot_text_end" in hot:
                return ".text(hot)" if a < hot["__nriqos_hot_text_end"] else ".text(cold)"
            return name
    if a >= 0x7f0000000000: return "stack/vdso/mmap"
    if secs and a >= max(h for _, h, _ in secs): return "heap (brk)"
    return "other"
count = collections.Counter(); pages = collections.defaultdict(set); total = 0
for line in open(sys.argv[3]):
    f = line.split()
    if not f: continue
    try: a = int(f[0], 16); ip = int(f[1], 16)
    except ValueError: continue
    total += 1
    r = region(a, ip)
    if ip >= 0xffff000000000000 and r not in (".bss", ".data", "heap (brk)", "stack/vdso/mmap"):
        r += " (kernel ip)"
    count[r] += 1; pages[r].add(a >> 12)
print(f"faults: {total}")
if sys.argv[5] == "1":  # PROFILE_DETAIL=1: every fault, in order, with the symbols at its address and ip
    syms = []
    for line in open(sys.argv[4]):
        f = line.rstrip("\n").split(" ", 3)
        try: a = int(f[0], 16)
        except ValueError: continue
        if len(f) == 4 and len(f[2]) == 1: syms.append((a, f[3]))
        elif len(f) >= 3 and len(f[1]) == 1: syms.append((a, " ".join(f[2:])))
    syms.sort(); keys = [a for a, _ in syms]
    def sym(a):
        i = bisect.bisect_right(keys, a) - 1
        return f"{syms[i][1][:60]}+{a - syms[i][0]:#x}" if i >= 0 and a < 0x7f0000000000 else "-"
    for line in open(sys.argv[3]):
        f = line.split()
        if len(f) < 2: continue
        a, ip = int(f[0], 16), int(f[1], 16)
        print(f"    {a:14x} {region(a, ip):18s} {sym(a):66s} ip {sym(ip) if ip < 0xffff000000000000 else 'kernel'}")
for r, c in count.most_common():
    print(f"  {c:4d}  {r:28s} ({len(pages[r])} distinct 4 KiB pages)")
PY
fi
if [ "${PROFILE_HOTDATA:-0}" = 1 ]; then
  [ -s "$S/bss.bin" ] || { echo "oneshot-profile: no .bss dump (gdb)" >&2; exit 1; }
  [ -s "$TOP/build/nri-qos.map" ] || { echo "oneshot-profile: build/nri-qos.map missing" >&2; exit 1; }
  # the .bss pages the hit faults on (a page written with zeros only is not in the dump)
  addrs=$(python3 -c 'import sys
lo, hi = int(sys.argv[1], 16), int(sys.argv[2], 16)
for line in open(sys.argv[3]):
    f = line.split()
    if f and lo <= int(f[0], 16) < hi: print(f[0])' "$BSS_LO" "$BSS_HI" "$S/faults" 2>/dev/null || true)
  # shellcheck disable=SC2086
  python3 "$TOP/scripts/hot-data.py" "$TOP/build/nri-qos.map" "$S/bss.bin" "$BSS_LO" $addrs >"$TOP/src/hot-data.ld"
  echo "wrote src/hot-data.ld ($(grep -c '^    \*' "$TOP/src/hot-data.ld") input sections); rebuild (make) to use it"
fi

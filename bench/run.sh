#!/bin/bash
# nri-qos benchmark (`make bench`; issue 4). Compares `nri-qos invoke` with the exec floor — a
# static C program that reads stdin and prints {} — in the same run, interleaved, through
# bench/driver.c (fork/exec/wait4, request on stdin from a file, wall time and ru_maxrss per run).
#
# Measures, on a scratch root (cgroup v1 tree under mktemp -d, --cgroup-layout v1, scratch
# --state-dir, --proc-root, --cache-dir, --metrics-file, --event-log):
#   1. latency p50/p90/p99/max, peak RSS, user/sys CPU, page faults: floor vs nri-qos on real
#      captured containerd requests (bundled policy; cache hit, and without cache). The hit rows
#      run containerd's own command line, a plain `nri-qos invoke` without options, with its
#      default paths on the scratch root (scripts/private-root.sh: a private mount and pid
#      namespace); "hit-options" is the same hit with every path given as an option (CLI11);
#   2. instructions per invocation (valgrind --tool=callgrind; perf stat where the PMU is
#      available) and the ratio of each figure to the floor, plus a callgrind breakdown of a hit;
#   3. policy scaling: 10, 100, 1,000, 10,000 generated rules (bench/gen-policy.sh), cache hit
#      and cache miss (the first invocation after the policy changed);
#   4. throughput with 2 parallel workers.
# The peer in section 1 is a Go NRI v0.1 plugin doing what containerd/nri's clearcfs example does
# (bench/clearcfs, on containerd/nri's skel; built offline from Debian trixie's Go and
# golang-github-containerd-nri-dev, fetched once into the e2e cache by the e2e recipe: bench/lib.sh).
# Results: stdout and $OUT (default build/bench/results.md). Takes about 2-4 minutes.
#
# Env: NRI_QOS_BIN (default build/nri-qos), BENCH_N (default 1000 runs each),
#      BENCH_SCALE (default "10 100 1000 10000"), BENCH_KEEP=1 keeps the scratch root,
#      BENCH_GO=0 leaves the Go peer out (it needs root and apt the first time).
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
N=${BENCH_N:-1000}
SCALE=${BENCH_SCALE:-10 100 1000 10000}
BB=$TOP/build/bench
OUT=${OUT:-$BB/results.md}
FIX=$TOP/tests/fixtures/requests
T0=$(date +%s)

[ -x "$BIN" ] || { echo "bench: $BIN missing (run make)" >&2; exit 1; }
command -v valgrind >/dev/null || "$TOP/scripts/deps.sh" bench
mkdir -p "$BB"
gcc -O2 -static -o "$BB/floor" "$TOP/bench/floor.c"
gcc -O2 -static -o "$BB/driver" "$TOP/bench/driver.c"
FLOOR=$BB/floor
DRIVER=$BB/driver
# The Go peer (bench/clearcfs), when the trixie Go toolchain can be had (bench/lib.sh).
CLEARCFS=""
if [ "${BENCH_GO:-1}" != 0 ]; then
  # shellcheck source-path=SCRIPTDIR source=lib.sh
  . "$TOP/bench/lib.sh"
  if { [ -x "$BB/clearcfs" ] || bench_trixie; } && bench_go_build "$TOP/bench/clearcfs" "$BB/clearcfs"; then
    CLEARCFS=$BB/clearcfs
  else echo "bench: no Go peer (needs root and Debian trixie's Go packages once; BENCH_GO=0 skips it)" >&2; fi
fi

# Scratch on a memory filesystem when there is one (as bench/native.sh): the cgroup tree, state
# and cache dirs stand in for cgroupfs and /run, which are memory filesystems on a node. On ext4
# an O_TRUNC open of a knob file truncates and, at close, flushes to disk (ext4 auto_da_alloc):
# ~15 % of a hit's time here, which cgroupfs never costs.
base=/tmp
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && base=/dev/shm
S=$(mktemp -d "$base/nri-qos-bench.XXXXXX")
S=$(cd "$S" && pwd -P)
if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "# scratch root: $S" >&2; else trap 'rm -rf "$S"' EXIT; fi

# ---- scratch root ----------------------------------------------------------------------------
REQ_CT=$FIX/containerd-1.6.20/container-create.json
REQ_SB=$FIX/containerd-1.6.20/sandbox-create.json
REQ_CT17=$FIX/containerd-1.7.24-adapter/container-create.json
mkdir -p "$S/cgroup" "$S/proc" "$S/state" "$S/pol" "$S/etc/nri" "$S/records"
# The cgroup v1 directories and knob files of the requests' cgroupsPath, so knobs are applied.
for f in "$REQ_CT" "$REQ_SB" "$REQ_CT17"; do
  cp=$(sed -n 's/.*"cgroupsPath":"\([^"]*\)".*/\1/p' "$f")
  [ -n "$cp" ] || continue
  for rel in "$cp" "$(dirname "$cp")"; do
    for ctl in cpu memory cpuset pids blkio; do mkdir -p "$S/cgroup/$ctl$rel"; done
    touch "$S/cgroup/cpu$rel"/{cpu.shares,cpu.cfs_quota_us,cpu.cfs_burst_us,cpu.qos_level,cpu.idle} \
          "$S/cgroup/memory$rel"/{memory.high,memory.qos_level,memory.limit_in_bytes}
  done
done
cp "$TOP/conf/nri.d/nri-qos.toml" "$S/pol/bundled.toml"
# Bad requests (issue #22: one costs no more than a hit): malformed JSON, and the 1.6 container
# create with an unknown key in the v0.1 conf.
printf '{"cniVersion": "0.4.0", "conf": {"policy": ' > "$S/bad-json.json"
sed 's/"conf":{"policy"/"conf":{"polcy": "x", "policy"/' "$REQ_CT" > "$S/bad-conf.json"
grep -q '"polcy"' "$S/bad-conf.json" || { echo "bench: cannot derive the unknown-conf-key request" >&2; exit 1; }
cp "$TOP/conf/nri.d/nri-qos.toml" "$S/etc/nri/nri-qos.toml"  # /etc/nri/nri-qos.toml of the private root
for n in $SCALE; do "$TOP/bench/gen-policy.sh" "$n" "$S/pol/bundled.toml" >"$S/pol/rules-$n.toml"; done
sleep 2.2  # policies older than the cache's racy window (policy_cache.hpp kRacySeconds)
# Records (metrics textfile, event log) in scratch for the rows that give options: they keep
# writing them (part of an invocation's work) but never the host's /var/lib/node_exporter or
# /var/log/nri-qos files, inside the private root or not.
EVAL=(--cgroup-root "$S/cgroup" --cgroup-layout v1 --proc-root "$S/proc" --state-dir "$S/state"
      --metrics-file "$S/records/nri_qos.prom" --event-log "$S/records/events.log")
# Plain `invoke` (containerd's command line) sees $S as /etc/nri, /run/nri-qos, /sys/fs/cgroup.
PLAIN=0
if [ "$(id -u)" = 0 ] && unshare --mount --pid --fork true 2>/dev/null; then PLAIN=1; fi
inroot() { "$TOP/scripts/private-root.sh" "$S" "$@"; }
inv() { # inv POLICY CACHE_DIR [ARG...]: the nri-qos command line, in the array CMD
  CMD=("$BIN" invoke --policy "$1" "${EVAL[@]}" --cache-dir "$2" "${@:3}")
}
# Prebuild every cache (as packaging does with `nri-qos check POLICY --cache-dir D`).
"$BIN" check "$S/pol/bundled.toml" --cache-dir "$S/cache" >/dev/null
for n in $SCALE; do "$BIN" check "$S/pol/rules-$n.toml" --cache-dir "$S/cache-$n" >/dev/null; done
# Sanity: the cache must not change the output.
for r in "$REQ_CT" "$REQ_SB" "$REQ_CT17"; do
  inv "$S/pol/bundled.toml" "$S/cache"; a=$("${CMD[@]}" <"$r")
  inv "$S/pol/bundled.toml" ""; b=$("${CMD[@]}" <"$r")
  [ "$a" == "$b" ] || { echo "bench: output differs with the cache for $r" >&2; exit 1; }
done

# ---- helpers -----------------------------------------------------------------------------------
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }  # field LINE KEY
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# callgrind_ir STDIN ARGV...: instructions of one run (cache state as it is)
callgrind_ir() {
  local in=$1; shift
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" <"$in" 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
callgrind_plain() { # callgrind_plain STDIN: instructions of a plain `invoke` hit in the private root
  # (a first run in the same namespace warms the cache: its overlay is new, so is the key's st_dev)
  inroot bash -c '"$1" invoke <"$2" >/dev/null 2>&1; valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" invoke <"$2" 2>&1 >/dev/null' \
    callgrind "$BIN" "$1" | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
perf_ir() { # perf_ir STDIN ARGV...: instructions:u from perf stat, or n/a
  local in=$1; shift
  command -v perf >/dev/null || { echo n/a; return; }
  local v
  v=$(perf stat -x, -e instructions:u "$@" <"$in" 2>&1 >/dev/null | awk -F, '/instructions/ { print $1 }' | tail -1)
  [[ "$v" =~ ^[0-9]+$ ]] && echo "$v" || echo n/a
}
kib_mib() { awk -v k="$1" 'BEGIN { printf "%.2f", k / 1024 }'; }

{
echo "# nri-qos benchmark results"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); binary: $BIN ($(stat -c %s "$BIN") bytes, $("$BIN" --version 2>/dev/null | head -1))"
echo "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, kernel $(uname -r), $(systemd-detect-virt 2>/dev/null || (grep -q hypervisor /proc/cpuinfo && echo "virtual machine" || echo "bare metal"))"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- runs: $N per command, interleaved; scratch root $S"
echo
} | tee "$OUT"

# ---- 1. latency, RSS: floor vs nri-qos, interleaved --------------------------------------------
echo "## 1. Latency and memory: floor vs nri-qos invoke (bundled policy), $N runs each, interleaved" | tee -a "$OUT"
inv "$S/pol/bundled.toml" "$S/cache"; HIT=("${CMD[@]}")
inv "$S/pol/bundled.toml" ""; NOC=("${CMD[@]}")
# A node with no policy file (the built-in policy) and no compiled-policy cache: the first
# invocation after boot (issue #22: ≤ 3× a hit).
inv "$S/pol/absent.toml" ""; BUILTIN=("${CMD[@]}")
GOPEER=()
[ -n "$CLEARCFS" ] && GOPEER=(--- go-clearcfs:1.6-container-create "$CLEARCFS" invoke --cgroup-root "$S/cgroup")
if [ "$PLAIN" = 1 ]; then
  LAT=$(inroot "$DRIVER" -n "$N" -w 20 -i "$REQ_CT" \
    floor "$FLOOR" \
    --- hit:1.6-container-create "$BIN" invoke \
    --- hit-nosandbox:1.6-container-create %NRI_QOS_NO_SANDBOX=1 "$BIN" invoke \
    --- hit:1.6-sandbox-create "<$REQ_SB" "$BIN" invoke \
    --- hit:1.7-container-create "<$REQ_CT17" "$BIN" invoke \
    --- hit-options:1.6-container-create "${HIT[@]}" \
    --- nocache:1.6-container-create "${NOC[@]}" \
    --- bad:malformed-json "<$S/bad-json.json" "${HIT[@]}" \
    --- bad:unknown-conf-key "<$S/bad-conf.json" "${HIT[@]}" \
    --- builtin-nocache:1.6-container-create "${BUILTIN[@]}" \
    "${GOPEER[@]}")
else  # no namespaces here: the hit rows with options
  echo "(no mount/pid namespaces: plain \`invoke\` not measured; the hit rows use options)" | tee -a "$OUT"
  LAT=$("$DRIVER" -n "$N" -w 20 -i "$REQ_CT" \
    floor "$FLOOR" \
    --- hit:1.6-container-create "${HIT[@]}" \
    --- hit-nosandbox:1.6-container-create %NRI_QOS_NO_SANDBOX=1 "${HIT[@]}" \
    --- hit:1.6-sandbox-create "<$REQ_SB" "${HIT[@]}" \
    --- hit:1.7-container-create "<$REQ_CT17" "${HIT[@]}" \
    --- nocache:1.6-container-create "${NOC[@]}" \
    --- bad:malformed-json "<$S/bad-json.json" "${HIT[@]}" \
    --- bad:unknown-conf-key "<$S/bad-conf.json" "${HIT[@]}" \
    --- builtin-nocache:1.6-container-create "${BUILTIN[@]}" \
    "${GOPEER[@]}")
fi
FL=$(grep '^floor ' <<<"$LAT")
echo "$LAT" > "$BB/oneshot-latency.txt"  # raw driver lines, for bench/report.py
{
echo
echo "| command | p50 µs | p90 µs | p99 µs | max µs | peak RSS MiB | user µs | sys µs | page faults | p50 / floor | p99 / floor | RSS / floor |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
while read -r line; do
  l=${line%% *}
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$l" "$(field "$line" p50_us)" "$(field "$line" p90_us)" \
    "$(field "$line" p99_us)" "$(field "$line" max_us)" "$(kib_mib "$(field "$line" rss_kib_max)")" "$(field "$line" user_us)" \
    "$(field "$line" sys_us)" "$(field "$line" minflt)" "$(ratio "$(field "$line" p50_us)" "$(field "$FL" p50_us)")" \
    "$(ratio "$(field "$line" p99_us)" "$(field "$FL" p99_us)")" "$(ratio "$(field "$line" rss_kib_max)" "$(field "$FL" rss_kib_max)")"
done <<<"$LAT"
echo
GO=$(grep '^go-clearcfs' <<<"$LAT" || true)
if [ -n "$GO" ]; then
  HL=$(grep '^hit:1.6-container-create ' <<<"$LAT")
  echo "nri-qos (hit:1.6-container-create) / the Go clearcfs peer (go-clearcfs, bench/clearcfs: containerd/nri skel, same request): p50 $(ratio "$(field "$HL" p50_us)" "$(field "$GO" p50_us)"), p99 $(ratio "$(field "$HL" p99_us)" "$(field "$GO" p99_us)"), peak RSS $(ratio "$(field "$HL" rss_kib_max)" "$(field "$GO" rss_kib_max)"), user+sys CPU $(awk -v a="$(field "$HL" user_us)" -v b="$(field "$HL" sys_us)" -v c="$(field "$GO" user_us)" -v d="$(field "$GO" sys_us)" 'BEGIN { printf "%.2f", (a + b) / (c + d) }')."
  echo
fi
} | tee -a "$OUT"

# ---- 2. instructions ---------------------------------------------------------------------------
echo "## 2. Instructions per invocation (valgrind callgrind; perf stat instructions:u where supported)" | tee -a "$OUT"
IR_FLOOR=$(callgrind_ir "$REQ_CT" "$FLOOR")
IR_OPT=$(callgrind_ir "$REQ_CT" "${HIT[@]}")
if [ "$PLAIN" = 1 ]; then
  IR_HIT=$(callgrind_plain "$REQ_CT")
  IR_HIT_SB=$(callgrind_plain "$REQ_SB")
  IR_HIT17=$(callgrind_plain "$REQ_CT17")
else
  IR_HIT=$IR_OPT
  IR_HIT_SB=$(callgrind_ir "$REQ_SB" "${HIT[@]}")
  IR_HIT17=$(callgrind_ir "$REQ_CT17" "${HIT[@]}")
fi
IR_NOC=$(callgrind_ir "$REQ_CT" "${NOC[@]}" --deadline-ms 0)  # under valgrind a compile can outlast the deadline
IR_BADJ=$(callgrind_ir "$S/bad-json.json" "${HIT[@]}")
IR_BADC=$(callgrind_ir "$S/bad-conf.json" "${HIT[@]}")
IR_BUILTIN=$(callgrind_ir "$REQ_CT" "${BUILTIN[@]}")
printf 'floor ir=%s\nhit:1.6-container-create ir=%s\nhit:1.6-sandbox-create ir=%s\nhit:1.7-container-create ir=%s\nhit-options:1.6-container-create ir=%s\nbad:malformed-json ir=%s\nbad:unknown-conf-key ir=%s\nbuiltin-nocache:1.6-container-create ir=%s\n' \
  "$IR_FLOOR" "$IR_HIT" "$IR_HIT_SB" "$IR_HIT17" "$IR_OPT" "$IR_BADJ" "$IR_BADC" "$IR_BUILTIN" > "$BB/oneshot-instructions.txt"
PERF_FLOOR=$(perf_ir "$REQ_CT" "$FLOOR")
PERF_HIT=$(perf_ir "$REQ_CT" "${HIT[@]}")
{
echo
echo "| command | instructions (callgrind) | / floor | perf stat instructions:u |"
echo "|---|---|---|---|"
echo "| floor | $IR_FLOOR | 1.00 | $PERF_FLOOR |"
echo "| hit:1.6-container-create | $IR_HIT | $(ratio "$IR_HIT" "$IR_FLOOR") | $PERF_HIT |"
echo "| hit:1.6-sandbox-create | $IR_HIT_SB | $(ratio "$IR_HIT_SB" "$IR_FLOOR") | |"
echo "| hit:1.7-container-create | $IR_HIT17 | $(ratio "$IR_HIT17" "$IR_FLOOR") | |"
echo "| hit-options:1.6-container-create | $IR_OPT | $(ratio "$IR_OPT" "$IR_FLOOR") | |"
echo "| nocache:1.6-container-create | $IR_NOC | $(ratio "$IR_NOC" "$IR_FLOOR") | |"
echo "| bad:malformed-json (options) | $IR_BADJ | $(ratio "$IR_BADJ" "$IR_FLOOR") | |"
echo "| bad:unknown-conf-key (options) | $IR_BADC | $(ratio "$IR_BADC" "$IR_FLOOR") | |"
echo "| builtin-nocache:1.6-container-create (options) | $IR_BUILTIN | $(ratio "$IR_BUILTIN" "$IR_FLOOR") | |"
echo
echo "Where a cache hit spends its instructions (callgrind, inclusive, top entries):"
echo
echo '```'
if [ "$PLAIN" = 1 ]; then
  inroot bash -c '"$1" invoke <"$3" >/dev/null 2>&1; valgrind --tool=callgrind --callgrind-out-file="$2" "$1" invoke <"$3" >/dev/null 2>&1' \
    callgrind "$BIN" "$S/cg.hit" "$REQ_CT"
else
  valgrind --tool=callgrind --callgrind-out-file="$S/cg.hit" "${HIT[@]}" <"$REQ_CT" >/dev/null 2>&1
fi
callgrind_annotate --inclusive=yes "$S/cg.hit" >"$S/cg.txt" 2>/dev/null || true
grep -E '^ *[0-9,]+ \(' "$S/cg.txt" | grep -v 'below main' | sed -n 1,32p |
  sed -E 's/\(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >/(std::string/g; s/nlohmann::json_abi_v3_11_2::basic_json<[^>]*>[^ ]*/nlohmann::json/g' | cut -c1-150
echo '```'
echo
} | tee -a "$OUT"

# ---- 3. policy scaling -------------------------------------------------------------------------
echo "## 3. Policy scaling: generated rules in front of the bundled ones (bench/gen-policy.sh)" | tee -a "$OUT"
{
echo
echo "| rules | policy KiB | cache KiB | hit p50 µs | hit p99 µs | hit instructions | hit instr. / bundled hit | miss p50 ms (first run after a change) | miss runs |"
echo "|---|---|---|---|---|---|---|---|---|"
} | tee -a "$OUT"
for n in $SCALE; do
  pol=$S/pol/rules-$n.toml
  case $n in 10|100) nm=20 ;; 1000) nm=5 ;; *) nm=2 ;; esac
  nh=$(( N / 4 )); [ "$nh" -ge 50 ] || nh=50
  inv "$pol" "$S/cache-$n"
  H=$("$DRIVER" -n "$nh" -w 5 -i "$REQ_CT" hit "${CMD[@]}")
  IR=$(callgrind_ir "$REQ_CT" "${CMD[@]}")
  # Miss: the policy is touched before each run (a change of its identity); no deadline, so a
  # large policy's compile time is measured instead of the fail-open deadline.
  inv "$pol" "$S/cache-miss" --deadline-ms 0
  M=$("$DRIVER" -n "$nm" -w 0 -i "$REQ_CT" miss "^$pol" "${CMD[@]}")
  ent=$(ls "$S/cache-$n"/policy-*.bin 2>/dev/null | head -1)
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$n" "$(( $(stat -c %s "$pol") / 1024 ))" \
    "$([ -n "$ent" ] && echo $(( $(stat -c %s "$ent") / 1024 )) || echo '?')" "$(field "$H" p50_us)" "$(field "$H" p99_us)" "$IR" \
    "$(ratio "$IR" "$IR_HIT")" "$(awk -v u="$(field "$M" p50_us)" 'BEGIN { printf "%.1f", u / 1000 }')" "$nm" | tee -a "$OUT"
done
inv "$S/pol/bundled.toml" "$S/cache-miss"
MB=$("$DRIVER" -n 20 -w 0 -i "$REQ_CT" miss:bundled "^$S/pol/bundled.toml" "${CMD[@]}")
inv "$S/pol/bundled.toml" "$S/cache-miss2"
IR_MISS=$(callgrind_ir "$REQ_CT" "${CMD[@]}" --deadline-ms 0)
{
echo
echo "Cold first invocation after a policy change, bundled policy (20 runs, policy touched before each):"
echo "p50 $(awk -v u="$(field "$MB" p50_us)" 'BEGIN { printf "%.2f", u / 1000 }') ms, max $(awk -v u="$(field "$MB" max_us)" 'BEGIN { printf "%.2f", u / 1000 }') ms, $IR_MISS instructions."
echo
} | tee -a "$OUT"

# ---- 4. throughput -----------------------------------------------------------------------------
echo "## 4. Throughput, 2 parallel workers" | tee -a "$OUT"
NT=$(( N * 4 ))
if [ "$PLAIN" = 1 ]; then
  TP=$(inroot "$DRIVER" -P 2 -n "$NT" -w 10 -i "$REQ_CT" floor "$FLOOR" --- hit:1.6-container-create "$BIN" invoke)
else
  TP=$("$DRIVER" -P 2 -n "$NT" -w 10 -i "$REQ_CT" floor "$FLOOR" --- hit:1.6-container-create "${HIT[@]}")
fi
{
echo
echo "| command | invocations | wall s | invocations/s |"
echo "|---|---|---|---|"
while read -r line; do
  printf "| %s | %s | %s | %s |\n" "${line%% *}" "$(field "$line" n)" "$(field "$line" wall_s)" "$(field "$line" per_s)"
done <<<"$TP"
echo
echo "Total benchmark time: $(( $(date +%s) - T0 )) s."
} | tee -a "$OUT"

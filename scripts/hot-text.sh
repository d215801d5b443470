#!/bin/bash
# Regenerate src/hot-text.ld, the linker script that places the code of a plain `nri-qos invoke`
# (containerd's command line) and of a native evaluation (`nri-eval` on the relay's events)
# together at the start of the text, followed by the native relay's per-event code (BENCHMARKS.md, page faults; arena.cpp prefault).
#
# Builds build/nri-qos (the Makefile writes its link map, build/nri-qos.map), then runs it on the
# captured containerd requests in a private namespace on a scratch root (scripts/private-root.sh):
# every request once to warm the compiled-policy cache and the sandbox memo, then again
# single-stepped under ptrace (scripts/hot-trace.c), recording each instruction address. The
# addresses and the map become the script (scripts/hot-text.py). Needs root, gcc, python3;
# takes a few minutes (a ptrace single step costs ~0.1 ms in a VM). Run it after larger changes
# to the hot path and commit the result; a stale script only costs page faults, never
# correctness (the linker places whatever it lists first; unknown names match nothing).
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$TOP"
make -s all
BIN=$TOP/build/nri-qos
MAP=$TOP/build/nri-qos.map
[ -f "$MAP" ] || { echo "hot-text.sh: $MAP missing" >&2; exit 1; }
gcc -O2 -Wall -o build/hot-trace scripts/hot-trace.c
# The executable segment's address range (static, not PIE: fixed addresses).
read -r VA MSZ < <(readelf -lW "$BIN" | awk '$1 == "LOAD" && / R E / { print $3, $6 }')
LO=$(printf '%x' $((VA))); HI=$(printf '%x' $((VA + MSZ)))

S=$(mktemp -d /tmp/nri-qos-hot.XXXXXX)
trap 'rm -rf "$S"' EXIT
FIX=$TOP/tests/fixtures/requests
REQS=("$FIX/containerd-1.6.20/sandbox-create.json" "$FIX/containerd-1.6.20/container-create.json"
      "$FIX/containerd-1.7.24-adapter/sandbox-create.json" "$FIX/containerd-1.7.24-adapter/container-create.json"
      "$FIX/containerd-1.6.20/container-delete.json")
# The native evaluator's path too (a spare runs the same code as `nri-eval` on these; arena.cpp
# prefault maps the hot code into every spare before its event).
EVENTS=("$FIX/nri-events/run-pod-sandbox.json" "$FIX/nri-events/create-container.json" "$FIX/nri-events/start-container.json"
        "$FIX/nri-events/remove-pod-sandbox.json")
for f in "${REQS[@]}" "${EVENTS[@]}"; do  # the cgroup files the requests' knobs go to, so they are written
  for cp in $(grep -o '"cgroups\(Path\|_path\)":"[^"]*"' "$f" | cut -d'"' -f4); do
  for rel in "$cp" "$(dirname "$cp")"; do
    for ctl in cpu memory cpuset pids blkio; do mkdir -p "$S/cgroup/$ctl$rel"; done
    touch "$S/cgroup/cpu$rel"/{cpu.shares,cpu.cfs_quota_us,cpu.cfs_burst_us,cpu.qos_level,cpu.idle} \
          "$S/cgroup/memory$rel"/{memory.high,memory.qos_level,memory.limit_in_bytes}
  done
  done
done
# The events' processes (a /proc of their own: the private root's procfs has no such pids), so
# that StartContainer's oom_score_adj write is traced too.
for pid in $(cat "${EVENTS[@]}" | grep -o '"pid":[0-9]*' | cut -d: -f2 | sort -u); do
  mkdir -p "$S/evproc/$pid"; echo 0 > "$S/evproc/$pid/oom_score_adj"
done
mkdir -p "$S/etc/nri" "$S/traces"
cp conf/nri.d/nri-qos.toml "$S/etc/nri/nri-qos.toml"
touch -d '-1 hour' "$S/etc/nri/nri-qos.toml"
sleep 2.2  # the policy's ctime must leave the cache's racy window (policy_cache.hpp), or the
           # traced runs would recompile it

scripts/private-root.sh "$S" bash -c '
  set -e
  bin=$1 trace=$2 lo=$3 hi=$4 out=$5; shift 5
  i=0
  for r in "$@"; do
    case $r in */nri-events/*) cmd="nri-eval --proc-root $out/../evproc" ;; *) cmd=invoke ;; esac
    # shellcheck disable=SC2086
    "$bin" $cmd <"$r" >/dev/null || true
    # shellcheck disable=SC2086
    "$trace" "$out/$i.txt" "$lo" "$hi" "$bin" $cmd <"$r" >/dev/null || true
    i=$((i + 1))
  done' hot-text "$BIN" "$TOP/build/hot-trace" "$LO" "$HI" "$S/traces" "${REQS[@]}" "${EVENTS[@]}"
# The native relay's own per-event code (.text.relay_path): the relay process is sampled with
# perf (cpu-clock, user space, 25 kHz) while the unit tests' fake runtime sends it CreateContainer
# events evaluated by the real nri-eval children (tests/nri_relay.sh's load test), after a
# second of warm-up; the sampled addresses, in first-seen order, are its trace. Single-stepping
# the relay is not possible (its evaluators answer within deadlines). Without perf this part is
# left out (the relay's text then lies wherever the linker loads its objects).
RELAY=()
if command -v perf >/dev/null 2>&1; then
  make -s build/unit-tests
  mkdir -p "$S/relay/cg" "$S/relay/state" "$S/relay/cache"
  NRI_RELAY_LOAD_CMD="$BIN relay --policy $TOP/tests/fixtures/policy/classic.toml --cgroup-root $S/relay/cg --cgroup-layout v1 --state-dir $S/relay/state --cache-dir $S/relay/cache" \
    NRI_RELAY_LOAD_EVENTS=3000 "$TOP/build/unit-tests" "[.nri-load]" >"$S/relay/load.log" 2>&1 &
  load=$!
  relay=""
  for _ in $(seq 50); do
    sleep 0.1
    relay=$(pgrep -P "$load" -f "$BIN relay" | head -1) && [ -n "$relay" ] && break
  done
  if [ -n "$relay" ]; then
    sleep 1
    perf record -q -e cpu-clock:u -F 25000 -p "$relay" -o "$S/relay/perf.data" -- sleep 15 >/dev/null 2>&1 || true
    perf script -i "$S/relay/perf.data" -F ip 2>/dev/null | awk '!seen[$1]++' >"$S/relay/trace.txt" || true
  fi
  wait "$load" || true
  [ -s "$S/relay/trace.txt" ] && RELAY=(--relay "$S/relay/trace.txt")
  echo "hot-text.sh: relay trace: $(wc -l <"$S/relay/trace.txt" 2>/dev/null || echo 0) addresses" >&2
fi
python3 scripts/hot-text.py "$MAP" "$S"/traces/*.txt "${RELAY[@]}" > src/hot-text.ld.new
mv src/hot-text.ld.new src/hot-text.ld
echo "hot-text.sh: wrote src/hot-text.ld ($(grep -c '^    ' src/hot-text.ld) patterns); rebuild with make"

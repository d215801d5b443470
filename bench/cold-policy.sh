#!/bin/bash
# The cold path of a large policy (issue 19 §2): how long a policy of N generated rules
# (bench/gen-policy.sh in front of the bundled policy, with settings.fail = "closed") takes to
# parse and compile when it has no compiled entry (after an edit, after a reboot: /run is a
# tmpfs), and what an event sees meanwhile. Median wall time of RUNS runs, each on a fresh cache
# (and state) directory:
#   check             nri-qos check POLICY: parse + validate, nothing written
#   check+compile     nri-qos check POLICY --cache-dir: + compile + store (parses twice: check
#                     validates with line numbers, then the cache load compiles)
#   reconcile         nri-qos reconcile --policy POLICY on an empty state dir: the timer's pass
#                     compiling the configured policy
#   invoke cold       one container create, no deadline (--deadline-ms 0), empty cache: what the
#                     event would need to finish the compile itself
#   invoke deadline   the same with the default 1000 ms deadline: the answer (fail-closed from the
#                     last good copy's mode) and when it came
#   invoke hit        the same once compiled: the cache hit
# Usage: bench/cold-policy.sh [RULES (10000)] [RUNS (3)]; env NRI_QOS_BIN (build/nri-qos).
# Runs on scratch directories only (removed at exit); needs jq.
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
N=${1:-10000}
RUNS=${2:-3}
[ -x "$BIN" ] || { echo "cold-policy: $BIN missing (make)" >&2; exit 1; }
S=$(mktemp -d /tmp/nri-qos-cold.XXXXXX)
trap 'rm -rf "$S"' EXIT

sed 's/^fail = "open"/fail = "closed"/' "$TOP/conf/nri.d/nri-qos.toml" > "$S/base.toml"
grep -q '^fail = "closed"' "$S/base.toml" || { echo "cold-policy: the bundled policy has no fail = line to set" >&2; exit 1; }
"$TOP/bench/gen-policy.sh" "$N" "$S/base.toml" > "$S/policy.toml"
"$BIN" check "$S/policy.toml" >/dev/null 2>&1 || { echo "cold-policy: the generated policy does not validate" >&2; exit 1; }
REQ=$TOP/tests/fixtures/requests/containerd-1.6.20/container-create.json
REL=$(jq -r '.spec.cgroupsPath' "$REQ" | sed 's|^/||')
mkdir -p "$S/cg/$REL" "$S/proc"
for f in cpu.weight cpu.max cpu.max.burst cpu.idle memory.max memory.high memory.low memory.min memory.swap.max pids.max io.weight \
  cpuset.cpus cpuset.mems; do : > "$S/cg/$REL/$f"; done

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# run NAME CMD...: time CMD RUNS times (each after `fresh`), print the median in ms
fresh() { rm -rf "$S/cache" "$S/state" "$S/lg"; mkdir -m 0700 "$S/lg"; }
hook() {
  "$BIN" invoke --policy "$S/policy.toml" --cgroup-root "$S/cg" --cgroup-layout v2 --proc-root "$S/proc" \
    --state-dir "$S/state" --cache-dir "$S/cache" --last-good-dir "$S/lg" --metrics-file "" --event-log "" "$@" < "$REQ"
}
timed() {
  local name=$1 i t0 t1; shift
  for ((i = 0; i < RUNS; i++)); do
    fresh
    [ -n "${SETUP:-}" ] && eval "$SETUP"
    t0=$(now_ms); "$@" >"$S/out" 2>/dev/null || true; t1=$(now_ms)
    echo $((t1 - t0))
  done | median | { read -r m; printf '| %s | %s |\n' "$name" "$m"; }
}

echo "cold path: $N generated rules + the bundled ones, settings.fail = \"closed\"," \
  "$(( $(stat -c %s "$S/policy.toml") / 1024 )) KiB; median of $RUNS runs; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| step | ms |"
echo "|---|---|"
timed "check (parse + validate)" "$BIN" check "$S/policy.toml"
timed "check --cache-dir (+ compile, store, last good copy)" "$BIN" check "$S/policy.toml" --cache-dir "$S/cache" --last-good-dir "$S/lg"
timed "reconcile, empty state (compiles the configured policy)" "$BIN" reconcile --policy "$S/policy.toml" --state-dir "$S/state" \
  --cache-dir "$S/cache" --last-good-dir "$S/lg" --cgroup-root "$S/cg" --cgroup-layout v2 --proc-root "$S/proc"
timed "invoke, empty cache, no deadline (the event compiles)" hook --deadline-ms 0
# The last good copy (and its fail mode) in place, as after any earlier compile.
SETUP='"$BIN" check "$S/policy.toml" --cache-dir "$S/lg-cache" --last-good-dir "$S/lg" >/dev/null 2>&1' \
  timed "invoke, empty cache, deadline 1000 ms (answers at the deadline)" hook --deadline-ms 1000
echo "  answer: $(jq -c '{error, warning: .metadata.warning}' "$S/out")"
SETUP='"$BIN" check "$S/policy.toml" --cache-dir "$S/cache" --last-good-dir "$S/lg" >/dev/null 2>&1' \
  timed "invoke, compiled (cache hit)" hook --deadline-ms 1000
echo "  answer: $(jq -c '{rule: .metadata.rule, error}' "$S/out")"

#!/bin/bash
# A full node (issue #22 §4): `status`, `status --format json` and `reconcile --dry-run` on state
# directories of BENCH_FULLNODE_SIZES containers (default "100 1000 5000"; 4 containers per pod,
# so 1,000 containers are 250 pods), against the 1 s goal, and the size of the event log and
# metrics textfile those events wrote. Each state directory is made by a real Synchronize pass
# through `nri-qos relay` (the hidden Catch2 driver "[.nri-sync]" of bench/sync.sh: one sandboxed
# evaluator per pod and per container, scratch cgroup v1 tree, records written), so status and
# reconcile read what a node's events leave, not a synthetic format.
# Output: build/bench/fullnode.md and fullnode.json (bench/report.py), and stdout.
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BB=$TOP/build/bench
BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
UT=$TOP/build/unit-tests
SIZES=${BENCH_FULLNODE_SIZES:-100 1000 5000}
PER=4
RUNS=${BENCH_FULLNODE_RUNS:-5}
[ -x "$BIN" ] && [ -x "$UT" ] || { echo "bench/fullnode.sh: need $BIN and $UT (make all build/unit-tests)" >&2; exit 1; }
mkdir -p "$BB"
base=/tmp
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && base=/dev/shm
TMP=$(mktemp -d "$base/nri-qos-fullnode.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# wall ms of the median of RUNS runs of a command (output discarded; exit status 0 or 1 is fine:
# status exits 1 when something drifted)
med_ms() {
  local t=() i s e
  for i in $(seq 1 "$RUNS"); do
    s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N)
    t+=($(( (e - s) / 1000000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
json="["
{
echo "A full node: status and reconcile on the state left by a Synchronize of N containers ($PER per pod), median of $RUNS runs (bench/fullnode.sh; load at start $(cut -d' ' -f1 /proc/loadavg))."
echo
echo "| containers | pods | status ms | status --format json ms | reconcile --dry-run ms | goal 1 s | state dir KiB | event log KiB | metrics KiB | metrics series |"
echo "|---|---|---|---|---|---|---|---|---|---|"
} | tee "$BB/fullnode.md"
for n in $SIZES; do
  d=$TMP/n$n
  mkdir -p "$d/cg" "$d/state" "$d/cache" "$d/proc/4242"
  echo 0 > "$d/proc/4242/oom_score_adj"
  CMD="$BIN relay --policy $TOP/bench/sync-policy.toml --cgroup-root $d/cg --cgroup-layout v1 --proc-root $d/proc"
  CMD="$CMD --state-dir $d/state --cache-dir $d/cache --event-log $d/events.log --metrics-file $d/nri_qos.prom"
  if ! NRI_SYNC_TIMEOUT_MS=600000 NRI_SYNC_CMD="$CMD" NRI_SYNC_CONTAINERS=$n NRI_SYNC_PER_POD=$PER NRI_SYNC_PARTS=$(( (n + 249) / 250 )) \
       NRI_SYNC_CGROUP_ROOT=$d/cg "$UT" "[.nri-sync]" > "$d/out.log" 2>&1; then
    echo "bench/fullnode.sh: the Synchronize of $n containers failed:" >&2; tail -n 20 "$d/out.log" >&2; exit 1
  fi
  O=(--state-dir "$d/state" --cgroup-root "$d/cg" --cgroup-layout v1 --proc-root "$d/proc" --cache-dir "$d/cache"
     --policy "$TOP/bench/sync-policy.toml" --kubelet-cpu-state "" --last-good-dir "")
  st=$(med_ms "$BIN" status "${O[@]}")
  sj=$(med_ms "$BIN" status "${O[@]}" --format json)
  rc=$(med_ms "$BIN" reconcile "${O[@]}" --dry-run --event-log "" --metrics-file "")
  known=$("$BIN" status "${O[@]}" --format json 2>/dev/null | python3 -c 'import json,sys
try:
    d=json.load(sys.stdin); print(sum(1 for e in d.get("entries", []) if e.get("container")))
except Exception: print("?")')
  kib() { [ -e "$1" ] && echo $(( $(du -sk "$1" | cut -f1) )) || echo 0; }
  series=$(grep -vc '^#' "$d/nri_qos.prom" 2>/dev/null || echo 0)
  worst=$(( st > sj ? st : sj )); worst=$(( worst > rc ? worst : rc ))
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$n (status lists $known)" "$(( (n + PER - 1) / PER ))" "$st" "$sj" "$rc" \
    "$([ "$worst" -le 1000 ] && echo met || echo '**not met**')" "$(kib "$d/state")" "$(kib "$d/events.log")" "$(kib "$d/nri_qos.prom")" "$series" | tee -a "$BB/fullnode.md"
  json+="{\"containers\": $n, \"status_ms\": $st, \"status_json_ms\": $sj, \"reconcile_dry_run_ms\": $rc, \"listed\": \"$known\", \"metrics_series\": $series},"
  rm -rf "$d"
done
echo "${json%,}]" > "$BB/fullnode.json"

#!/bin/bash
# `make bench`: every benchmark of nri-qos, then the results block of BENCHMARKS.md rewritten
# (bench/report.py; the text outside its markers is kept).
#   1. one-shot  bench/run.sh       nri-qos invoke vs the static-C exec floor and a Go v0.1 plugin
#                                   (clearcfs on containerd/nri skel); instructions, scaling, throughput
#   2. native    bench/native.sh    nri-qos relay vs a Go pkg/stub plugin doing the same work, driven
#                                   by containerd/nri pkg/adaptation; latency, CPU, RSS
#   3. podstart  bench/podstart.sh  pod start latency on real containerd 1.7 and 2.1 through CRI:
#                                   no plugin, nri-qos, nri-qos-resident, the Go stub
#   4. sync      bench/sync.sh      Synchronize of 50, 250 and 1000 containers through the real relay (issue #20)
#   5. storm     bench/native.sh storm  100 pods at once, 16 requests in flight, nri-qos vs the Go stub
#                                   and relay-floor (issue #22 §3)
# nri-qos runs in both evaluator modes in parts 2, 3 and 5, interleaved with the others (issue #34
# §3): `nri-qos` one sandboxed evaluator per event (settings.evaluator_events = 1, the default) and
# `nri-qos-resident` (evaluator_events = BENCH_EVALUATOR_EVENTS, default 1000).
#   6. fullnode  bench/fullnode.sh  status / status --format json / reconcile --dry-run on 100, 1,000
#                                   and 5,000 containers (issue #22 §4)
# Full run: about 15 minutes on the idle 2-CPU machine, pod start (8 configurations x 60 pods) about
# 7 of them (the run of record of 2026-11-27, 6 configurations x 200 pods, took 37); take the
# numbers for the record on an idle machine (the load average at start is printed and recorded).
#
# Env: BENCH_QUICK=1   short runs (one-shot 200 runs, scaling 10 and 1,000 rules, native 200
#                      pods per peer, 10 pods per containerd configuration), about 6 minutes idle;
#                      the results block says so
#      BENCH_PARTS     subset of "oneshot native podstart sync" (default: all)
#      BENCH_WRITE=0   leave BENCHMARKS.md alone (results stay in build/bench/)
#      BENCH_EVALUATOR_EVENTS  evaluator_events of nri-qos-resident (default 1000)
#      plus each part's own variables (BENCH_N, BENCH_SCALE, BENCH_NATIVE_N, BENCH_PODS, ...);
#      BENCH_SYNC_RUNS (Synchronize passes per size: 3, quick 2; bench/sync.sh alone: 5).
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BB=$TOP/build/bench
PARTS=${BENCH_PARTS:-oneshot native podstart sync storm fullnode}
MODE=full
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  MODE=quick
  export BENCH_N=${BENCH_N:-200} BENCH_SCALE=${BENCH_SCALE:-10 1000} BENCH_NATIVE_N=${BENCH_NATIVE_N:-200} \
         BENCH_PODS=${BENCH_PODS:-10} BENCH_STORM_RUNS=${BENCH_STORM_RUNS:-1} \
         BENCH_FULLNODE_SIZES=${BENCH_FULLNODE_SIZES:-100 1000} BENCH_FULLNODE_RUNS=${BENCH_FULLNODE_RUNS:-2}
fi
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "make bench ($MODE): parts: $PARTS; load average at start: $LOAD0" >&2
mkdir -p "$BB"
rm -f "$BB"/{results.md,sync.md,sync.json,native.md,native.json,storm.md,storm.json,fullnode.md,fullnode.json,podstart.md,podstart.json,oneshot-latency.txt,oneshot-instructions.txt}
rc=0
for p in $PARTS; do
  t=$SECONDS
  case $p in
    oneshot) bash "$TOP/bench/run.sh" || { echo "make bench: one-shot benchmark failed" >&2; rc=1; } ;;
    native) bash "$TOP/bench/native.sh" || { echo "make bench: native benchmark failed" >&2; rc=1; } ;;
    podstart) bash "$TOP/bench/podstart.sh" || { echo "make bench: pod start benchmark failed" >&2; rc=1; } ;;
    sync) BENCH_SYNC_RUNS=${BENCH_SYNC_RUNS:-$([ $MODE = quick ] && echo 2 || echo 3)} bash "$TOP/bench/sync.sh" >/dev/null ||
            { echo "make bench: Synchronize benchmark failed" >&2; rc=1; } ;;
    storm) bash "$TOP/bench/native.sh" storm || { echo "make bench: pod storm benchmark failed" >&2; rc=1; } ;;
    fullnode) bash "$TOP/bench/fullnode.sh" >/dev/null || { echo "make bench: full-node benchmark failed" >&2; rc=1; } ;;
    *) echo "make bench: unknown part '$p' (oneshot native podstart sync storm fullnode)" >&2; exit 2 ;;
  esac
  echo "make bench: $p took $((SECONDS - t)) s" >&2
done
w=(); [ "${BENCH_WRITE:-1}" = 0 ] || w=(--write)
python3 "$TOP/bench/report.py" "$TOP/BENCHMARKS.md" "$BB" --mode "$MODE" --load-start "$LOAD0" \
  --parts "$PARTS" "${w[@]}" > "$BB/report.md" || rc=1
echo "make bench: results block in $BB/report.md$([ ${#w[@]} = 1 ] && echo ", written into BENCHMARKS.md")" >&2
exit $rc

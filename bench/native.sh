#!/bin/bash
# Native-mode benchmark (part of `make bench`; issue 13): nri-qos as a native NRI plugin against a
# Go plugin on containerd/nri pkg/stub doing the same work (bench/gostub: the work of the bench
# policy bench/native-policy.toml, which nri-qos reads) and against the same Go
# plugin answering nothing (the protocol floor), and against nri-qos's own process-per-event
# floor (bench/relay-floor.cpp: the same relay, zygote and one process per event, answering without
# evaluating), driven by bench/nridriver on containerd/nri pkg/adaptation, the runtime side of
# containerd 1.7. See BENCHMARKS.md ("Native mode").
#
# Go programs are built offline from Debian trixie's golang-1.x-go and
# golang-github-containerd-nri-dev (+ its Go library closure), fetched once into the e2e cache
# ($E2E_CACHE, default /var/cache/nri-qos-e2e) by the e2e recipe (bench/lib.sh). Needs root
# (each plugin runs in a cgroup of its own, for CPU accounting).
#
# Output: markdown on stdout and in $OUT (default build/bench/native.md); raw samples in
# build/bench/native.json. Prints "SKIP native: reason" and exits 0 when the machine cannot run it.
# Env: NRI_QOS_BIN (default build/nri-qos), BENCH_NATIVE_N (pods per peer, default 1000),
#      BENCH_NATIVE_WARMUP (default 20), BENCH_EVALUATOR_EVENTS (the nri-qos-resident peer's
#      settings.evaluator_events, default 1000), BENCH_KEEP=1 keeps the scratch directory.
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
N=${BENCH_NATIVE_N:-1000}
# `native.sh storm`: the pod storm instead (issue #22 §3; bench/nridriver/storm.go): BENCH_STORM_PODS
# pods at once (default 100), BENCH_STORM_INFLIGHT requests in flight (default 16),
# BENCH_STORM_RUNS runs per peer (default 5); output build/bench/storm.md and storm.json.
PART=${1:-native}
W=${BENCH_NATIVE_WARMUP:-20}
BB=$TOP/build/bench
OUT=${OUT:-$BB/$PART.md}
skip() { echo "SKIP $PART: $*" | tee "$OUT"; exit 0; }
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$TOP/bench/lib.sh"

mkdir -p "$BB"
[ -x "$BIN" ] || { echo "bench: $BIN missing (run make)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || skip "not root (plugins run in cgroups of their own for CPU accounting)"
bench_trixie || skip "cannot fetch Debian trixie's Go toolchain and containerd/nri library (apt)"
bench_go_build "$TOP/bench/gostub" "$BB/gostub" || { echo "bench: cannot build bench/gostub" >&2; exit 1; }
bench_go_build "$TOP/bench/nridriver" "$BB/nridriver" || { echo "bench: cannot build bench/nridriver" >&2; exit 1; }
FLOOR_BIN=$BB/nri-qos-relay-floor
make -s -C "$TOP" -j2 build/bench/nri-qos-relay-floor >&2 || { echo "bench: cannot build $FLOOR_BIN (bench/relay-floor.cpp)" >&2; exit 1; }

# Scratch on a memory filesystem when there is one: the peers' cgroup and /proc trees, state and
# cache dirs stand in for cgroupfs, procfs and /run, which are memory filesystems on a node.
base=/tmp
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && base=/dev/shm
S=$(mktemp -d "$base/nri-qos-native.XXXXXX")
if [ "${BENCH_KEEP:-0}" = 1 ]; then log "scratch: $S"; else trap 'rm -rf "$S"' EXIT; fi
# The benchmark's own policy (bench/native-policy.toml: the work bench/gostub does, compiled in),
# not the bundled one; its records (metrics, event log) go to scratch, not the host's files.
bench_policy "$S/policy.toml" "$S/records" "$BIN" || { echo "bench: bench/native-policy.toml does not validate" >&2; exit 1; }
bench_seed_sinks "$BIN" "$S/policy.toml" "$S/nri-qos/state" || exit 1   # the nri-qos peer's state dir (nridriver)
# Both modes in the same run (issue #34): `nri-qos` one process per event (settings.evaluator_events
# = 1, the default), `nri-qos-resident` the same binary and policy with evaluator_events =
# $BENCH_EVALUATOR_EVENTS (default 1000), given as its own plugin config's policy.
bench_resident_policy "$S/policy.toml" "$S/policy-resident.toml" "$BIN" ||
  { echo "bench: cannot make the resident peer's policy" >&2; exit 1; }
bench_seed_sinks "$BIN" "$S/policy-resident.toml" "$S/nri-qos-resident/state" || exit 1

# Debian version of a package unpacked into trixie-root (from its changelog)
debver() { zcat "$E2E_CACHE/trixie-root/usr/share/doc/$1/changelog.Debian.gz" 2>/dev/null | sed -n '1s/.*(\(.*\)).*/\1/p'; }
NRI_VER=$(debver golang-github-containerd-nri-dev)
{
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nri-qos: $BIN ($("$BIN" --version 2>/dev/null | head -1)); go-stub: bench/gostub built with $("$(bench_go_bin)" version | awk '{print $3}') on containerd/nri ${NRI_VER:-?} (Debian trixie)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg); scratch on $(stat -f -c %T "$S")"
echo
"$BB/nridriver" -fixtures "$TOP/tests/fixtures/requests/containerd-1.7.24-adapter" -scratch "$S" \
  -policy "$S/policy.toml" -rounds "$N" -warmup "$W" -json "$BB/$PART.json" -ref go-stub \
  $([ "$PART" = storm ] && echo "-storm ${BENCH_STORM_PODS:-100} -inflight ${BENCH_STORM_INFLIGHT:-16} -storm-runs ${BENCH_STORM_RUNS:-5}") \
  -nri-version "${NRI_VER:-?}" \
  -peer "nri-qos=$BIN" -peer "nri-qos-resident=$BIN,policy=$S/policy-resident.toml" -peer "go-stub=$BB/gostub" -peer "go-null=$BB/gostub,mode=null" \
  -peer "relay-floor=$FLOOR_BIN,_work=none"
} | tee "$OUT"

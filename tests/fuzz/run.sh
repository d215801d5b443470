#!/bin/bash
# libFuzzer targets of nri-qos (issue 3, "Fuzzing").
#
# Usage: tests/fuzz/run.sh build            build the targets into build/fuzz/
#        tests/fuzz/run.sh smoke [TARGET..] each target FUZZ_SECONDS (default 10) s; CI (`make fuzz-smoke`)
#        tests/fuzz/run.sh long  [TARGET..] each target FUZZ_SECONDS (default 600) s (`make fuzz`)
#        tests/fuzz/run.sh repro TARGET FILE..   run the target once on the given inputs
# Targets: request (parse_v01_request + parse_nri_event), policy (parse_policy_toml + cache round
# trip + classify), cgroups_path (resolve_cgroups_path), pipeline (run_pipeline in explain, invoke
# and nri-eval mode against a scratch root), fact_readers (the annotation readers of the facts and
# the CPU list format), numa (NUMA placement choice on arbitrary topologies), and the relay's
# parsers: framing (mux frames → ttrpc messages → request/response envelopes), nri_json (NRI
# protobuf events → NRI JSON → the child's parser; the child's JSON answer → protobuf), and
# pod_manifest (`explain --pod`'s YAML/JSON Pod manifest reader, the kubelet layout and NRI events).
# Env: FUZZ_SECONDS, FUZZ_PARALLEL (targets run at once, default 1), CXX_FUZZ (default clang++),
#      FUZZ_SCRATCH (where the pipeline target makes its scratch root, default /tmp),
#      FUZZ_NO_CACHE=1 (pipeline target without the compiled-policy cache),
#      FUZZ_OVERLAY=DIR (compile DIR/X.cpp / DIR/X.hpp instead of src/<folder>/X.*: fuzz a proposed fix;
#      everything then goes to build/fuzz-overlay/).
#
# The library sources (src/<folder>/*.cpp but src/nri and src/cli/main.cpp) are compiled with clang and
# -fsanitize=address,undefined into build/fuzz/obj, the relay's codec sources (src/nri/mux,
# ttrpc, nri_json and the protoc output) into build/fuzz/obj/nri; every target is linked with
# -fsanitize=fuzzer (framing and nri_json also with those and -lprotobuf-lite). Any crash, sanitizer report, leak, timeout or invariant
# violation (the targets abort) fails the run; the input is saved under build/fuzz/artifacts/.
# Prints `PASS fuzz-<target>` / `FAIL fuzz-<target>` and a summary line with the exec count.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
MODE=${1:-smoke}
shift || true
OUT=build/fuzz
OVERLAY=${FUZZ_OVERLAY:-}
if [ -n "$OVERLAY" ]; then OVERLAY=$(cd "$OVERLAY" && pwd) || exit 2; OUT=build/fuzz-overlay; fi
CXX_FUZZ=${CXX_FUZZ:-clang++}
VERSION=$(cat VERSION 2>/dev/null || echo 0.0.0)
ALL_TARGETS=(request policy cgroups_path pipeline fact_readers numa framing nri_json pod_manifest)
# The hook library's folders (Makefile SRC_DIRS without nri: its codecs are NRI_SRCS).
LIB_DIRS=(src/os src/model src/records src/policy src/facts src/event src/cli)
NRI_SRCS=(src/nri/mux.cpp src/nri/ttrpc.cpp src/nri/nri_json.cpp src/nri/service_status.cpp build/gen/nri/nri.pb.cc)
# status.cpp (every target links the library) reads the relay service's liveness file.
NRI_ALL_TARGETS_OBJ=service_status.o

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -gline-tables-only: file:line in sanitizer reports and crash stacks is all the runs use; full -g
# cost ~10 % more compiler time (issue #31 CI time). The smoke's 10 s per target (was 20) replays
# the corpus (tests/fuzz/corpus) first, then mutates; `make fuzz` is the long run.
CXXFLAGS_F="-std=c++17 -gline-tables-only -O1 $SAN ${OVERLAY:+-I$OVERLAY} -Isrc -I$OUT/gen -Ibuild/gen -D_GNU_SOURCE -DNRI_QOS_VERSION=\"$VERSION\" -DNRI_QOS_FUZZ=1 -w"

die() { echo "fuzz/run.sh: $*" >&2; exit 2; }

# Compiles and links run as up to FUZZ_JOBS (default: one per CPU) background jobs: on a cold CI
# machine the ASan/UBSan build of every library source was most of the fuzz suite's time.
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
RUNNING=() JOB_FAILED=0
job() {  # job LABEL CMD...: run CMD in the background, at most JOBS at a time
    local label=$1; shift
    while [ ${#RUNNING[@]} -ge "$JOBS" ]; do
        wait -n || JOB_FAILED=1
        local live=() p
        for p in "${RUNNING[@]}"; do kill -0 "$p" 2>/dev/null && live+=("$p"); done
        RUNNING=("${live[@]}")
    done
    echo "$label" >&2
    "$@" &
    RUNNING+=($!)
}
compile_job() { job "  CXX(fuzz) $1" $CXX_FUZZ $CXXFLAGS_F -fsanitize=fuzzer-no-link -c "$1" -o "$2"; }
compile_wait() {  # every job ended; 1 if any failed
    local p
    for p in "${RUNNING[@]}"; do wait "$p" || JOB_FAILED=1; done
    RUNNING=()
    [ "$JOB_FAILED" = 0 ]
}

build() {
    command -v "$CXX_FUZZ" >/dev/null || die "$CXX_FUZZ not found (scripts/deps.sh fuzz)"
    mkdir -p "$OUT/obj" "$OUT/artifacts"
    # sandbox.cpp's program, policy_builtin.cpp's compiled-in policy
    make -s build/gen/seccomp_bpf.h build/gen/policy_builtin.inc || die "make build/gen/seccomp_bpf.h build/gen/policy_builtin.inc failed"
    local objs=() src obj newest_hdr
    newest_hdr=$(ls -t ${LIB_DIRS[@]/%//*.hpp} tests/fuzz/*.hpp ${OVERLAY:+"$OVERLAY"/*.hpp} 2>/dev/null | head -1)
    for src in ${LIB_DIRS[@]/%//*.cpp}; do
        [ "$src" = src/cli/main.cpp ] && continue
        obj="$OUT/obj/$(basename "${src%.cpp}").o"
        [ -n "$OVERLAY" ] && [ -f "$OVERLAY/$(basename "$src")" ] && src="$OVERLAY/$(basename "$src")"
        if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_hdr" -nt "$obj" ]; then
            compile_job "$src" "$obj"
        fi
        objs+=("$obj")
    done
    compile_wait || die "compile failed (see above)"
    # Drop objects of sources that no longer exist.
    for obj in "$OUT"/obj/*.o; do
        compgen -G "src/*/$(basename "${obj%.o}").cpp" >/dev/null || rm -f "$obj"
    done
    # The relay's codecs (and the protobuf code they need), for the framing and nri_json targets.
    make -s build/gen/nri/nri.pb.cc || die "make build/gen/nri/nri.pb.cc failed"
    mkdir -p "$OUT/obj/nri"
    local nri_objs=()
    newest_hdr=$(ls -t src/nri/*.hpp build/gen/nri/nri.pb.h 2>/dev/null | head -1)
    for src in "${NRI_SRCS[@]}"; do
        obj="$OUT/obj/nri/$(basename "${src%.cc}" .cpp).o"
        if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_hdr" -nt "$obj" ]; then
            compile_job "$src" "$obj"
        fi
        nri_objs+=("$obj")
    done
    compile_wait || die "compile failed (see above)"
    local t bin extra
    for t in "${ALL_TARGETS[@]}"; do
        bin="$OUT/fuzz_$t"
        extra=()
        case $t in framing|nri_json) extra=("${nri_objs[@]}" -lprotobuf-lite) ;; *) extra=("$OUT/obj/nri/$NRI_ALL_TARGETS_OBJ") ;; esac
        if [ ! -f "$bin" ] || [ "tests/fuzz/fuzz_$t.cpp" -nt "$bin" ] || [ -n "$(find "$OUT/obj" tests/fuzz/fuzz_common.hpp -newer "$bin" -print -quit)" ]; then
            job "  LINK(fuzz) $bin" $CXX_FUZZ $CXXFLAGS_F -fsanitize=fuzzer "tests/fuzz/fuzz_$t.cpp" "${objs[@]}" "${extra[@]}" -lnettle -lyaml-cpp -o "$bin"
        fi
    done
    compile_wait || die "link failed (see above)"
}

# Per-target libFuzzer options.
opts_for() {
    case $1 in
        request) echo "-max_len=65536 -dict=tests/fuzz/json.dict" ;;
        pipeline) echo "-max_len=65536 -dict=tests/fuzz/json.dict -close_fd_mask=2" ;;
        policy) echo "-max_len=32768 -dict=tests/fuzz/toml.dict" ;;
        cgroups_path) echo "-max_len=4096" ;;
        fact_readers) echo "-max_len=65536 -dict=tests/fuzz/json.dict" ;;
        numa) echo "-max_len=8192" ;;
        framing) echo "-max_len=65536" ;;
        nri_json) echo "-max_len=65536 -dict=tests/fuzz/json.dict" ;;
        pod_manifest) echo "-max_len=65536" ;;
    esac
}

run_one() {  # target seconds → writes $LOGS/<t>.log, returns libFuzzer's status
    local t=$1 secs=$2 work="$OUT/corpus/$1"
    mkdir -p "$work" "$OUT/artifacts"
    # New inputs go to build/fuzz/corpus/<t> (first dir); the checked-in seeds are read-only.
    # shellcheck disable=SC2046
    "$BIN/fuzz_$t" $(opts_for "$t") -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t-" \
        "$work" "tests/fuzz/corpus/$t" >"$LOGS/$t.log" 2>&1
}

summary() {  # target → one line from the log
    local log="$LOGS/$1.log" runs cov corp
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
    corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1)
    echo "fuzz $1: ${runs:-?} execs in ${2}s, edge coverage ${cov:-?}, corpus ${corp:-?}"
}

case $MODE in
    build) build; exit 0 ;;
    smoke) SECS=${FUZZ_SECONDS:-10} ;;
    long) SECS=${FUZZ_SECONDS:-600} ;;
    repro)
        build
        t=${1:?target}; shift
        # shellcheck disable=SC2046
        exec "$OUT/fuzz_$t" $(opts_for "$t" | sed 's/-close_fd_mask=2//') -runs=1 "$@" ;;
    *) die "unknown mode '$MODE' (build|smoke|long|repro)" ;;
esac

build
# Logs and a private copy of the binaries per mode: a long run in the background is not disturbed
# by a rebuild or a smoke run.
LOGS="$OUT/$MODE"
BIN="$LOGS/bin"
mkdir -p "$BIN"
for t in "${ALL_TARGETS[@]}"; do cp -f "$OUT/fuzz_$t" "$BIN/fuzz_$t.new" && mv -f "$BIN/fuzz_$t.new" "$BIN/fuzz_$t"; done
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
# smoke: one target per CPU at a time (each is time-boxed, so the run is as long as a target's
# budget times the targets over the CPUs); long runs stay one at a time unless asked
if [ "$MODE" = smoke ]; then PAR=${FUZZ_PARALLEL:-$JOBS}; else PAR=${FUZZ_PARALLEL:-1}; fi
fail=0
declare -A PIDS=()
finish() {  # target pid
    local t=$1 rc
    wait "$2" 2>/dev/null
    rc=$(cat "$LOGS/$t.rc" 2>/dev/null || echo 99)
    if [ "$rc" -eq 0 ] && grep -q 'Done [0-9]* runs' "$LOGS/$t.log"; then
        echo "PASS fuzz-$t  ($(summary "$t" "$SECS"))"
        summary "$t" "$SECS" >>"$LOGS/summary.txt"
    else
        echo "FAIL fuzz-$t  (exit $rc; log $LOGS/$t.log; artifacts $OUT/artifacts/$t-*)"
        grep -E 'ERROR:|SUMMARY:|INVARIANT|runtime error|Test unit written' "$LOGS/$t.log" | head -8 | sed 's/^/    /'
        fail=1
    fi
}
: >"$LOGS/summary.txt"
for t in "${TARGETS[@]}"; do
    [ -x "$BIN/fuzz_$t" ] || die "unknown target '$t'"
    while [ ${#PIDS[@]} -ge "$PAR" ]; do
        sleep 1
        for k in "${!PIDS[@]}"; do
            if ! kill -0 "${PIDS[$k]}" 2>/dev/null; then finish "$k" "${PIDS[$k]}"; unset "PIDS[$k]"; fi
        done
    done
    rm -f "$LOGS/$t.rc"
    ( run_one "$t" "$SECS"; echo $? >"$LOGS/$t.rc" ) &
    PIDS[$t]=$!
done
for k in "${!PIDS[@]}"; do finish "$k" "${PIDS[$k]}"; done
exit $fail

#!/bin/bash
# Pod start latency on real containerd (part of `make bench`; issue 13, "what a user feels"):
# RunPodSandbox + CreateContainer + StartContainer per pod through CRI, on
#   containerd 1.7.24 (Debian trixie): no plugin | nri-qos native | nri-qos native, resident
#                                      evaluators | the Go stub plugin (bench/gostub)
#   containerd 2.1.x  (Debian sid):    the same four
# "nri-qos" is one sandboxed evaluator per event (settings.evaluator_events = 1, the default);
# "nri-qos-resident" the same binary and policy with evaluator_events = $BENCH_EVALUATOR_EVENTS
# (default 1000; issue #34: both modes in the same run).
# Every configuration is its own isolated containerd (private root, state, sockets, NRI plugin
# directory and config directory under $E2E_WORK/containerd-bench-<cfg>; nothing in /opt/nri or
# /etc/nri), all running at once; bench/podstart.py starts one pod at a time, configurations
# interleaved pod by pod. NRI is enabled in every configuration ("no plugin" = an empty plugin
# directory). nri-qos runs the benchmark's own policy (bench/native-policy.toml), whose work
# bench/gostub does compiled in. The pods are BE by label (koordinator.sh/qosClass=BE), so the
# plugins adjust every container and write its knobs; podstart.py checks the container's
# cpu.shares 2 and its process's oom_score_adj 1000 (no plugin: 512 and 0).
#
# Uses the e2e kit (tests/e2e/lib.sh: preflight, the e2e flock, containerd start/stop, teardown
# by PID; trixie/sid packages from the e2e recipe and cache, bench/lib.sh). Prints "SKIP podstart:
# reason" and exits 0 when the machine cannot run it.
# Output: markdown on stdout and in $OUT (default build/bench/podstart.md), samples in
# build/bench/podstart.json. Env: BENCH_PODS (per configuration, default 60: 8 configurations
# interleaved, 504 pods, about 5.5 minutes at 0.65 s a pod on the idle 2-CPU machine, so that
# `make bench` stays within about 15 minutes; 200 narrows the confidence intervals to about
# ±10 ms), BENCH_PODS_WARMUP (default 3), BENCH_EVALUATOR_EVENTS (default 1000), NRI_QOS_BIN,
# E2E_CACHE, E2E_WORK.
# shellcheck disable=SC2034  # CONTAINERD, CTR, SHIM_PATH are read by lib.sh
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../tests/e2e/lib.sh
. "$TOP/tests/e2e/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$TOP/bench/lib.sh"
BB=$TOP/build/bench
OUT=${OUT:-$BB/podstart.md}
PODS=${BENCH_PODS:-60}
WARM=${BENCH_PODS_WARMUP:-3}
mkdir -p "$BB"
skip_all() { echo "SKIP podstart: $*" | tee "$OUT"; exit 0; }

why=$(preflight)
[ -z "$why" ] && [ ! -x "$NRI_QOS_BIN" ] && why="$NRI_QOS_BIN missing (run make)"
[ -z "$why" ] || skip_all "$why"
bench_trixie || skip_all "cannot fetch Debian trixie's containerd and Go (apt)"
C21=$(bench_c21) || { log "no containerd 2.1 (Debian $BENCH_C21_SUITE): 2.1 configurations skipped"; C21=""; }
GOSTUB=$BB/gostub
bench_go_build "$TOP/bench/gostub" "$GOSTUB" || skip_all "cannot build bench/gostub"

# configurations: name containerd-root plugin
CFGS=("c17-none trixie -" "c17-nri-qos trixie nri-qos" "c17-nri-qos-resident trixie nri-qos-resident" "c17-go-stub trixie go-stub")
[ -n "$C21" ] && CFGS+=("c21-none $BENCH_C21_SUITE -" "c21-nri-qos $BENCH_C21_SUITE nri-qos"
                        "c21-nri-qos-resident $BENCH_C21_SUITE nri-qos-resident" "c21-go-stub $BENCH_C21_SUITE go-stub")

use() { # use NAME ROOT: lib.sh globals for this configuration
  D=$E2E_WORK/containerd-bench-$1
  CONTAINERD=$E2E_CACHE/$2-root/usr/bin/containerd
  CTR=$E2E_CACHE/$2-root/usr/bin/ctr
  SHIM_PATH=$E2E_CACHE/$2-root/usr/bin
}

# shellcheck disable=SC2317  # run by the EXIT trap
teardown_bench() {
  local c name root
  for c in "${CFGS[@]}"; do
    read -r name root _ <<<"$c"
    use "$name" "$root"
    teardown_all   # containerd stops first: its plugins exit on EOF
    # shellcheck disable=SC2046  # pid list
    kill_pids $(pids_with_arg "$D/nri/plugins/")
    rm -rf "$D/nri"
  done
}

# Each plugin in the containerd's private plugin directory, as a package would install it in
# /opt/nri/plugins: a copy of the binary named NN-name, its config in the drop-in directory.
setup_cfg() { # NAME ROOT PLUGIN
  use "$1" "$2"
  rm -rf "$D/nri"; mkdir -p "$D/nri/plugins" "$D/nri/conf.d" "$D/nri/state"
  case $3 in
    nri-qos|nri-qos-resident)
      install -m 0755 "$NRI_QOS_BIN" "$D/nri/plugins/10-nri-qos"
      # the bench policy (bench/native-policy.toml: what bench/gostub does), records in scratch
      bench_policy "$D/nri/nri-qos.toml" "$D/nri/records" "$NRI_QOS_BIN" || return 1
      if [ "$3" = nri-qos-resident ]; then   # the same policy with settings.evaluator_events = N
        bench_resident_policy "$D/nri/nri-qos.toml" "$D/nri/nri-qos-resident.toml" "$NRI_QOS_BIN" &&
          mv -f "$D/nri/nri-qos-resident.toml" "$D/nri/nri-qos.toml" || return 1
      fi
      bench_seed_sinks "$NRI_QOS_BIN" "$D/nri/nri-qos.toml" "$D/nri/state" || return 1
      printf '{"policy": "%s", "state_dir": "%s", "cache_dir": "%s", "log_file": "%s"}\n' "$D/nri/nri-qos.toml" \
        "$D/nri/state" "$D/nri/cache" "$D/logs/nri-qos.log" > "$D/nri/conf.d/10-nri-qos.conf" ;;
    go-stub)
      install -m 0755 "$GOSTUB" "$D/nri/plugins/10-gostub"
      echo '{}' > "$D/nri/conf.d/10-gostub.conf" ;;
  esac
  write_config_common "[plugins.\"io.containerd.nri.v1.nri\"]
  disable = false
  disable_connections = true
  plugin_config_path = \"$D/nri/conf.d\"
  plugin_path = \"$D/nri/plugins\"
  plugin_registration_timeout = \"5s\"
  plugin_request_timeout = \"2s\"
  socket_path = \"$D/nri.sock\""
  start_containerd || { log "$1: containerd did not start (see $D/logs/containerd.log)"; return 1; }
  import_image
}

take_lock || skip_all "another e2e run holds $E2E_WORK/lock"
trap 'teardown_bench' EXIT
trap 'exit 130' INT TERM
use c17-none trixie
cleanup_stale
nri_backup

args=() ; for c in "${CFGS[@]}"; do
  read -r name root plugin <<<"$c"
  setup_cfg "$name" "$root" "$plugin" || { echo "FAIL podstart: $name setup" | tee "$OUT"; exit 1; }
  exp=",expect_shares=2,expect_oom=1000"
  [ "$plugin" = - ] && exp=",expect_shares=512,expect_oom=0"
  args+=(--config "$name=$D/containerd.sock$exp")
done
for cd in c17 c21; do
  [ $cd = c21 ] && [ -z "$C21" ] && continue
  args+=(--baseline "$cd-nri-qos=$cd-none" --baseline "$cd-nri-qos-resident=$cd-none" --baseline "$cd-go-stub=$cd-none"
         --compare "$cd-nri-qos=$cd-go-stub" --compare "$cd-nri-qos-resident=$cd-go-stub")
done

{
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); nri-qos: $NRI_QOS_BIN ($("$NRI_QOS_BIN" --version 2>/dev/null | head -1)); runc $(/usr/bin/runc --version | awk 'NR==1 {print $3}') (bookworm); cgroup $(cgroup_layout), cgroupfs driver"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$PY" "$TOP/bench/podstart.py" "${args[@]}" --pods "$PODS" --warmup "$WARM" --image "$IMAGE" \
  --uid-prefix "$UIDP" --label koordinator.sh/qosClass=BE --json "$BB/podstart.json"
} | tee "$OUT"
rc=${PIPESTATUS[0]}
exit "$rc"

#!/bin/bash
# Binary-level tests of `nri-qos invoke` / `explain` / `check`: the real captured requests of
# containerd 1.6.20 and 1.7.24 (+ v0.1 adapter) through the built binary, against scratch cgroup
# v1 and v2 trees; asserts the exact files and values written.
. "$(dirname "$0")/lib.sh"

[ -x "$BIN" ] || { fail "binary $BIN missing (run make)"; finish; }
command -v jq >/dev/null || { fail "jq missing (scripts/deps.sh test)"; finish; }

# run_hook ROOT STATE [extra args...] < request   → stdout in $OUT, exit code in $RC
# (env: LAYOUT, default v1; HOOK_POLICY, default the bundled policy)
run_hook() {
  local root=$1 state=$2; shift 2
  OUT=$("$BIN" invoke --policy "${HOOK_POLICY:-$POLICY}" --cgroup-root "$root" --cgroup-layout "${LAYOUT:-v1}" \
        --proc-root "$root/proc" --resctrl-root "$root/resctrl" --state-dir "$state" --cache-dir "" "$@" 2>"$root/stderr")
  RC=$?
}

for ver in containerd-1.6.20 containerd-1.7.24-adapter; do
  D=$FIX/requests/$ver
  SB=$(cat "$D/sandbox-create.json"); CT=$(cat "$D/container-create.json")
  pod_rel=$(jq -r '.spec.cgroupsPath' <<<"$SB" | sed 's#^/##; s#/[^/]*$##')
  ctr_rel=$(jq -r '.spec.cgroupsPath' <<<"$CT" | sed 's#^/##')
  ctr_pid=$(jq -r '.pid' <<<"$CT")

  # --- unmodified requests: burstable pod, no class label → LS by Kubernetes QoS -------------
  R=$(scratch); S=$R/state
  mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$ctr_rel"; mkdir -p "$R/proc/$ctr_pid"; : > "$R/proc/$ctr_pid/oom_score_adj"
  run_hook "$R" "$S" <<<"$SB"
  valid_result "$ver sandbox create" "$OUT"
  check "$ver sandbox create: exit 0" "$RC" 0
  check "$ver sandbox create: class" "$(jq_get "$OUT" .metadata.class)" LS
  check "$ver sandbox create: rule" "$(jq_get "$OUT" .metadata.rule)" kube-burstable-guaranteed
  sid=$(jq -r .sandboxID <<<"$SB")
  check "$ver sandbox create: memo written" "$(jq -r .class "$S/$sid.json" 2>/dev/null)" LS
  run_hook "$R" "$S" <<<"$CT"
  valid_result "$ver container create" "$OUT"
  check "$ver container create: class" "$(jq_get "$OUT" .metadata.class)" LS
  check_contains "$ver container create: burst needs a quota" "$(jq_get "$OUT" .metadata.skipped)" "cpu_burst_us: no OCI cpu.quota"
  check_contains "$ver container create: memory.high absent on v1" "$(jq_get "$OUT" .metadata.skipped)" "memory.high=60397977 (kernel does not provide this file)"
  check "$ver container create: cpu.shares untouched" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" ""
  run_hook "$R" "$S" < "$D/container-delete.json"
  check "$ver container delete: nothing written" "$(jq_get "$OUT" '.writes|length')" 0
  run_hook "$R" "$S" < "$D/sandbox-delete.json"
  valid_result "$ver sandbox delete" "$OUT"
  check "$ver sandbox delete: memo removed" "$(ls "$S" | grep -vx last-good)" ""

  # --- koordinator.sh/qosClass: BE ------------------------------------------------------------
  R=$(scratch); S=$R/state
  mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$ctr_rel"; mkdir -p "$R/proc/$ctr_pid"; : > "$R/proc/$ctr_pid/oom_score_adj"
  run_hook "$R" "$S" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$SB")
  check "$ver BE sandbox: class" "$(jq_get "$OUT" .metadata.class)" BE
  check "$ver BE sandbox: pod cpu.idle left alone (kubelet writes cpu.shares there)" "$(cat "$R/cpu/$pod_rel/cpu.idle")" ""
  check_contains "$ver BE sandbox: pod cpu.qos_level (openEuler) skipped" "$(jq_get "$OUT" .metadata.skipped)" "pod:cpu.qos_level=-1 (kernel does not provide this file)"
  check "$ver BE sandbox: pause container untouched" "$(cat "$R/cpu/$pod_rel/$sid/cpu.shares" 2>/dev/null)" ""
  run_hook "$R" "$S" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
  check "$ver BE container: exit 0" "$RC" 0
  check "$ver BE container: error empty" "$(jq_get "$OUT" .error)" ""
  check "$ver BE container: cpu.shares" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" 2
  check "$ver BE container: cpu.cfs_burst_us" "$(cat "$R/cpu/$ctr_rel/cpu.cfs_burst_us")" 0
  check "$ver BE container: oom_score_adj" "$(cat "$R/proc/$ctr_pid/oom_score_adj")" 1000
  check "$ver BE container: quota untouched" "$(cat "$R/cpu/$ctr_rel/cpu.cfs_quota_us")" ""
  check "$ver BE container: applied" "$(jq_get "$OUT" .metadata.applied)" "cpu.shares=2 cpu.cfs_burst_us=0 oom_score_adj=1000"
  check "$ver BE container: adjustment" "$(jq -c .adjustment <<<"$OUT")" '{"linux":{"oom_score_adj":{"value":1000},"resources":{"cpu":{"shares":{"value":2}}}}}'
done

D=$FIX/requests/containerd-1.6.20
SB=$(cat "$D/sandbox-create.json"); CT=$(cat "$D/container-create.json")
pod_rel=$(jq -r '.spec.cgroupsPath' <<<"$SB" | sed 's#^/##; s#/[^/]*$##')
ctr_rel=$(jq -r '.spec.cgroupsPath' <<<"$CT" | sed 's#^/##')
sid=$(jq -r .sandboxID <<<"$SB")

# --- class carried by a pod annotation seen only on the sandbox event (no allow-list) ------
R=$(scratch); S=$R/state; mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$ctr_rel"
run_hook "$R" "$S" < <(jq -c '.spec.annotations["openfuyao.com/qos-level"]="BE"' <<<"$SB")
check "memo: sandbox BE by openFuyao annotation" "$(jq_get "$OUT" .metadata.class)" BE
NOALLOW=$(jq -c --arg s "$sid" '.sandboxID=$s | .spec.cgroupsPath="/'"$ctr_rel"'"' "$D/container-create-no-allowlist.json")
check "memo: container request lacks the annotation" "$(jq -r '.spec.annotations["openfuyao.com/qos-level"] // "absent"' <<<"$NOALLOW")" absent
run_hook "$R" "$S" <<<"$NOALLOW"
check "memo: container gets the sandbox's class" "$(jq_get "$OUT" .metadata.class)" BE
check "memo: container cpu.shares" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" 2
rm -rf "$S"
run_hook "$R" "$S" <<<"$NOALLOW"
check "memo: without the memo the container is LS" "$(jq_get "$OUT" .metadata.class)" LS

# --- LS container with a CFS quota: burst = 100 % of the quota --------------------------------
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"
run_hook "$R" "$R/state" < <(jq -c '.spec.resources.cpu.quota=50000 | .spec.resources.cpu.period=100000' <<<"$CT")
check "LS quota: cpu.cfs_burst_us" "$(cat "$R/cpu/$ctr_rel/cpu.cfs_burst_us")" 50000
check "LS quota: cpu.shares untouched" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" ""

# --- cgroup v2 layout: conversions ------------------------------------------------------------
R=$(scratch); mk_v2_dir "$R" "$pod_rel"; mk_v2_dir "$R" "$ctr_rel"
LAYOUT=v2 run_hook "$R" "$R/state" < <(jq -c '.spec.resources.cpu.quota=50000' <<<"$CT")
check "v2 LS: cpu.max.burst" "$(cat "$R/$ctr_rel/cpu.max.burst")" 50000
check "v2 LS: memory.high = 90% of 64 MiB" "$(cat "$R/$ctr_rel/memory.high")" 60397977
check "v2 LS: adjustment uses unified" "$(jq -c .adjustment.linux.resources.unified <<<"$OUT")" '{"cpu.max.burst":"50000","memory.high":"60397977"}'
LAYOUT=v2 run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$SB")
check "v2 BE sandbox: pod cpu.idle left alone" "$(cat "$R/$pod_rel/cpu.idle")" ""
LAYOUT=v2 run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
check "v2 BE: cpu.weight (shares 2)" "$(cat "$R/$ctr_rel/cpu.weight")" 1

# --- cgroup v2, settings.cpu_weight_formula = "auto" (issue #24) ------------------------------
# The weight nri-qos writes is on the scale of the one runc wrote beside it. runc 1.1 (linear)
# wrote the container's cpu.weight 20 for its OCI shares 512; the class's shares 256 must become
# 10 (linear), below that burstable 20 — not log-quadratic's 35.
R=$(scratch); mk_v2_dir "$R" "$pod_rel"; mk_v2_dir "$R" "$ctr_rel"
printf 'version = 1\n[settings]\ndefault_class = "B"\n[classes.B.container]\ncpu_shares = 256\n[classes.B.pod]\ncpu_shares = 256\n' > "$R/auto.toml"
echo 20 > "$R/$ctr_rel/cpu.weight"
NRI_QOS_RUNTIME_BINARY=none HOOK_POLICY=$R/auto.toml LAYOUT=v2 run_hook "$R" "$R/state" <<<"$CT"
check "v2 auto: runc 1.1's weight 20 of shares 512 -> the class's 256 linear" "$(cat "$R/$ctr_rel/cpu.weight")" 10
check "v2 auto: metadata says which formula and why" "$(jq_get "$OUT" .metadata.cpu_weight_formula)" \
  "linear: container's own cpu.weight 20 = linear of OCI shares 512"
check_contains "v2 auto: the record says it too" "$(cat "$R/stderr")" 'weight_formula="linear: container'"'"'s own cpu.weight 20'
echo 59 > "$R/$ctr_rel/cpu.weight"   # runc >= 1.3.2 wrote log-quadratic's 59
NRI_QOS_RUNTIME_BINARY=none HOOK_POLICY=$R/auto.toml LAYOUT=v2 run_hook "$R" "$R/state" <<<"$CT"
check "v2 auto: runc 1.3's weight 59 -> log-quadratic 35" "$(cat "$R/$ctr_rel/cpu.weight")" 35
echo 59 > "$R/$ctr_rel/cpu.weight"   # as runc left it (the invoke above wrote 35 over it)
EXPL=$(NRI_QOS_RUNTIME_BINARY=none "$BIN" explain --policy "$R/auto.toml" --cgroup-root "$R" --cgroup-layout v2 --state-dir "$R/state" --cache-dir "" <<<"$CT")
check_contains "v2 auto: explain shows the formula and why" "$EXPL" "cpu_weight_formula: log-quadratic: container's own cpu.weight 59 = log-quadratic of OCI shares 512"
# no evidence of its own (BestEffort: shares 2 -> 1 in both formulas): the runtime's version,
# probed by invoke itself before its sandbox when the state dir has no runc-formula yet
printf '#!/bin/sh\necho "runc version 1.1.5+ds1"\necho "commit: 1.1.5+ds1-1+deb12u1"\n' > "$R/fake-runc"; chmod +x "$R/fake-runc"
echo 1 > "$R/$ctr_rel/cpu.weight"
NRI_QOS_RUNTIME_BINARY=$R/fake-runc HOOK_POLICY=$R/auto.toml LAYOUT=v2 run_hook "$R" "$R/state2" < <(jq -c '.spec.resources.cpu.shares=2' <<<"$CT")
check "v2 auto: probe cached in the state dir" "$(jq -r '.formula + " " + .version' "$R/state2/runc-formula")" "linear runc 1.1.5"
check "v2 auto: ambiguous pair, runc 1.1.5 -> linear" "$(cat "$R/$ctr_rel/cpu.weight")" 10
check "v2 auto: why (ambiguous own pair, then the runtime)" "$(jq_get "$OUT" .metadata.cpu_weight_formula)" \
  "linear: runc 1.1.5 ($R/fake-runc --version, cached in the state dir runc-formula); container's own cpu.weight 1 of shares 2 fits both formulas"
# the pod level follows the same rule (sandbox: its own pair 2 -> 1 is no evidence; the cache is)
NRI_QOS_RUNTIME_BINARY=none HOOK_POLICY=$R/auto.toml LAYOUT=v2 run_hook "$R" "$R/state2" <<<"$SB"
check "v2 auto: pod cgroup cpu.weight, linear too" "$(cat "$R/$pod_rel/cpu.weight")" 10
# the explicit setting still wins (the Koordinator pod-level exception is an explicit setting)
printf 'version = 1\n[settings]\ndefault_class = "B"\ncpu_weight_formula = "log-quadratic"\n[classes.B.container]\ncpu_shares = 256\n' > "$R/lq.toml"
echo 20 > "$R/$ctr_rel/cpu.weight"
NRI_QOS_RUNTIME_BINARY=none HOOK_POLICY=$R/lq.toml LAYOUT=v2 run_hook "$R" "$R/state" <<<"$CT"
check "v2 explicit log-quadratic: 35 whatever runc wrote" "$(cat "$R/$ctr_rel/cpu.weight")" 35
check "v2 explicit: metadata" "$(jq_get "$OUT" .metadata.cpu_weight_formula)" "log-quadratic: settings.cpu_weight_formula"

# --- systemd cgroup driver: slice expansion ------------------------------------------------
uid=$(jq -r '.spec.annotations["io.kubernetes.cri.sandbox-uid"]' <<<"$CT" | tr - _)
cid=$(jq -r .id <<<"$CT")
slice="kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod$uid.slice"
R=$(scratch); mk_v1_dir "$R" "$slice/cri-containerd-$cid.scope"
run_hook "$R" "$R/state" < <(jq -c --arg p "kubepods-besteffort-pod$uid.slice:cri-containerd:$cid" '.spec.cgroupsPath=$p' <<<"$CT")
check "systemd: class from besteffort slice" "$(jq_get "$OUT" .metadata.rule)" kube-besteffort
check "systemd: cpu.shares in the expanded scope" "$(cat "$R/cpu/$slice/cri-containerd-$cid.scope/cpu.shares")" 2

# --- explain writes nothing ---------------------------------------------------------------------
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"
EXP=$("$BIN" explain --policy "$POLICY" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$R/proc" --state-dir "$R/state" --cache-dir "" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT"))
check_contains "explain: class line" "$EXP" "class:    BE (rule koordinator-be, kube QoS burstable)"
check_contains "explain: planned write" "$EXP" "write:    container cpu/$ctr_rel/cpu.shares = 2"
check "explain: nothing written" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" ""
check "explain: no state written" "$(ls "$R/state" 2>/dev/null)" ""
EXPJ=$("$BIN" explain --format json --policy "$POLICY" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" <<<"$CT")
check "explain json: class" "$(jq_get "$EXPJ" .class)" LS

# --- failures: fail-open by default, fail-closed when the class says so ---------------------
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"; mkdir "$R/cpu/$ctr_rel/cpu.broken_knob"   # a directory: write fails (EISDIR)
cat > "$R/p.toml" <<'EOF'
version = 1
[settings]
default_class = "X"
[classes.X.container]
cpu_shares = 100
raw = [{ file = "cpu.broken_knob", value = "1" }]
EOF
OUT=$("$BIN" invoke --policy "$R/p.toml" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" <<<"$CT" 2>"$R/err"); RC=$?
check "fail-open: exit 0" "$RC" 0
check "fail-open: error empty" "$(jq_get "$OUT" .error)" ""
check_contains "fail-open: failed knob reported" "$(jq_get "$OUT" .metadata.failed)" "cpu.broken_knob=1 (Is a directory)"
check "fail-open: other knobs applied" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" 100
check_contains "fail-open: logged to stderr" "$(cat "$R/err")" "1 knob(s) failed"
sed -i 's/^\[classes.X.container\]/[classes.X]\nfail = "closed"\n[classes.X.container]/' "$R/p.toml"
OUT=$("$BIN" invoke --policy "$R/p.toml" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" <<<"$CT" 2>/dev/null); RC=$?
valid_result "fail-closed" "$OUT"
check "fail-closed: exit 1" "$RC" 1
check_contains "fail-closed: error names nri-qos and the knob" "$(jq_get "$OUT" .error)" "nri-qos: class X: 1 knob(s) failed: cpu.broken_knob=1 (Is a directory); applied: cpu.shares=100"

# --- policy selection: flag > conf.policy > default ---------------------------------------------
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"
printf 'version = 1\n[settings]\ndefault_class = "C"\n[classes.C.container]\ncpu_shares = 300\n' > "$R/conf.toml"
OUT=$("$BIN" invoke --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" < <(jq -c --arg p "$R/conf.toml" '.conf.policy=$p' <<<"$CT"))
check "conf.policy used without --policy" "$(jq_get "$OUT" .metadata.class)" C
OUT=$("$BIN" invoke --policy "$POLICY" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" < <(jq -c --arg p "$R/conf.toml" '.conf.policy=$p' <<<"$CT"))
check "--policy overrides conf.policy" "$(jq_get "$OUT" .metadata.class)" LS

# --- broken policy: never off (last good copy, else built-in), error with file:line on every event --
# (tests/policy.sh covers the last good copy, the built-in policy and `check` in depth)
printf 'version = 1\n[settings]\ndefault_class = "C"\n[classes.C.container]\ncpu_shares = 1\n' > "$R/bad.toml"
OUT=$("$BIN" invoke --policy "$R/bad.toml" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" <<<"$CT" 2>/dev/null); RC=$?
valid_result "broken policy" "$OUT"
check "broken policy: exit 0" "$RC" 0
check "broken policy: error in metadata" "$(jq_get "$OUT" .metadata.policy_error)" "$R/bad.toml:5: classes.C.container.cpu_shares: 1 out of range [2, 262144] or \"N%\"; applying the built-in policy until it is fixed"
check "broken policy: the built-in policy classifies" "$(jq_get "$OUT" .metadata.policy)/$(jq_get "$OUT" .metadata.class)" builtin/DEFAULT
CHK=$("$BIN" check "$R/bad.toml" 2>&1 >/dev/null); RC=$?
check "check: broken policy exit 1" "$RC" 1
check "check: one line with file:line" "$CHK" "nri-qos: $R/bad.toml:5: classes.C.container.cpu_shares: 1 out of range [2, 262144] or \"N%\""
CHK=$("$BIN" check "$BUNDLED" 2>&1)
check "check: bundled policy" "$(head -1 <<<"$CHK")" "$BUNDLED: OK (23 rules, 10 classes, default class DEFAULT)"
# ... then only notes (which declaration unlocks which agent behaviour), never a warning
check "check: bundled policy: notes only after the summary" "$(tail -n +2 <<<"$CHK" | grep -vc "^$BUNDLED: note: ")" 0
check "check: mechanics fixture policy" "$("$BIN" check "$POLICY")" "$POLICY: OK (19 rules, 5 classes, default class LS)"

# --- bad request with settings.fail = "closed" -------------------------------------------------
printf 'version = 1\n[settings]\ndefault_class = "C"\nfail = "closed"\n[classes.C]\n' > "$R/closed.toml"
OUT=$(echo '{"version":"0.1","state":"create","id":"a/b"}' | "$BIN" invoke --policy "$R/closed.toml" --cgroup-root "$R" --state-dir "$R/state" --cache-dir "" 2>/dev/null); RC=$?
check "bad request, fail closed: exit 1" "$RC" 1
check "bad request, fail closed: error" "$(jq_get "$OUT" .error)" "nri-qos: bad request: /id: id may contain only [A-Za-z0-9_.-]"

# --- missing cgroup directory: a failure (fail-open by default: reported, exit 0) ---------------
R=$(scratch)
run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
check "missing cgroup: exit 0 (BE is fail-open)" "$RC" 0
check_contains "missing cgroup: reported as failed" "$(jq_get "$OUT" .metadata.failed)" "cpu.shares=2 (cgroup cpu/$ctr_rel does not exist)"
check_contains "missing cgroup: missing process reported as failed" "$(jq_get "$OUT" .metadata.failed)" "oom_score_adj=1000 (process 2529 does not exist)"

# ==== issue 9 §1: write like runc (scratch trees; the real kernel's EINVALs: cgroup_real.sh) ====
# pol FILE KNOBS [CLASS-SETTINGS]: a one-class policy (printf %b escapes)
pol() { printf 'version = 1\n[settings]\ndefault_class = "X"\n[classes.X]\n%b[classes.X.container]\n%b' "${3:-}" "$2" > "$1"; }
# wseq FILE-SUFFIX / wnote FILE-SUFFIX: the sink's write order number / note of that file in $OUT
wseq() { jq -r --arg f "$1" '[.writes[]|select(.file|endswith($f))|.seq][0] // "none"' <<<"$OUT"; }
wnote() { jq -r --arg f "$1" '[.writes[]|select(.file|endswith($f))|.note][0] // ""' <<<"$OUT"; }
mk_mem() { # DIR LIMIT MEMSW: runc's v1 memory files
  echo "$2" > "$1/memory.limit_in_bytes"; echo "$3" > "$1/memory.memsw.limit_in_bytes"
}

# v1 memory raised: memsw first (runc setMemoryAndSwap), decided from the current limit
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"; mk_mem "$R/memory/$ctr_rel" 67108864 67108864
pol "$R/p.toml" 'memory_limit = "128Mi"\nmemory_swap = "256Mi"\n'
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "memory raise: limit written" "$(cat "$R/memory/$ctr_rel/memory.limit_in_bytes")" 134217728
check "memory raise: memsw written" "$(cat "$R/memory/$ctr_rel/memory.memsw.limit_in_bytes")" 268435456
check "memory raise: memsw written first" "$(wseq memory.memsw.limit_in_bytes) $(wseq memory.limit_in_bytes)" "1 2"
check_contains "memory raise: the Result says why" "$(wnote memory.memsw.limit_in_bytes)" "runc setMemoryAndSwap"
# lowered: the limit first
mk_mem "$R/memory/$ctr_rel" 268435456 536870912
pol "$R/p.toml" 'memory_limit = "64Mi"\nmemory_swap = "128Mi"\n'
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "memory lower: limit written first" "$(wseq memory.limit_in_bytes) $(wseq memory.memsw.limit_in_bytes)" "1 2"
# memory_limit = max alone: memsw -1 too, first (runc)
mk_mem "$R/memory/$ctr_rel" 67108864 67108864
pol "$R/p.toml" 'memory_limit = "max"\n'
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "memory max: memsw -1 implied" "$(cat "$R/memory/$ctr_rel/memory.memsw.limit_in_bytes")" -1
check "memory max: memsw first" "$(wseq memory.memsw.limit_in_bytes) $(wseq memory.limit_in_bytes)" "1 2"
# memory_swap = 0 means unset (runc): nothing written, on v1 and v2
mk_mem "$R/memory/$ctr_rel" 67108864 67108864
pol "$R/p.toml" 'memory_swap = 0\n'
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "memory_swap = 0 (v1): memsw untouched" "$(cat "$R/memory/$ctr_rel/memory.memsw.limit_in_bytes")" 67108864
check_contains "memory_swap = 0 (v1): reported" "$(jq_get "$OUT" .metadata.skipped)" "memory_swap: 0 means unset (runc): not written"
R2=$(scratch); mk_v2_dir "$R2" "$ctr_rel"; echo 0 > "$R2/$ctr_rel/memory.swap.max"
HOOK_POLICY=$R/p.toml LAYOUT=v2 run_hook "$R2" "$R2/state" <<<"$CT"
check "memory_swap = 0 (v2): memory.swap.max untouched" "$(cat "$R2/$ctr_rel/memory.swap.max")" 0
check_contains "memory_swap = 0 (v2): reported" "$(jq_get "$OUT" .metadata.skipped)" "memory_swap: 0 means unset (runc): not written"

# percentages follow the class's own quota; the burst is written after the quota
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"
pol "$R/p.toml" 'cpu_quota_us = 20000\ncpu_burst_us = "100%"\n'
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" < <(jq -c '.spec.resources.cpu.quota=50000 | .spec.resources.cpu.period=100000' <<<"$CT")
check "percent of the class quota: cpu.cfs_quota_us" "$(cat "$R/cpu/$ctr_rel/cpu.cfs_quota_us")" 20000
check "percent of the class quota: cpu.cfs_burst_us (not 50000)" "$(cat "$R/cpu/$ctr_rel/cpu.cfs_burst_us")" 20000
check "percent of the class quota: burst after quota" "$(wseq cpu.cfs_quota_us) $(wseq cpu.cfs_burst_us)" "1 2"
R2=$(scratch); mk_v2_dir "$R2" "$ctr_rel"
HOOK_POLICY=$R/p.toml LAYOUT=v2 run_hook "$R2" "$R2/state" < <(jq -c '.spec.resources.cpu.quota=50000 | .spec.resources.cpu.period=100000' <<<"$CT")
check "percent of the class quota (v2): cpu.max.burst" "$(cat "$R2/$ctr_rel/cpu.max.burst")" 20000

# cgroup v2 blkio_weight: io.bfq.weight (as is) when the file exists, else io.weight (converted)
R=$(scratch); mk_v2_dir "$R" "$ctr_rel"
pol "$R/p.toml" 'blkio_weight = 500\n'
HOOK_POLICY=$R/p.toml LAYOUT=v2 run_hook "$R" "$R/state" <<<"$CT"
check "v2 blkio without BFQ: io.weight" "$(cat "$R/$ctr_rel/io.weight")" "default 4950"
: > "$R/$ctr_rel/io.weight"; echo "default 100" > "$R/$ctr_rel/io.bfq.weight"
HOOK_POLICY=$R/p.toml LAYOUT=v2 run_hook "$R" "$R/state" <<<"$CT"
check "v2 blkio with BFQ: io.bfq.weight" "$(cat "$R/$ctr_rel/io.bfq.weight")" 500
check "v2 blkio with BFQ: io.weight untouched" "$(cat "$R/$ctr_rel/io.weight")" ""

# systemd cgroupsPath with an empty scope prefix: "-<name>.scope" (runc getUnitName)
R=$(scratch); mk_v1_dir "$R" "$slice/-$cid.scope"; mkdir -p "$R/proc/2529"; : > "$R/proc/2529/oom_score_adj"
run_hook "$R" "$R/state" < <(jq -c --arg p "kubepods-besteffort-pod$uid.slice::$cid" '.spec.cgroupsPath=$p' <<<"$CT")
check "systemd empty prefix: cpu.shares in -<id>.scope" "$(cat "$R/cpu/$slice/-$cid.scope/cpu.shares")" 2
check "systemd empty prefix: nothing failed" "$(jq_get "$OUT" '.metadata.failed // "none"')" none

# pod knobs for a sandbox without a pod cgroup: refused, never written at the hierarchy root
R=$(scratch); mk_v1_dir "$R" "$sid"; echo 0 > "$R/cpu/cpu.idle"
printf 'version = 1\n[settings]\ndefault_class = "P"\n[classes.P]\nfail = "closed"\n[classes.P.pod]\ncpu_idle = 1\n' > "$R/p.toml"
for path in "/$sid" "-.slice:cri-containerd:$sid"; do
  HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" < <(jq -c --arg p "$path" '.spec.cgroupsPath=$p' <<<"$SB")
  check "no pod cgroup ($path): root cpu.idle untouched" "$(cat "$R/cpu/cpu.idle")" 0
  check "no pod cgroup ($path): fail-closed exit 1" "$RC" 1
  check_contains "no pod cgroup ($path): clear message" "$(jq_get "$OUT" .error)" "pod:cpu_idle: cgroupsPath \"$path\""
  check_contains "no pod cgroup ($path): never at the root" "$(jq_get "$OUT" .error)" "pod knobs are never written there"
done

# pod knobs for a sandbox whose parent is not a pod's own cgroup (issue 19 §2): containerd's
# "/k8s.io/<id>" (an empty CgroupParent: crictl, kubelet --cgroups-per-qos=false) and an explicit
# "system.slice": other workloads share it, so a 100-millicore pod quota there would cap them all.
# Refused with the reason, the shared cgroup untouched, in v0.1 and native NRI alike.
for path in "/k8s.io/$sid" "system.slice:cri-containerd:$sid"; do
  case $path in /*) par=k8s.io ;; *) par=system.slice ;; esac
  R=$(scratch); mk_v1_dir "$R" "$par"; echo -1 > "$R/cpu/$par/cpu.cfs_quota_us"
  printf 'version = 1\n[settings]\ndefault_class = "P"\n[classes.P.pod]\ncpu_quota_us = 10000\n' > "$R/p.toml"
  HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" < <(jq -c --arg p "$path" '.spec.cgroupsPath=$p' <<<"$SB")
  check "shared parent ($path): its cpu.cfs_quota_us untouched" "$(cat "$R/cpu/$par/cpu.cfs_quota_us")" -1
  check "shared parent ($path): fail-open exit 0" "$RC" 0
  check_contains "shared parent ($path): the Result says why" "$(jq_get "$OUT" .metadata.failed)" \
    "pod:cpu_quota_us: cgroupsPath \"$path\": its parent $par is not a pod's own cgroup"
  check "shared parent ($path): no write" "$(jq_get "$OUT" '.writes|length')" 0
  OUT=$(jq -nc --arg sid "$sid" --arg p "$path" '{event: "RunPodSandbox", runtime: {name: "containerd", version: "1.7.24"},
        pod: {id: $sid, name: "p", uid: "u", namespace: "default", linux: {cgroups_path: $p}}}' |
      "$BIN" nri-eval --policy "$R/p.toml" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$R/proc" --state-dir "$R/state" \
        --cache-dir "" --event-log "" --metrics-file "" 2>/dev/null)
  check "shared parent ($path), native RunPodSandbox: its cpu.cfs_quota_us untouched" "$(cat "$R/cpu/$par/cpu.cfs_quota_us")" -1
  check_contains "shared parent ($path), native RunPodSandbox: the answer says why" "$(jq_get "$OUT" .metadata.failed)" \
    "pod:cpu_quota_us: cgroupsPath \"$path\": its parent $par is not a pod's own cgroup"
done
# a kubelet pod cgroup of either driver still gets them
R=$(scratch); mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$pod_rel/$sid"
printf 'version = 1\n[settings]\ndefault_class = "P"\n[classes.P.pod]\ncpu_quota_us = 10000\n' > "$R/p.toml"
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$SB"
check "pod<uid> parent: pod cpu.cfs_quota_us written" "$(cat "$R/cpu/$pod_rel/cpu.cfs_quota_us")" 10000

# ==== issue 9 §2: fail-closed means closed ==================================================
R=$(scratch)
pol "$R/p.toml" 'cpu_shares = 2\ncpu_qos_level = -1\noom_score_adj = 1000\n' 'fail = "closed"\n'
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "fail-closed, no container cgroup: exit 1" "$RC" 1
check_contains "fail-closed, no container cgroup: error" "$(jq_get "$OUT" .error)" "cpu.shares=2 (cgroup cpu/$ctr_rel does not exist)"
mk_v1_dir "$R" "$ctr_rel"
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "fail-closed, no process: exit 1" "$RC" 1
check_contains "fail-closed, no process: error" "$(jq_get "$OUT" .error)" "oom_score_adj=1000 (process 2529 does not exist)"
mkdir -p "$R/proc/2529"; : > "$R/proc/2529/oom_score_adj"
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "fail-closed, only a knob file the kernel lacks: exit 0" "$RC" 0
check_contains "fail-closed, knob file absent: skipped, saying why" "$(jq_get "$OUT" .metadata.skipped)" "cpu.qos_level=-1 (kernel does not provide this file)"
pol "$R/p.toml" 'resctrl_group = "BE"\n' 'fail = "closed"\n'
mkdir -p "$R/resctrl"
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "fail-closed, no resctrl group: exit 1" "$RC" 1
check_contains "fail-closed, no resctrl group: error" "$(jq_get "$OUT" .error)" "resctrl group BE does not exist"
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" < <(jq -c 'del(.pid)' <<<"$CT")
check "fail-closed, no pid in the request: exit 1" "$RC" 1
check_contains "fail-closed, no pid in the request: error" "$(jq_get "$OUT" .error)" "resctrl_group: no pid in the request"

# ==== issue 21 §4: declared resctrl groups are created, then joined (scratch resctrl tree) =====
mk_resctrl() { # ROOT CLOSIDS: the kernel's shape (Documentation/arch/x86/resctrl.rst), 20 ways, 2 domains
  mkdir -p "$1/info/L3" "$1/info/MB"
  echo fffff > "$1/info/L3/cbm_mask"; echo 1 > "$1/info/L3/min_cbm_bits"; echo "$2" > "$1/info/L3/num_closids"
  echo 10 > "$1/info/MB/bandwidth_gran"; echo 10 > "$1/info/MB/min_bandwidth"; echo "$2" > "$1/info/MB/num_closids"
  printf '    L3:0=fffff;1=fffff\n    MB:0=100;1=100\n' > "$1/schemata"; : > "$1/tasks"
}
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"; mkdir -p "$R/proc/2529"; : > "$R/proc/2529/oom_score_adj"
pol "$R/p.toml" 'resctrl_group = "BE"\n[resctrl.BE]\nl3_percent = 30\nmb_percent = 100\n' 'fail = "closed"\n'
mkdir -p "$R/resctrl"   # no schemata: resctrl is not mounted here
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "declared resctrl group, no resctrl mount: exit 0 (skipped, not failed)" "$RC" 0
check_contains "declared resctrl group, no resctrl mount: skipped with the reason" "$(jq_get "$OUT" .metadata.skipped)" "resctrl is not mounted at $R/resctrl"
check "declared resctrl group, no resctrl mount: nothing made" "$(ls "$R/resctrl")" ""
mk_resctrl "$R/resctrl" 4
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check "declared resctrl group: exit 0" "$RC" 0
check "declared resctrl group: created with koordlet BE's schemata" "$(cat "$R/resctrl/BE/schemata")" "$(printf 'L3:0=3f;1=3f\nMB:0=100;1=100')"
check "declared resctrl group: the container's pid joined it" "$(cat "$R/resctrl/BE/tasks")" 2529
check_contains "declared resctrl group: applied" "$(jq_get "$OUT" .metadata.applied)" "tasks=2529"
check_contains "declared resctrl group: the write says it was created" "$(wnote BE/tasks)" "resctrl group BE created; L3 30% of 20 ways"
check "declared resctrl group: remembered in the state dir" "$(cat "$R/state/resctrl-groups")" BE
HOOK_POLICY=$R/p.toml run_hook "$R" "$R/state" <<<"$CT"
check_contains "declared resctrl group, again: in force, not made twice" "$(wnote BE/tasks)" "resctrl group BE in force (made by nri-qos)"
# reconcile: a group nri-qos made and no class uses any more goes once empty; others stay
pol "$R/p3.toml" 'cpu_shares = 2\n'
mkdir "$R/resctrl/foreign"; : > "$R/resctrl/foreign/tasks"
rec() { "$BIN" reconcile --policy "$1" --cgroup-root "$R" --proc-root "$R/proc" --resctrl-root "$R/resctrl" --state-dir "$R/state" \
          --cache-dir "" --cgroup-layout v1 --metrics-file "" --event-log "" 2>/dev/null; }
REC=$(rec "$R/p.toml")
check "reconcile: a group a class still uses stays" "$([ -d "$R/resctrl/BE" ] && echo kept)" kept
REC=$(rec "$R/p3.toml")
check_contains "reconcile: unused group with tasks kept, said" "$REC" "kept     resctrl group BE: no class uses it, but it holds 1 task(s)"
: > "$R/resctrl/BE/tasks"
REC=$(rec "$R/p3.toml")
check_contains "reconcile: unused empty group nri-qos made removed" "$REC" "removed  resctrl group BE: made by nri-qos, no class uses it, no tasks"
check "reconcile: removed, foreign group untouched" "$([ -d "$R/resctrl/BE" ] && echo BE) $([ -d "$R/resctrl/foreign" ] && echo foreign)" " foreign"
check "reconcile: dropped from the state" "$(cat "$R/state/resctrl-groups")" ""
rm -r "$R/resctrl/foreign"
# out of CLOSIDs (3 groups + the default use all 4): a failure with the reason, nothing half made
mkdir "$R/resctrl/g1" "$R/resctrl/g2" "$R/resctrl/g3"
pol "$R/p2.toml" 'resctrl_group = "LS"\n[resctrl.LS]\nl3_percent = 100\n' 'fail = "closed"\n'
HOOK_POLICY=$R/p2.toml run_hook "$R" "$R/state" <<<"$CT"
check "no free CLOSID: fail-closed exit 1" "$RC" 1
check_contains "no free CLOSID: the reason" "$(jq_get "$OUT" .error)" "no free CLOSID (4 groups incl. the default use all num_closids 4): not created"
check "no free CLOSID: no group made" "$([ -e "$R/resctrl/LS" ] && echo made || echo none)" none
# native NRI CreateContainer: the group exists before the answer that names it (rdt_class)
NCT=$(cat "$FIX/requests/nri-events/create-container.json")
check "nri CreateContainer fixture" "$(jq_get "$NCT" .event)" CreateContainer
{
  rmdir "$R/resctrl/g1" "$R/resctrl/g2" "$R/resctrl/g3"
  OUT=$("$BIN" nri-eval --policy "$R/p.toml" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$R/proc" --resctrl-root "$R/resctrl" \
        --state-dir "$R/state" --cache-dir "" <<<"$NCT" 2>"$R/stderr")
  check "nri CreateContainer: rdt_class in the adjustment" "$(jq_get "$OUT" .adjustment.linux.resources.rdt_class.value)" BE
  check "nri CreateContainer: group created before the answer" "$(cat "$R/resctrl/BE/schemata" 2>&1)" "$(printf 'L3:0=3f;1=3f\nMB:0=100;1=100')"
}

# the self-imposed deadline answers with the class's fail mode (a write held up by strace)
if command -v strace >/dev/null; then
  R=$(scratch); mk_v1_dir "$R" "$ctr_rel"; mkdir -p "$R/proc/2529"; : > "$R/proc/2529/oom_score_adj"
  slow() { # MODE POLICY INPUT-FILE: the write to the container's cpu.shares takes 1.5 s
    OUT=$(strace -qq -f -o /dev/null -P "$R/cpu/$ctr_rel/cpu.shares" -e trace=write -e inject=write:delay_enter=1500000 \
      "$BIN" "$1" --policy "$2" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$R/proc" --resctrl-root "$R/resctrl" \
      --state-dir "$R/state" --cache-dir "" --deadline-ms 300 --event-log "$R/rec/events.log" --metrics-file "$R/rec/m.prom" \
      < "$3" 2>"$R/stderr")
    RC=$?
  }
  # the record the deadline handler wrote: the class stage's, with the same fail mode as the answer
  deadline_record() { # NAME OUTCOME MESSAGE-PART: the event log's last line, stderr and the pending count
    # Under qemu-user (tests/emulation.sh) strace delays qemu's host write, and qemu hands the
    # guest its SIGALRM at a later point of the event than the kernel does natively: the answer
    # is the deadline's (checked), but no record was written in the first run (qemu-x86_64 and
    # qemu-aarch64 7.2 alike). Not sorted out yet (docs/aarch64.md): said, not asserted, there.
    if [ "$QEMU_USER" = 1 ]; then
      skip "$1: the deadline's record under qemu-user (strace-delayed host write; docs/aarch64.md, open)"; return
    fi
    local l; l=$(tail -n 1 "$R/rec/events.log" 2>/dev/null)
    check "$1: event log record" "$(jq -r '[.event, .class, .outcome, .duration_us, .level, .policy] | join(" ")' <<<"$l" 2>&1)" \
      "create X $2 300000 warn file"
    check_contains "$1: event log message" "$(jq -r .message <<<"$l" 2>&1)" "$3"
    check_contains "$1: stderr record" "$(cat "$R/stderr")" "id=$(jq -r .id "$R/ct.json" | cut -c1-12) class=X outcome=$2 duration_us=300000 policy=file msg="
    check "$1: pending count" "$(tail -n 1 "$R/rec/.m.prom.pending" 2>&1)" "$(printf 'E\tcreate\tX\t%s\t300000' "$2")"
  }
  jq -c . <<<"$CT" > "$R/ct.json"
  pol "$R/closed.toml" 'cpu_shares = 2\n' 'fail = "closed"\n'
  slow invoke "$R/closed.toml" "$R/ct.json"
  check "deadline, fail-closed class: exit 1" "$RC" 1
  check "deadline, fail-closed class: error" "$(jq_get "$OUT" .error)" \
    "nri-qos: deadline exceeded after 300 ms (class X): fail-closed, container refused; knobs may be partly applied"
  check "deadline, fail-closed class: class in metadata" "$(jq_get "$OUT" .metadata.class)" X
  deadline_record "deadline, fail-closed class" refused "deadline exceeded: fail-closed, container refused"
  pol "$R/open.toml" 'cpu_shares = 2\n'
  slow invoke "$R/open.toml" "$R/ct.json"
  check "deadline, fail-open class: exit 0" "$RC" 0
  check "deadline, fail-open class: error empty" "$(jq_get "$OUT" .error)" ""
  check_contains "deadline, fail-open class: warning" "$(jq_get "$OUT" .metadata.warning)" "deadline exceeded"
  deadline_record "deadline, fail-open class" error "deadline exceeded: nri-qos gave up (fail-open)"
  jq -cn --arg p "/$ctr_rel" '{event: "StartContainer", runtime: {name: "containerd", version: "1.7.24"},
    pod: {id: "p1", name: "web", namespace: "prod"},
    container: {id: "c1", pod_sandbox_id: "p1", name: "app", pid: 2529, linux: {cgroups_path: $p}}}' > "$R/ev.json"
  pol "$R/closed-raw.toml" 'raw = [{ file = "cpu.shares", value = "2" }]\n' 'fail = "closed"\n'
  slow nri-eval "$R/closed-raw.toml" "$R/ev.json"
  check "deadline, nri-eval fail-closed: exit 0" "$RC" 0
  check_contains "deadline, nri-eval fail-closed: error" "$(jq_get "$OUT" .error)" "deadline exceeded after 300 ms (class X): fail-closed"
else
  skip "deadline with a slow write: strace missing"
fi

# the sandbox memo's class: a container classified differently says so, and why
R=$(scratch); S=$R/state; mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$ctr_rel"
cat > "$R/p.toml" <<'POL'
version = 1
[settings]
default_class = "LS"
[[rules]]
name = "sidecar"
class = "SIDE"
match.kind = "container"
match.container_name = "cgfs-ctr"
[[rules]]
name = "be"
class = "BE"
match.annotations = { "openfuyao.com/qos-level" = "BE" }
[classes.LS]
[classes.SIDE]
[classes.BE.pod]
cpu_shares = 2
POL
HOOK_POLICY=$R/p.toml run_hook "$R" "$S" < <(jq -c '.spec.annotations["openfuyao.com/qos-level"]="BE"' <<<"$SB")
check "memo mismatch: sandbox BE" "$(jq_get "$OUT" .metadata.class)" BE
HOOK_POLICY=$R/p.toml run_hook "$R" "$S" <<<"$NOALLOW"
check "memo mismatch: a container rule gives SIDE" "$(jq_get "$OUT" .metadata.class)" SIDE
check "memo mismatch: pod_class in the Result" "$(jq_get "$OUT" .metadata.pod_class)" BE
check_contains "memo mismatch: says a container rule chose it" "$(jq_get "$OUT" .metadata.pod_class_note)" "a rule for containers chose SIDE"
printf 'version = 1\n[settings]\ndefault_class = "LS"\n[[rules]]\nname = "now-ls"\nclass = "LS"\nmatch.annotations = { "openfuyao.com/qos-level" = "BE" }\n[classes.LS]\n[classes.BE.pod]\ncpu_shares = 2\n' > "$R/p.toml"
HOOK_POLICY=$R/p.toml run_hook "$R" "$S" <<<"$NOALLOW"
check "memo mismatch after a policy edit: container LS" "$(jq_get "$OUT" .metadata.class)" LS
check "memo mismatch after a policy edit: pod_class" "$(jq_get "$OUT" .metadata.pod_class)" BE
check_contains "memo mismatch after a policy edit: says the policy changed" "$(jq_get "$OUT" .metadata.pod_class_note)" "the policy changed since the sandbox event"
run_hook "$R" "$S" <<<"$NOALLOW"
check "memo match: no pod_class note" "$(jq_get "$OUT" '.metadata.pod_class // "none"')" none

# --- a symlink inside the cgroup tree is never followed ----------------------------------------
R=$(scratch); OUTSIDE=$(scratch)
mkdir -p "$R/cpu/kubepods/burstable" "$OUTSIDE/pod0e2e0000-6edd-4127-830b-934cae53b469/$(jq -r .id <<<"$CT")"
: > "$OUTSIDE/pod0e2e0000-6edd-4127-830b-934cae53b469/$(jq -r .id <<<"$CT")/cpu.shares"
ln -s "$OUTSIDE/pod0e2e0000-6edd-4127-830b-934cae53b469" "$R/cpu/kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469"
run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
check "symlink: outside file untouched" "$(cat "$OUTSIDE"/pod*/*/cpu.shares)" ""
check_contains "symlink: refused and reported" "$(jq_get "$OUT" .metadata.failed)" "cpu.shares=2 (path escapes its root or crosses a symlink)"

# --- times are UTC: no process reads the time zone database -----------------------------------
# glibc's gmtime_r runs tzset, which opens /etc/localtime in every invocation (6 syscalls and a
# parse per event); record.cpp rfc3339_utc computes the UTC date itself.
if command -v strace >/dev/null; then
  R=$(scratch)
  strace -f -qq -e trace=open,openat -o "$R/trace" "$BIN" invoke --policy "$POLICY" --cgroup-root "$R" --cgroup-layout v1 \
    --proc-root "$R/proc" --state-dir "$R/state" --cache-dir "" --event-log "$R/events.log" --metrics-file "$R/m.prom" <<<"$CT" >/dev/null 2>&1
  check "utc times: the invocation wrote its event record" "$(grep -c '"time":"20' "$R/events.log" 2>/dev/null)" 1
  check "utc times: no time zone file opened" "$(grep -c 'localtime\|zoneinfo' "$R/trace")" 0
else
  skip "utc times: strace missing"
fi

# --- records never block the answer (issue 19 §2) ---------------------------------------------
# A request larger than the first read buffer (64 KiB; main.cpp read_stdin doubles it and the
# arena takes back the unused end), arriving on a pipe in two pieces: read whole, the same Result
# as the request without the padding annotation, and the record names the request's container.
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"
run_hook "$R" "$R/state" <<<"$CT"
small=$OUT small_ctr=$(grep -o ' container=[^ ]*' "$R/stderr" | head -1)
BIG=$(jq -c --arg p "$(head -c 100000 /dev/zero | tr '\0' a)" '.spec.annotations["example.com/pad"]=$p' <<<"$CT")
R=$(scratch); mk_v1_dir "$R" "$ctr_rel"
run_hook "$R" "$R/state" < <(printf '%s' "${BIG:0:70000}"; sleep 0.2; printf '%s\n' "${BIG:70000}")
check "100 KiB request in two pieces: exit 0" "$RC" 0
check "100 KiB request in two pieces: read whole (same Result as without the padding)" "$OUT" "$small"
check "100 KiB request in two pieces: the record names the container" "$(grep -o ' container=[^ ]*' "$R/stderr" | head -1)" "${small_ctr:-none}"

# A FIFO nobody reads as the event log and as the metrics file (before: the event log's open
# blocked for good, SIGALRM blocked meanwhile: the invocation never answered). Now both are
# refused at once with a one-line reason, the Result is the normal one, well within the deadline.
R=$(scratch); mkdir -p "$R/rec"; mk_v1_dir "$R" "$ctr_rel"
mkfifo "$R/rec/events.fifo" "$R/rec/m.prom"
t0=$(date +%s%N)
# (DEADLINE_MS: 1000, larger under qemu-user: tests/emulation.sh)
OUT=$(timeout $((5 * DEADLINE_MS / 1000)) "$BIN" invoke --policy "$POLICY" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$R/proc" \
      --state-dir "$R/state" --cache-dir "" --deadline-ms "$DEADLINE_MS" --event-log "$R/rec/events.fifo" --metrics-file "$R/rec/m.prom" \
      <<<"$CT" 2>"$R/stderr")
RC=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "fifo records: answered, exit 0 (124: hung until timeout)" "$RC" 0
valid_result "fifo records" "$OUT"
check "fifo records: the normal Result (class)" "$(jq_get "$OUT" .metadata.class)" LS
check "fifo records: answered well within --deadline-ms $DEADLINE_MS" "$([ "$ms" -lt $((DEADLINE_MS * 9 / 10)) ] && echo yes || echo "no ($ms ms)")" yes
check_contains "fifo records: event log refused, one line" "$(cat "$R/stderr")" "event log $R/rec/events.fifo: not a regular file (a FIFO without a reader)"
check_contains "fifo records: metrics refused, in the record" "$(cat "$R/stderr")" "metrics: $R/rec/m.prom: not a regular file (a FIFO); this event is not counted"
check "fifo records: the FIFO left in place" "$(stat -c %F "$R/rec/m.prom")" fifo

finish

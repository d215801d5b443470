#!/bin/bash
# Binary-level tests of `nri-qos invoke` / `explain` / `check`: the real captured requests of
# containerd 1.6.20 and 1.7.24 (+ v0.1 adapter) through the built binary, against scratch cgroup
# v1 and v2 trees; asserts the exact files and values written.
. "$(dirname "$0")/lib.sh"

[ -x "$BIN" ] || { fail "binary $BIN missing (run make)"; finish; }
command -v jq >/dev/null || { fail "jq missing (scripts/deps.sh test)"; finish; }

# run_hook ROOT STATE [extra args...] < request   → stdout in $OUT, exit code in $RC
run_hook() {
  local root=$1 state=$2; shift 2
  OUT=$("$BIN" invoke --policy "$POLICY" --cgroup-root "$root" --cgroup-layout "${LAYOUT:-v1}" \
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
  check_contains "$ver container create: memory.high absent on v1" "$(jq_get "$OUT" .metadata.skipped)" "memory.high=60397977 (not present)"
  check "$ver container create: cpu.shares untouched" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" ""
  run_hook "$R" "$S" < "$D/container-delete.json"
  check "$ver container delete: nothing written" "$(jq_get "$OUT" '.writes|length')" 0
  run_hook "$R" "$S" < "$D/sandbox-delete.json"
  valid_result "$ver sandbox delete" "$OUT"
  check "$ver sandbox delete: memo removed" "$(ls "$S")" ""

  # --- koordinator.sh/qosClass: BE ------------------------------------------------------------
  R=$(scratch); S=$R/state
  mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$ctr_rel"; mkdir -p "$R/proc/$ctr_pid"; : > "$R/proc/$ctr_pid/oom_score_adj"
  run_hook "$R" "$S" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$SB")
  check "$ver BE sandbox: class" "$(jq_get "$OUT" .metadata.class)" BE
  check "$ver BE sandbox: pod cpu.idle" "$(cat "$R/cpu/$pod_rel/cpu.idle")" 1
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
check "v2 BE sandbox: pod cpu.idle" "$(cat "$R/$pod_rel/cpu.idle")" 1
LAYOUT=v2 run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
check "v2 BE: cpu.weight (shares 2)" "$(cat "$R/$ctr_rel/cpu.weight")" 1

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

# --- broken policy: fail-open, error with file:line -------------------------------------------
printf 'version = 1\n[settings]\ndefault_class = "C"\n[classes.C.container]\ncpu_shares = 1\n' > "$R/bad.toml"
OUT=$("$BIN" invoke --policy "$R/bad.toml" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" <<<"$CT" 2>/dev/null); RC=$?
valid_result "broken policy" "$OUT"
check "broken policy: fail-open exit 0" "$RC" 0
check "broken policy: error in metadata" "$(jq_get "$OUT" .metadata.error)" "policy: $R/bad.toml:5: classes.C.container.cpu_shares: 1 out of range [2, 262144] or \"N%\" (fail-open: container not adjusted)"
CHK=$("$BIN" check "$R/bad.toml" 2>&1); RC=$?
check "check: broken policy exit 1" "$RC" 1
check "check: one line with file:line" "$CHK" "nri-qos: $R/bad.toml:5: classes.C.container.cpu_shares: 1 out of range [2, 262144] or \"N%\""
check "check: bundled policy" "$("$BIN" check "$POLICY")" "$POLICY: OK (19 rules, 5 classes, default class LS)"

# --- bad request with settings.fail = "closed" -------------------------------------------------
printf 'version = 1\n[settings]\ndefault_class = "C"\nfail = "closed"\n[classes.C]\n' > "$R/closed.toml"
OUT=$(echo '{"version":"0.1","state":"create","id":"a/b"}' | "$BIN" invoke --policy "$R/closed.toml" --cgroup-root "$R" --state-dir "$R/state" --cache-dir "" 2>/dev/null); RC=$?
check "bad request, fail closed: exit 1" "$RC" 1
check "bad request, fail closed: error" "$(jq_get "$OUT" .error)" "nri-qos: bad request: /id: id may contain only [A-Za-z0-9_.-]"

# --- missing cgroup directory: skipped, not fatal -------------------------------------------------
R=$(scratch)
run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
check "missing cgroup: exit 0" "$RC" 0
check_contains "missing cgroup: reported as skipped" "$(jq_get "$OUT" .metadata.skipped)" "cpu.shares=2 (not present)"

# --- a symlink inside the cgroup tree is never followed ----------------------------------------
R=$(scratch); OUTSIDE=$(scratch)
mkdir -p "$R/cpu/kubepods/burstable" "$OUTSIDE/pod0e2e0000-6edd-4127-830b-934cae53b469/$(jq -r .id <<<"$CT")"
: > "$OUTSIDE/pod0e2e0000-6edd-4127-830b-934cae53b469/$(jq -r .id <<<"$CT")/cpu.shares"
ln -s "$OUTSIDE/pod0e2e0000-6edd-4127-830b-934cae53b469" "$R/cpu/kubepods/burstable/pod0e2e0000-6edd-4127-830b-934cae53b469"
run_hook "$R" "$R/state" < <(jq -c '.labels["koordinator.sh/qosClass"]="BE"' <<<"$CT")
check "symlink: outside file untouched" "$(cat "$OUTSIDE"/pod*/*/cpu.shares)" ""
check_contains "symlink: refused and reported" "$(jq_get "$OUT" .metadata.failed)" "cpu.shares=2 (path escapes its root or crosses a symlink)"

finish

#!/bin/bash
# The operator's view (issue #11), through the real binary on scratch cgroup v1 trees:
#   - every event leaves one record: stderr (logfmt) and the JSON-lines event log;
#   - the node_exporter textfile, parsed with Debian's python3-prometheus-client (the text-format
#     parser Prometheus' own Python client uses), has exact totals after hundreds of concurrent
#     invocations, and so has the event log (no torn, no lost line, also across rotations);
#   - the last request per container: stored 0600, removed with the container / sandbox;
#   - status (drift marked), reconcile (restores, reports, drops gone containers), explain --container;
#   - the policy in force: nri_qos_policy_info{source} is builtin without a policy file, file, then
#     last-good while the file is broken, with nri_qos_policy_errors_total counting every such event
#     and every record (stderr, event log) carrying policy / policy_error; reconcile and status agree.
# Prints PASS/FAIL/SKIP lines; exit 1 when anything failed.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
F16=$FIX/requests/containerd-1.6.20
N=${NRI_QOS_OPS_N:-300}

# --- status on cgroup v2: a cpu.weight on another formula's scale (issue #24; no prometheus needed) ---
# runc 1.1 (linear) started the container: its own cpu.weight 20 of shares 512 made nri-qos write
# the class's 256 as 10. After a runc upgrade (the probe now says runc 1.3.3: log-quadratic) that
# weight is on the old scale: status flags it, reconcile re-reads the runtime and writes 35.
W=$(scratch); WR=$W/cg
w_ctr=$(jq -r '.spec.cgroupsPath' "$F16/container-create.json" | sed 's|^/||')
mk_v2_dir "$WR" "${w_ctr%/*}"; mk_v2_dir "$WR" "$w_ctr"; echo 20 > "$WR/$w_ctr/cpu.weight"
printf 'version = 1\n[settings]\ndefault_class = "B"\n[classes.B.container]\ncpu_shares = 256\n' > "$W/auto.toml"
printf '#!/bin/sh\necho "runc version 1.1.5"\n' > "$W/runc-1.1"; printf '#!/bin/sh\necho "runc version 1.3.3"\n' > "$W/runc-1.3"; chmod +x "$W"/runc-*
NRI_QOS_RUNTIME_BINARY=none "$BIN" invoke --policy "$W/auto.toml" --cgroup-root "$WR" --cgroup-layout v2 --state-dir "$W/state" --cache-dir "" \
  --metrics-file "" --event-log "" < "$F16/container-create.json" >/dev/null 2>&1
check "v2 weight: written on runc 1.1's scale" "$(cat "$WR/$w_ctr/cpu.weight")" 10
wstatus() { "$BIN" status --state-dir "$W/state" --cache-dir "" --cgroup-layout v2 "$@"; }
NRI_QOS_RUNTIME_BINARY=$W/runc-1.1 "$BIN" reconcile --state-dir "$W/state" --cache-dir "" --cgroup-layout v2 --metrics-file "" --event-log "" >/dev/null 2>&1
WS=$(wstatus)
check "status v2: runc 1.1 probed, the weight in force" "$(grep 'cpu.weight  *want' <<<"$WS" | tr -s ' ' | sed 's/ *$//')" " cpu.weight want 10 kernel 10"
check_contains "status v2: the formula in force and why" "$WS" "cpu.weight formula in force: linear: runc 1.1.5 ($W/runc-1.1 --version"
printf '{"v":1,"binary":"%s","version":"runc 1.3.3","formula":"log-quadratic","note":""}\n' "$W/runc-1.3" > "$W/state/runc-formula"
WS=$(wstatus)
check "status v2: after the runc upgrade, the old-scale weight is flagged" "$(grep 'cpu.weight  *want' <<<"$WS" | tr -s ' ')" \
  " cpu.weight want 35 kernel 10 DRIFT (linear of shares 256: another formula than the one in force)"
check "status v2 json: scale of the drifted weight" "$(wstatus --format json | jq -r '.entries[0].knobs[0] | [.drift, .scale] | join(" ")')" "true linear"
WREC=$(NRI_QOS_RUNTIME_BINARY=$W/runc-1.3 "$BIN" reconcile --state-dir "$W/state" --cache-dir "" --cgroup-layout v2 --metrics-file "" --event-log "" 2>/dev/null)
check_contains "reconcile v2: re-reads the runtime first" "$WREC" "runtime  runc 1.3.3 ($W/runc-1.3 --version): log-quadratic cpu.weight formula"
check "reconcile v2: the weight of the formula in force" "$(cat "$WR/$w_ctr/cpu.weight")" 35

if ! $PY -c 'import prometheus_client' 2>/dev/null; then
  skip "ops: python3-prometheus-client not installed (scripts/deps.sh test)"; finish
fi

S=${OPS_S:-$(scratch)}
R=$S/cg; ST=$S/state; PROM=$S/textfile/nri_qos.prom; LOG=$S/log/events.log
sid=$(jq -r .id "$F16/sandbox-create.json")
ctr_rel=$(jq -r '.spec.cgroupsPath' "$F16/container-create.json" | sed 's|^/||')
pod_rel=${ctr_rel%/*}
mk_v1_dir "$R" "$pod_rel"; mk_v1_dir "$R" "$ctr_rel"; mk_v1_dir "$R" "$pod_rel/$sid"
mkdir -p "$S/proc/2529" && echo 0 > "$S/proc/2529/oom_score_adj"
# the bundled policy + a small event-log bound, so that rotation happens under concurrency
{ cat "$POLICY"; } | sed 's/^cpu_weight_formula = .*/&\nevent_log_max_bytes = 65536/' > "$S/policy.toml"
hook() { "$BIN" invoke --policy "$S/policy.toml" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$S/proc" --state-dir "$ST" \
           --cache-dir "$S/cache" --metrics-file "$PROM" --event-log "$LOG" "$@"; }
BE() { jq -c '.labels["koordinator.sh/qosClass"]="BE"' "$1"; }

# --- one event, one record -----------------------------------------------------------------
BE "$F16/sandbox-create.json" | hook >/dev/null 2>"$S/err0"
BE "$F16/container-create.json" | hook >"$S/out1" 2>"$S/err1"
check "record: one stderr line per event (logfmt)" "$(grep -c '^nri-qos: time=' "$S/err1")" 1
check_contains "record: stderr names pod, container, class, rule, outcome" "$(cat "$S/err1")" \
  "ns=default pod=cgfs-pod container=cgfs-ctr id=f9159d083de2 class=BE rule=koordinator-be outcome=ok"
check "record: event log has the sandbox and the container" "$(jq -r '[.event, .class, (.sandbox // false)] | @tsv' "$LOG" | tr '\t\n' ' ')" \
  "create BE true create BE false "
check "record: applied knobs and duration in the log" "$(tail -1 "$LOG" | jq -r '(.applied|test("cpu.shares=2")) and (.duration_us > 0)')" true
check "last request: 0600" "$(stat -c %a "$ST/last/$sid/$(jq -r .id "$F16/container-create.json").json")" 600
check "last request: keeps the request" "$(jq -r '.request.id == .id and .options.policy != ""' "$ST/last/$sid/"f9159d*.json)" true

# --- status / reconcile: containerd puts cpu.shares back (UpdateContainerResources in v0.1) ---
check "kernel: BE cpu.shares" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" 2
echo 512 > "$R/cpu/$ctr_rel/cpu.shares"
STAT=$("$BIN" status --state-dir "$ST" --cache-dir "" --cgroup-layout v1)
check_contains "status: container row" "$STAT" "default/cgfs-pod"
check "status: drift marked" "$(grep 'cpu.shares' <<<"$STAT" | tr -s ' ')" " cpu.shares want 2 kernel 512 DRIFT"
STJ=$("$BIN" status --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --format json)
check "status json: drifted knob" "$(jq -r '[.entries[].knobs[] | select(.drift) | "\(.knob) \(.value) \(.kernel)"] | join(",")' <<<"$STJ")" "cpu_shares 2 512"
check "status json: Result field names" "$(jq -r '.entries[] | select(.sandbox|not) | [.class, .rule, .last_event] | join(" ")' <<<"$STJ")" "BE koordinator-be create"
DRY=$("$BIN" reconcile --dry-run --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --metrics-file "$PROM" --event-log "$LOG")
check "reconcile --dry-run: writes nothing" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" 512
check_contains "reconcile --dry-run: reports" "$DRY" "drift    default/cgfs-pod/cgfs-ctr (f9159d083de2) class BE: cpu.shares 512->2"
# the runtime-event metrics before the pass: an old last-event time (as if the runtime had stopped
# calling the hook an hour ago), the event counts and the latency histogram
sed -i "s/^T\t.*/T\t1000/" "$S/textfile/.nri_qos.prom.state"
prom() { $PY - "$PROM" "$@" <<'PYEOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
v = {}
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in f.samples:
        if "le" not in s.labels: v[s.name + ("{" + ",".join(f"{k}={s.labels[k]}" for k in sorted(s.labels)) + "}" if s.labels else "")] = s.value
print(" ".join(str(int(v[n])) if n in v else "-" for n in sys.argv[2:]))
PYEOF
}
EV0=$(prom nri_qos_event_duration_seconds_count 'nri_qos_events_total{class=BE,event=create,outcome=ok}')
LOG0=$(stat -c %s "$LOG")
REC=$("$BIN" reconcile --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --metrics-file "$PROM" --event-log "$LOG" 2>"$S/rec.err"); rc=$?
check "reconcile: exit 0" "$rc" 0
# quiet reconcile (issue #25 §4): the drifted container's record only, none for the sandbox in force
check "reconcile: exactly the drift record is written (event log)" "$(tail -c +$((LOG0 + 1)) "$LOG" | jq -r '[.source, .event, .outcome, .drift] | join(" ")')" \
  "reconcile reconcile ok cpu.shares 512->2"
check "reconcile: one journal line, the drift's" "$(grep -c '^nri-qos: time=' "$S/rec.err") $(grep -c 'drift="cpu.shares 512->2"' "$S/rec.err")" "1 1"
check "reconcile: runtime-event metrics untouched (last-event time, latency count, events)" \
  "$(prom nri_qos_last_event_timestamp_seconds nri_qos_event_duration_seconds_count 'nri_qos_events_total{class=BE,event=create,outcome=ok}' 'nri_qos_events_total{class=BE,event=reconcile,outcome=ok}')" "1000 $EV0 -"
check "reconcile: its own metrics (passes, examined, drift found, corrected, failed, policy broken)" \
  "$(prom nri_qos_reconcile_passes_total nri_qos_reconcile_containers_total nri_qos_reconcile_drift_found_total nri_qos_reconcile_corrected_total nri_qos_reconcile_errors_total nri_qos_reconcile_policy_broken nri_qos_reconcile_duration_seconds_count 'nri_qos_drift_corrected_total{knob=cpu_shares}')" \
  "1 2 1 1 0 0 1 1"
check "reconcile: last-pass time set" "$(prom nri_qos_reconcile_last_pass_timestamp_seconds | awk '{print ($1 > 1000000000)}')" 1
check "reconcile: restores cpu.shares" "$(cat "$R/cpu/$ctr_rel/cpu.shares")" 2
check_contains "reconcile: reports the drift it fixed" "$REC" "restored default/cgfs-pod/cgfs-ctr (f9159d083de2) class BE: cpu.shares 512->2"
check_contains "reconcile: summary" "$REC" "reconcile: 2 recorded, 1 in force, 1 restored (1 knobs), 0 gone, 0 failed"
check "reconcile: event recorded" "$(jq -r 'select(.source=="reconcile" and .drift != null) | .drift' "$LOG")" "cpu.shares 512->2"
LOG1=$(stat -c %s "$LOG")
REC2=$("$BIN" reconcile --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --metrics-file "$PROM" --event-log "$LOG" 2>"$S/rec2.err")
check_contains "reconcile: idempotent" "$REC2" "2 in force, 0 restored"
check "reconcile, nothing drifted: zero event-log bytes, no journal line" "$(($(stat -c %s "$LOG") - LOG1)) $(wc -c < "$S/rec2.err")" "0 0"
check "reconcile, nothing drifted: counted as a pass, last-event time still untouched" \
  "$(prom nri_qos_reconcile_passes_total nri_qos_reconcile_drift_found_total nri_qos_last_event_timestamp_seconds nri_qos_event_duration_seconds_count)" "2 1 1000 ${EV0%% *}"

# --- explain --container ------------------------------------------------------------------------
EXP=$("$BIN" explain --container f9159d08 --state-dir "$ST" --cache-dir "" --cgroup-layout v1 2>&1)
check_contains "explain --container: replay header" "$EXP" "replay:   last request of f9159d083de2"
check_contains "explain --container: trace says why a rule did not match" "$EXP" \
  "class SYSTEM): namespace \"default\" not in [kube-system]"
check_contains "explain --container: the matching rule" "$EXP" "MATCH koordinator-be"
"$BIN" explain --container default/cgfs-pod --state-dir "$ST" --cache-dir "" --cgroup-layout v1 >"$S/pod.out" 2>&1; rc=$?
check "explain --container ns/pod: the pod's container is chosen over its sandbox" "$rc $(grep -c '^class:    BE' "$S/pod.out")" "0 1"
EXPJ=$("$BIN" explain --container f9159d08 --format json --state-dir "$ST" --cache-dir "" --cgroup-layout v1 2>/dev/null)
check "explain json: Result field names (metadata.class/rule, writes)" "$(jq -r '[.metadata.class, .metadata.rule, (.writes|length > 0)] | join(" ")' <<<"$EXPJ")" "BE koordinator-be true"
check "explain json: rule trace" "$(jq -r '.trace.rules[-1] | [.rule, .matched] | join(" ")' <<<"$EXPJ")" "koordinator-be true"
LSJ=$(jq -c '.spec.resources.cpu.quota=50000 | .spec.resources.cpu.period=100000' "$F16/container-create.json")
"$BIN" explain --format json --policy "$S/policy.toml" --cgroup-root "$R" --cgroup-layout v1 --state-dir "$ST" --cache-dir "" <<<"$LSJ" >/dev/null
hook <<<"$LSJ" >/dev/null 2>&1
EXPT=$("$BIN" explain --container f9159d08 --state-dir "$ST" --cache-dir "" --cgroup-layout v1 2>&1)
check_contains "explain --container: percentage as a calculation" "$EXPT" \
  "calc:     memory_high = 90% of OCI memory.limit 67108864 = 67108864 × 90 / 100 = 60397977 bytes"
"$BIN" explain --container nosuch --state-dir "$ST" >/dev/null 2>"$S/e.err"; rc=$?
check "explain --container: unknown id → exit 1" "$rc" 1
check_contains "explain --container: unknown id message" "$(cat "$S/e.err")" "no live container or pod \"nosuch\""

# --- removed with the container / the sandbox; reconcile drops gone containers -------------------
hook < "$F16/container-delete.json" >/dev/null 2>&1
check "last request: removed at container delete" "$(ls "$ST/last/$sid")" "$sid.json"
BE "$F16/container-create.json" | hook >/dev/null 2>&1
rmdir "$R/cpu/$ctr_rel" 2>/dev/null || rm -rf "$R/cpu/$ctr_rel"
# --dry-run reports the gone container and writes nothing: its record stays
RECD=$("$BIN" reconcile --dry-run --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --metrics-file "$PROM" --event-log "$LOG" 2>/dev/null)
check_contains "reconcile --dry-run: a gone container is reported" "$RECD" "gone     default/cgfs-pod/cgfs-ctr (f9159d083de2): cgroup no longer exists; would be dropped from the state"
check "reconcile --dry-run: its record is kept" "$(ls "$ST/last/$sid" | sort | tr '\n' ' ')" "$(printf '%s\n' "$sid.json" f9159d083de20134b90778a5c6d8ee69ecb3b500f2ef34976b11b59554b7bc8e.json | sort | tr '\n' ' ')"
REC3=$("$BIN" reconcile --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --metrics-file "$PROM" --event-log "$LOG" 2>/dev/null)
check_contains "reconcile: a gone container is dropped" "$REC3" "gone     default/cgfs-pod/cgfs-ctr (f9159d083de2): cgroup no longer exists"
check "reconcile: its record is gone" "$(ls "$ST/last/$sid")" "$sid.json"
hook < "$F16/sandbox-delete.json" >/dev/null 2>&1
check "last request: sandbox delete removes the pod's records" "$(ls "$ST/last")" ""

# --- hundreds of concurrent invocations: exact totals --------------------------------------------
mk_v1_dir "$R" "$ctr_rel"
rm -f "$PROM" "$S/textfile/.nri_qos.prom.state" "$LOG"*
seq 1 "$N" | xargs -P 64 -I{} sh -c "jq -c --arg id \"c{}\" '.id=\$id | .labels[\"koordinator.sh/qosClass\"]=(if ({} % 3) == 0 then \"LS\" else \"BE\" end)' '$F16/container-create.json' | \
  '$BIN' invoke --policy '$S/policy.toml' --cgroup-root '$R' --cgroup-layout v1 --proc-root '$S/proc' --state-dir '$ST' --cache-dir '$S/cache' \
  --metrics-file '$PROM' --event-log '$LOG' >/dev/null 2>>'$S/par.err'"
# Events cut off by the deadline (likely: 64 at once on this machine) are recorded by the
# deadline handler; their counts are folded in at the next update, e.g. a reconcile pass.
"$BIN" reconcile --state-dir "$S/empty-state" --metrics-file "$PROM" --event-log "" >/dev/null 2>&1
PARSED=$($PY - "$PROM" <<'PYEOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
fam = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
ev = {(s.labels["event"], s.labels["class"], s.labels["outcome"]): s.value for s in fam["nri_qos_events"].samples if s.name == "nri_qos_events_total"}
h = {s.name: s.value for s in fam["nri_qos_event_duration_seconds"].samples if s.name != "nri_qos_event_duration_seconds_bucket"}
inf = [s.value for s in fam["nri_qos_event_duration_seconds"].samples if s.labels.get("le") == "+Inf"][0]
info = [s for s in fam["nri_qos_policy_info"].samples][0]
print(int(sum(v for k, v in ev.items() if k[0] in ("create", "unparsed"))), int(h["nri_qos_event_duration_seconds_count"]), int(inf),
      len(info.labels["sha256"]), info.labels["source"], fam["nri_qos_events"].type, fam["nri_qos_event_duration_seconds"].type)
PYEOF
)
check "metrics: exact totals after $N concurrent invokes (prometheus_client parser)" "$PARSED" "$N $N $N 64 file counter histogram"
check "metrics: policy sha256 is the file's" "$($PY -c "
from prometheus_client.parser import text_string_to_metric_families as t
print([s.labels['sha256'] for f in t(open('$PROM').read()) if f.name=='nri_qos_policy_info' for s in f.samples][0])")" \
  "$(sha256sum "$S/policy.toml" | cut -d' ' -f1)"
lines=$(cat "$LOG" "$LOG.1" "$LOG.2" 2>/dev/null | wc -l)
ids=$(cat "$LOG" "$LOG.1" "$LOG.2" 2>/dev/null | jq -r '.id // "-"' | sort | uniq -c | awk '$2 != "-" && $1 == 1' | wc -l)
unparsed=$(cat "$LOG" "$LOG.1" "$LOG.2" 2>/dev/null | jq -r 'select(.id == null) | .id' | wc -l)
ids=$((ids + unparsed))
bad=$(cat "$LOG" "$LOG.1" "$LOG.2" 2>/dev/null | while IFS= read -r l; do jq -e . >/dev/null 2>&1 <<<"$l" || echo x; done | wc -l)
check "event log: $N concurrent events, one whole JSON line each, across rotations" "$lines $ids $bad" "$N $N 0"
check "event log: rotated and bounded" "$([ -s "$LOG.1" ] && [ "$(stat -c %s "$LOG")" -le $((65536 + 4096)) ] && echo yes)" yes
check "stderr: one record line per concurrent invocation" "$(grep -c '^nri-qos: time=' "$S/par.err")" "$N"
check "metrics file mode 0644" "$(stat -c %a "$PROM")" 644

# --- a broken policy is counted and visible ------------------------------------------------------
# No last good copy of bad.toml: the built-in policy applies, with the error (policy_store.hpp).
printf 'version = 1\n[settings\n' > "$S/bad.toml"
"$BIN" invoke --policy "$S/bad.toml" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$S/proc" --state-dir "$ST" --cache-dir "" \
  --metrics-file "$PROM" --event-log "$LOG" < "$F16/container-create.json" >/dev/null 2>"$S/bad.err"
check "policy broken: nri_qos_policy_errors_total" "$($PY -c "
from prometheus_client.parser import text_string_to_metric_families as t
print(int([s.value for f in t(open('$PROM').read()) if f.name=='nri_qos_policy_errors' for s in f.samples][0]))")" 1
check_contains "policy broken: the stderr record names the built-in policy and the error" "$(grep '^nri-qos: time=' "$S/bad.err")" \
  "level=warn source=invoke event=create ns=default pod=cgfs-pod container=cgfs-ctr id=f9159d083de2 class=DEFAULT rule=default outcome=ok"
check_contains "policy broken: ... policy=builtin policy_error=" "$(grep '^nri-qos: time=' "$S/bad.err")" \
  "policy=builtin policy_error=\"$S/bad.toml:"

# --- nri_qos_policy_info follows the policy in force: builtin, file, last-good ---------------------
BUNDLED_SHA=$(sha256sum "$BUNDLED" | cut -d' ' -f1)
PM=$S/textfile-policy/nri_qos.prom; PL=$S/log-policy/events.log; PS=$S/state-policy
PARGS=(--cgroup-root "$R" --cgroup-layout v1 --proc-root "$S/proc" --state-dir "$PS" --cache-dir "$S/cache" --metrics-file "$PM" --event-log "$PL")
# "<series> <source> <sha256> <errors_total>" of $PM, read with prometheus_client's parser
pinfo() {
  $PY - "$PM" <<'PYEOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
fam = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
info = fam["nri_qos_policy_info"].samples
err = [s.value for s in fam["nri_qos_policy_errors"].samples if s.name == "nri_qos_policy_errors_total"][0]
print(len(info), info[0].labels["source"], info[0].labels["sha256"], int(err))
PYEOF
}
if can_hide_default_policy; then
  # No policy file at all (the binary alone): the built-in policy, which is not an error.
  BE "$F16/container-create.json" | nodefault "$BIN" invoke "${PARGS[@]}" >/dev/null 2>&1
  check "policy_info: no policy file → source=\"builtin\", the bundled policy's sha256, no error" "$(pinfo)" "1 builtin $BUNDLED_SHA 0"
  check "record: policy=builtin" "$(tail -1 "$PL" | jq -r '[.policy, .policy_sha256, .policy_error // "none"] | join(" ")')" "builtin $BUNDLED_SHA none"
else
  skip "policy_info builtin: /etc/nri exists and cannot be hidden (unshare -m)"
fi
cp "$S/policy.toml" "$S/site.toml"
SITE_SHA=$(sha256sum "$S/site.toml" | cut -d' ' -f1)
BE "$F16/container-create.json" | "$BIN" invoke --policy "$S/site.toml" "${PARGS[@]}" >/dev/null 2>&1
E0=$(pinfo | cut -d' ' -f4)
check "policy_info: a valid file → source=\"file\", its sha256" "$(pinfo | cut -d' ' -f1-3)" "1 file $SITE_SHA"
# A typo: the last good copy (saved at the previous event) applies; every event counts an error.
sed -i 's/^cpu_shares = 2 /cpu_sharez = 2 /' "$S/site.toml"
for n in 1 2; do BE "$F16/container-create.json" | "$BIN" invoke --policy "$S/site.toml" "${PARGS[@]}" >"$S/lg.out" 2>"$S/lg.err"; done
check "policy_info: broken file → source=\"last-good\", the copy's sha256, errors_total +2" "$(pinfo)" "1 last-good $SITE_SHA $((E0 + 2))"
check "policy broken: the last good copy classified (Result)" "$(jq -r '[.metadata.policy, .metadata.class] | join(" ")' "$S/lg.out")" "last-good BE"
check "record: every event carries the breakage (event log)" \
  "$(tail -2 "$PL" | jq -r '[.level, .policy, (.policy_error | test("^'"$S"'/site.toml:[0-9]+: .*cpu_sharez.*applying the last good copy"))] | join(" ")' | sort -u)" "warn last-good true"
check_contains "record: ... and on stderr" "$(grep '^nri-qos: time=' "$S/lg.err")" "policy=last-good policy_error=\"$S/site.toml:"
# reconcile restores what the hook applies (the copy) and says the file is broken.
echo 512 > "$R/cpu/$ctr_rel/cpu.shares"
PREC=$("$BIN" reconcile --state-dir "$PS" --cache-dir "$S/cache" --cgroup-layout v1 --metrics-file "$PM" --event-log "$PL" 2>/dev/null); rc=$?
# issue #25 §4: the pass did what the hook does (the copy): exit 0, so the timer unit is not left
# failed every 30 s; one warning line; visible in the metrics.
check "reconcile, broken policy: exit 0, the copy's value restored" "$rc $(cat "$R/cpu/$ctr_rel/cpu.shares")" "0 2"
check "reconcile, broken policy: one warning line" "$(grep -c '^warning: policy '"$S"'/site.toml:[0-9]*: .*applying the last good copy' <<<"$PREC") $(grep -c 'policy' <<<"$PREC")" "1 1"
check "reconcile, broken policy: not a runtime event (errors_total as it was), source last-good" "$(pinfo)" "1 last-good $SITE_SHA $((E0 + 2))"
check "reconcile, broken policy: nri_qos_reconcile_policy_broken 1" "$(grep '^nri_qos_reconcile_policy_broken ' "$PM")" "nri_qos_reconcile_policy_broken 1"
check "reconcile, broken policy: the drift record carries the error" "$(tail -1 "$PL" | jq -r '[.source, .drift, .policy, (.policy_error != null)] | join(" ")')" \
  "reconcile cpu.shares 512->2 last-good true"
check "status, broken policy: which policy, and the error" \
  "$("$BIN" status --state-dir "$PS" --cache-dir "$S/cache" --cgroup-layout v1 --format json | jq -r '.entries[0] | [.policy, (.policy_error != null)] | join(" ")')" "last-good true"
# --- status text: wanted and kernel values in one form; the whole policy error (issue #25 §5) ---
V2=$(scratch); v2_rel=$(jq -r '.spec.cgroupsPath' "$F16/container-create.json" | sed 's|^/||')
mk_v2_dir "$V2/cg" "$v2_rel"; mk_v2_dir "$V2/cg" "${v2_rel%/*}"
mkdir -p "$V2/proc/2529" && echo 0 > "$V2/proc/2529/oom_score_adj"
printf 'version = 1\n[settings]\ndefault_class = "Q"\n[classes.Q.container]\ncpu_quota_us = 50000\n' > "$V2/p.toml"
"$BIN" invoke --policy "$V2/p.toml" --cgroup-root "$V2/cg" --cgroup-layout v2 --proc-root "$V2/proc" --state-dir "$V2/st" \
  --cache-dir "" --last-good-dir "$V2/lg" --metrics-file "" --event-log "" < "$F16/container-create.json" >/dev/null 2>&1
echo "50000 100000" > "$V2/cg/$v2_rel/cpu.max"    # what the kernel shows after "50000" is written
st2() { "$BIN" status --state-dir "$V2/st" --cache-dir "" --last-good-dir "$V2/lg" --cgroup-layout v2 --cgroup-root "$V2/cg"; }
check "status: cpu.max wanted in the kernel's form" "$(st2 | grep ' cpu.max ' | tr -s ' ')" " cpu.max want 50000 100000 kernel 50000 100000 "
printf '# a comment long enough that the error line is well over sixty characters\ncpu_quota_us = [\n' >> "$V2/p.toml"
perr=$(st2 | grep '(policy: ')
check_contains "status: the whole policy error, not cut" "$perr" "value having invalid format appeared in an array; applying the last good copy"
# --- status --relay: the DaemonSet's liveness probe (issue #20 §2/§3) -------------------------
RS=$(scratch)
"$BIN" status --relay --state-dir "$RS" >"$RS/out" 2>&1; rc=$?
check "status --relay: no relay here → exit 1, says so" "$rc $(cut -c1-23 "$RS/out")" "1 relay: not running here"
echo '{"pid":999999,"registered":true,"runtime":"containerd","runtime_version":"2.1.9","started":1}' > "$RS/relay.json"
"$BIN" status --relay --state-dir "$RS" >"$RS/out" 2>&1; rc=$?
check "status --relay: a dead service pid → DOWN, exit 1" "$rc $(cut -c1-11 "$RS/out")" "1 relay: DOWN"
finish

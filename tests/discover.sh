#!/bin/bash
# `nri-qos reconcile --discover` (issue #25 §3) through the real binary, on a scratch cgroup v1
# tree, with a stand-in for the CRI client (src/cri/nri-qos-cri) that prints a containerd-1.6
# shaped document (tests/fixtures/cri/containerd-1.6.20-discover.json: verbose status "info" with
# pid and runtimeSpec): the pods running before install are recorded (last request, memo), their
# classes applied through the reconcile writer (kernel files read back), recorded in the event log,
# marked "discovered" by status; entries without a runtime spec or a ready sandbox are skipped with
# a reason; a second pass adopts nothing new; a runtime that cannot be asked is one line, exit 1.
# Prints PASS/FAIL/SKIP lines; exit 1 when anything failed.
. "$(dirname "$0")/lib.sh"
discover_node   # DOC S R ST LOG PROM SB CT POD_REL (lib.sh)
# the stand-in client: prints the document, records its arguments
printf '#!/bin/sh\necho "$@" > %s/cri-args\ncat %s\n' "$S" "$DOC" > "$S/fake-cri"; chmod +x "$S/fake-cri"
printf '#!/bin/sh\necho "nri-qos-cri: CRI Version on unix:///nowhere.sock: failed to connect to all addresses" >&2\nexit 1\n' > "$S/down-cri"; chmod +x "$S/down-cri"
printf '{"version":"0.1","plugins":[{"type":"nri-qos","conf":{"policy":"%s"}}]}\n' "$POLICY" > "$S/conf.json"
disc() { "$BIN" reconcile --discover --cri-socket /run/test/cri.sock --nri-conf "$S/conf.json" --state-dir "$ST" --cache-dir "" \
           --cgroup-root "$R" --cgroup-layout v1 --proc-root "$S/proc" --metrics-file "$PROM" --event-log "$LOG" "$@"; }

# --- dry run: says what it would adopt, writes nothing ------------------------------------
OUT=$(disc --cri-client "$S/fake-cri" --dry-run 2>/dev/null)
check_contains "dry run: would adopt the container" "$OUT" "discover default/batch-pod/worker (${CT:0:12}) class BE: would be recorded and adopted (dry run)"
check "dry run: nothing recorded" "$(ls "$ST/last" 2>/dev/null | wc -l)" 0
check "dry run: nothing written" "$(cat "$R/cpu/$POD_REL/$CT/cpu.shares")" 512

# --- the first pass adopts the running pod ------------------------------------------------------
OUT=$(disc --cri-client "$S/fake-cri" 2>"$S/err"); rc=$?
check "discover: exit 0" "$rc" 0
check "discover: the client gets the socket" "$(cat "$S/cri-args")" "--socket /run/test/cri.sock --timeout-ms 29000"
check "discover: kernel cpu.shares of the container (BE)" "$(cat "$R/cpu/$POD_REL/$CT/cpu.shares")" 2
check "discover: kernel cpu.cfs_burst_us of the container (BE)" "$(cat "$R/cpu/$POD_REL/$CT/cpu.cfs_burst_us")" 0
check "discover: oom_score_adj of the container's pid (BE)" "$(cat "$S/proc/4300/oom_score_adj")" 1000
check_contains "discover: adopted line with the knobs written" "$OUT" "adopted  default/batch-pod/worker (${CT:0:12}) class BE: cpu.shares 512->2"
check_contains "discover: a container without runtime spec is skipped with the reason" "$OUT" \
  "skipped  default/batch-pod/no-verbose (d00d00d00d00): the runtime's verbose status has no runtimeSpec (cgroupsPath unknown)"
check_contains "discover: a container without a ready sandbox is skipped" "$OUT" "/orphan (e11e11e11e11): its pod sandbox ffffffffffff is not ready or not listed"
check_contains "discover: the client's own errors are shown" "$OUT" "skipped  container 0123456789ab: ContainerStatus: rpc error"
check_contains "discover: summary" "$OUT" \
  "discover: 1 sandbox(es) and 3 container(s) live in containerd 1.6.20~ds1: 2 newly recorded, 0 already known, 3 skipped"
check "discover: last request recorded as discovered" "$(jq -r '[.source, .event, .class, .request.spec.cgroupsPath] | join(" ")' "$ST/last/$SB/$CT.json")" \
  "discover discover BE /$POD_REL/$CT"
check "discover: the sandbox's memo (as its create would write it)" "$(jq -r '[.namespace, .name, .class, .annotations["node.koordinator.sh/extended-resource-spec"]] | join(" ")' "$ST/$SB.json" 2>/dev/null)" \
  'default batch-pod BE {"containers":{}}'
check "discover: event log records event discover" "$(jq -r 'select(.event=="discover") | "\(.container // "") \(.class) \(.outcome)"' "$LOG" | sort | tr '\n' ',')" \
  " BE ok,worker BE ok,"
ST_J=$("$BIN" status --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --format json)
check "status: origin of each entry" "$(jq -r '[.entries[] | .origin] | join(",")' <<<"$ST_J")" "discovered,discovered"
check "status: discovered count" "$(jq -r .discovered <<<"$ST_J")" 2
check_contains "status: text summary marks discovered" "$("$BIN" status --state-dir "$ST" --cache-dir "" --cgroup-layout v1)" \
  "2 recorded (2 discovered by \`reconcile --discover\`, the rest from runtime events), 0 knob(s) drifted"

# --- a second pass: nothing new; what the state knows is left as it is ---------------------------
OUT=$(disc --cri-client "$S/fake-cri" 2>/dev/null)
check_contains "second pass: nothing newly recorded" "$OUT" "0 newly recorded, 2 already known, 3 skipped"
check_contains "second pass: plain reconcile of what is known" "$OUT" "reconcile: 2 recorded, 2 in force, 0 restored"

# --- the runtime cannot be asked: one line, exit 1, the reconcile pass still runs ----------------
OUT=$(disc --cri-client "$S/down-cri" 2>/dev/null); rc=$?
check "runtime down: exit 1" "$rc" 1
check "runtime down: one line naming the socket and the client's reason" "$(grep '^discover' <<<"$OUT")" \
  "discover: cannot list the runtime's pods through CRI (/run/test/cri.sock): nri-qos-cri: CRI Version on unix:///nowhere.sock: failed to connect to all addresses"
check_contains "runtime down: the reconcile pass still runs" "$OUT" "reconcile: 2 recorded"
OUT=$(disc --cri-client "$S/absent-cri" 2>/dev/null); rc=$?
check "client missing: exit 1 and why" "$rc $(grep -c "cannot run $S/absent-cri" <<<"$OUT")" "1 1"
finish

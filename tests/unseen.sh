#!/bin/bash
# `nri-qos reconcile --unseen` (issue #33 §4: the relay service's periodic pass) through the real
# binary, on a scratch cgroup v1 tree, with a stand-in for the CRI client (src/cri/nri-qos-cri)
# that answers as the real one does with --verbose-ids: the listed ids with their verbose status
# (tests/fixtures/cri/containerd-1.6.20-discover.json), every other item as listed ("brief", no
# "info"), each with CRI's created_at (written by the test in $S/created, unix ns).
#  - a sandbox and container no event recorded are adopted: one listing without status calls, then
#    the status of exactly those ids; records and event log say "unseen", their class is in the
#    kernel;
#  - a pass that finds nothing new makes one client call (the listing), writes nothing, prints
#    nothing (and its summary with --verbose-pass);
#  - a container younger than --min-age-ms is left to the next pass, adopted once old enough;
#  - what an event recorded is never replaced, even when it drifted (it is not reconciled);
#  - a runtime that cannot be asked: one line, exit 1.
# Prints PASS/FAIL/SKIP lines; exit 1 when anything failed.
. "$(dirname "$0")/lib.sh"
discover_node   # DOC S R ST LOG PROM SB CT POD_REL (lib.sh)
echo 0 > "$S/created"
# the stand-in client: one line of arguments per call in cri-args
cat > "$S/fake-cri" <<SH
#!/bin/sh
echo "\$@" >> $S/cri-args
ids=""; only=0
while [ \$# -gt 0 ]; do [ "\$1" = --verbose-ids ] && { only=1; ids=\$2; }; shift; done
[ \$only = 1 ] || { cat $DOC; exit 0; }
exec jq -c --arg ids "\$ids" --argjson now "\$(cat $S/created)" '(\$ids | split(",")) as \$v
  | def brief: if ([.id] | inside(\$v)) then . else del(.info, .resources) + {brief: true} end;
  .sandboxes |= map(brief + {created_at: \$now}) | .containers |= map(brief + {created_at: \$now}) | .errors = []' $DOC
SH
chmod +x "$S/fake-cri"
printf '#!/bin/sh\necho "nri-qos-cri: CRI Version on unix:///nowhere.sock: failed to connect to all addresses" >&2\nexit 1\n' > "$S/down-cri"; chmod +x "$S/down-cri"
unseen() { "$BIN" reconcile --unseen --cri-socket /run/test/cri.sock --cri-client "$S/fake-cri" --policy "$POLICY" --state-dir "$ST" \
             --cache-dir "" --cgroup-root "$R" --cgroup-layout v1 --proc-root "$S/proc" --metrics-file "$PROM" --event-log "$LOG" "$@"; }
now_ns() { echo $(( $(date +%s%N) )); }

# --- young: created now, --min-age-ms 60000: nothing adopted, nothing asked ----------------------
now_ns > "$S/created"; : > "$S/cri-args"
OUT=$(unseen --min-age-ms 60000 --verbose-pass 2>"$S/err"); rc=$?
check "young: exit 0" "$rc" 0
check "young: one listing, no status call" "$(cat "$S/cri-args")" "--socket /run/test/cri.sock --timeout-ms 29000 --verbose-ids "
check_contains "young: summary counts them for the next pass" "$OUT" "0 adopted, 3 younger than 60000 ms (next pass)"
check "young: nothing recorded" "$(ls "$ST/last" 2>/dev/null | wc -l)" 0
check "young: nothing written" "$(cat "$R/cpu/$POD_REL/$CT/cpu.shares")" 512

# --- old enough: the sandbox and its container adopted -------------------------------------------
echo $(( $(now_ns) - 20000000000 )) > "$S/created"; : > "$S/cri-args"
OUT=$(unseen 2>"$S/err"); rc=$?
check "adopt: exit 0" "$rc" 0
check "adopt: the listing, then the status of the unseen ones only (the orphan and d00d... too)" "$(sed -n 2p "$S/cri-args" | tr ',' '\n' | sed 's/.* //' | sort | tr '\n' ' ')" \
  "$(printf '%s\n' "$SB" "$CT" d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d | sort | tr '\n' ' ')"
check "adopt: two client calls" "$(wc -l < "$S/cri-args")" 2
check "adopt: kernel cpu.shares of the container (BE)" "$(cat "$R/cpu/$POD_REL/$CT/cpu.shares")" 2
check "adopt: oom_score_adj of the container's pid (BE)" "$(cat "$S/proc/4300/oom_score_adj")" 1000
check_contains "adopt: adopted line with the knobs written" "$OUT" "adopted  default/batch-pod/worker (${CT:0:12}) class BE: cpu.shares 512->2"
check_contains "adopt: a container without runtime spec is skipped with the reason" "$OUT" \
  "skipped  default/batch-pod/no-verbose (d00d00d00d00): the runtime's verbose status has no runtimeSpec (cgroupsPath unknown)"
check_contains "adopt: summary" "$OUT" "unseen: 4 sandboxes/containers live in containerd 1.6.20~ds1: 0 known, 2 adopted, 0 younger than 10000 ms (next pass), 0 deferred (more than 256 per pass), 1 without a listed pod, 0 not adoptable (said before)"
check "adopt: last request recorded as unseen" "$(jq -r '[.source, .event, .class] | join(" ")' "$ST/last/$SB/$CT.json")" "unseen unseen BE"
check "adopt: the sandbox's memo" "$(jq -r '[.namespace, .name, .class] | join(" ")' "$ST/$SB.json" 2>/dev/null)" "default batch-pod BE"
check "adopt: event log records event unseen" "$(jq -r 'select(.event=="unseen") | "\(.container // "") \(.class) \(.outcome)"' "$LOG" | sort | tr '\n' ',')" \
  " BE ok,worker BE ok,"
ST_J=$("$BIN" status --state-dir "$ST" --cache-dir "" --cgroup-layout v1 --format json)
check "status: origin of each entry" "$(jq -r '[.entries[] | .origin] | join(",")' <<<"$ST_J")" "unseen,unseen"

# --- nothing new: one listing, no output, nothing touched (not even drift) ----------------------
echo 512 > "$R/cpu/$POD_REL/$CT/cpu.shares"; : > "$S/cri-args"; n0=$(wc -l < "$LOG")
OUT=$(unseen 2>"$S/err"); rc=$?
check "nothing new: exit 0, no output" "$rc:$OUT" "0:"
check "nothing new: one client call" "$(wc -l < "$S/cri-args")" 1
check "nothing new: no record" "$(wc -l < "$LOG")" "$n0"
check "nothing new: a known container is not reconciled by this pass" "$(cat "$R/cpu/$POD_REL/$CT/cpu.shares")" 512
OUT=$(unseen --verbose-pass 2>"$S/err")
check_contains "nothing new: --verbose-pass prints the summary" "$OUT" "2 known, 0 adopted"

# --- a record its own event left is never replaced -----------------------------------------------
jq '.source = "nri-eval" | .event = "StartContainer"' "$ST/last/$SB/$CT.json" > "$S/rec" && cp "$S/rec" "$ST/last/$SB/$CT.json"
unseen >/dev/null 2>&1
check "event record: left as it is" "$(jq -r '[.source, .event] | join(" ")' "$ST/last/$SB/$CT.json")" "nri-eval StartContainer"

# --- the runtime cannot be asked: one line, exit 1 -----------------------------------------------
OUT=$("$BIN" reconcile --unseen --cri-socket /run/test/cri.sock --cri-client "$S/down-cri" --state-dir "$ST" --cache-dir "" 2>/dev/null); rc=$?
check "runtime down: exit 1 and one line" "$rc $OUT" \
  "1 unseen: cannot list the runtime's pods through CRI (/run/test/cri.sock): nri-qos-cri: CRI Version on unix:///nowhere.sock: failed to connect to all addresses"
check "--unseen with --discover: refused" "$("$BIN" reconcile --unseen --discover >/dev/null 2>&1 && echo accepted || echo refused)" refused
finish

#!/bin/bash
# Policy suite (issue 9 §4), through the built binary against scratch trees:
#  * built-in policy: no file at the default path → the bundled policy, compiled in, classifies
#    (a Koordinator batch pod gets its batch shares), says "policy: builtin" (Result, explain, --version), and
#    reads no TOML at all (strace);
#  * last good copy: a valid file is saved; once broken, every event applies the copy, reports
#    the error (Result metadata policy_error, stderr) and parses nothing again (strace); fixed,
#    the file applies again; no copy → built-in, with the error; the breakage never fails a
#    container, not even under settings.fail = "closed";
#  * `nri-qos check`: every error with file:line and "did you mean" in one run, warnings, what
#    the hook applies meanwhile;
#  * settings typos: v0.1 conf {"polcy": ...} is a bad request; register --plugin-conf refuses it;
#  * `make` without build dependencies names them and `make deps`, no "Error 127".
# Prints PASS/FAIL/SKIP lines; exits 1 when anything failed. Env: NRI_QOS_BIN (build/nri-qos).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -x "$BIN" ] || { fail "policy: binary $BIN missing (run make)"; finish; }
STRACE=$(command -v strace || true)
S=$(scratch)
REQ=$FIX/requests/containerd-1.6.20
# A Koordinator batch pod (BestEffort, batch-cpu request 2m: the bundled KOORD-BE class gives it
# MilliCPUToShares(2) = 2 shares); the test policies below class it by the label alone.
CT=$(jq -c '.labels["koordinator.sh/qosClass"]="BE" | del(.conf) | .spec.cgroupsPath |= sub("/burstable/"; "/besteffort/") | del(.spec.resources.memory)
      | .spec.annotations["node.koordinator.sh/extended-resource-spec"]="{\"containers\":{\"cgfs-ctr\":{\"requests\":{\"kubernetes.io/batch-cpu\":\"2\"}}}}"' \
   "$REQ/container-create.json")
CTR_REL=$(jq -r '.spec.cgroupsPath' <<<"$CT" | sed 's|^/||')
BUNDLED_SHA=$(sha256sum "$BUNDLED" | cut -d' ' -f1)

# The built-in cases need no file at the default policy path (lib.sh nodefault).
if can_hide_default_policy; then
  NODEFAULT=1
else
  skip "policy: /etc/nri exists and cannot be hidden (unshare -m): built-in cases not run"
  NODEFAULT=0
fi
# Stderr without the event record lines (record.hpp: one "nri-qos: time=..." line per event).
noise() { grep -v '^nri-qos: time=' "$1"; }

# hook ROOT MODE [args...] < request: invoke/explain with every root in the scratch tree
hook() {
  local root=$1 mode=$2; shift 2
  "$BIN" "$mode" --cgroup-root "$root/cg" --cgroup-layout v1 --proc-root "$root/proc" --state-dir "$root/state" \
    --cache-dir "$root/cache" --metrics-file "$root/m.prom" --event-log "$root/events.log" "$@"
}
PID=$(jq -r .pid <<<"$CT")
tree() {
  local r; r=$(mktemp -d "$S/t.XXXXXX")
  mk_v1_dir "$r/cg" "$CTR_REL"; mkdir -p "$r/proc/$PID"; echo 0 > "$r/proc/$PID/oom_score_adj"; echo "$r"
}

# ---- the built-in policy ----------------------------------------------------------------------
if [ "$NODEFAULT" = 1 ]; then
  R=$(tree)
  OUT=$(nodefault "$BIN" invoke --cgroup-root "$R/cg" --cgroup-layout v1 --proc-root "$R/proc" --state-dir "$R/state" \
        --cache-dir "$R/cache" --metrics-file "$R/m.prom" --event-log "$R/events.log" <<<"$CT" 2>"$R/err"); RC=$?
  valid_result "builtin: no policy file" "$OUT"
  check "builtin: exit 0" "$RC" 0
  check "builtin: classifies a Koordinator BE pod as BE" "$(jq_get "$OUT" '.metadata.class + " " + .metadata.rule')" "KOORD-BE koordinator-be"
  check "builtin: says so" "$(jq_get "$OUT" .metadata.policy)" builtin
  check "builtin: SHA-256 of the bundled policy text" "$(jq_get "$OUT" .metadata.policy_sha256)" "$BUNDLED_SHA"
  check "builtin: no error (no file at the default path is not an error)" "$(jq_get "$OUT" '.metadata.policy_error // "none"')/$(noise "$R/err")" "none/"
  check "builtin: the record says so" "$(jq -r '[.level, .policy, .policy_sha256, .policy_error // "none"] | join(" ")' "$R/events.log")" \
    "info builtin $BUNDLED_SHA none"
  check "builtin: cpu.shares written" "$(cat "$R/cg/cpu/$CTR_REL/cpu.shares")" 2
  check "builtin: nothing saved as a last good copy" "$(ls "$R/state/last-good" 2>/dev/null)" ""
  if [ -n "$STRACE" ]; then
    nodefault "$STRACE" -f -e trace=open,openat,openat2 -o "$R/strace" "$BIN" invoke --cgroup-root "$R/cg" --cgroup-layout v1 \
      --proc-root "$R/proc" --state-dir "$R/state" --cache-dir "$R/cache" --metrics-file "" --event-log "" <<<"$CT" >/dev/null 2>&1
    check "builtin: no TOML file is opened (compiled in, no parse)" "$(grep -c '\.toml"' "$R/strace")" 0
  else
    skip "builtin: strace missing"
  fi
  EXP=$(nodefault "$BIN" explain --cgroup-root "$R/cg" --cgroup-layout v1 --state-dir "$R/state" --cache-dir "" <<<"$CT")
  check_contains "builtin: explain says policy: builtin" "$EXP" "policy: builtin"
  VER=$(nodefault "$BIN" --version)
  check_contains "builtin: --version says policy: builtin" "$VER" "policy: builtin (no /etc/nri/nri-qos.toml)"
  check_contains "builtin: --version gives its SHA-256" "$VER" "built-in policy: sha256 $BUNDLED_SHA ("
fi
# A path someone configured that does not exist: the built-in policy, and the error.
R=$(tree)
OUT=$(hook "$R" invoke --policy "$R/missing.toml" <<<"$CT" 2>"$R/err"); RC=$?
check "builtin: configured file missing: exit 0, built-in policy classifies" "$RC $(jq_get "$OUT" '.metadata.policy + " " + .metadata.class')" "0 builtin KOORD-BE"
check "builtin: configured file missing: reported" "$(jq_get "$OUT" .metadata.policy_error)" \
  "$R/missing.toml: cannot open policy: No such file or directory; applying the built-in policy until it is fixed"
check "builtin: configured file missing: on stderr" "$(noise "$R/err")" \
  "nri-qos: policy: $R/missing.toml: cannot open policy: No such file or directory; applying the built-in policy until it is fixed"

# ---- the last good copy -------------------------------------------------------------------------
R=$(tree)
P=$R/site.toml
cat > "$P" <<'EOF'
version = 1
[settings]
default_class = "LS"
fail = "closed"
[[rules]]
name = "site-be"
class = "BE"
match.labels = { "koordinator.sh/qosClass" = "BE" }
[classes.LS]
[classes.BE.container]
cpu_shares = 3
EOF
GOOD_SHA=$(sha256sum "$P" | cut -d' ' -f1)
OUT=$(hook "$R" invoke --policy "$P" <<<"$CT" 2>/dev/null)
check "last-good: the file applies" "$(jq_get "$OUT" '.metadata.policy + " " + .metadata.rule')" "file site-be"
check "last-good: its SHA-256" "$(jq_get "$OUT" .metadata.policy_sha256)" "$GOOD_SHA"
LG=$(ls "$R"/state/last-good/last-good-*.toml 2>/dev/null)
check "last-good: the valid file is saved (--state-dir/last-good)" "$([ -n "$LG" ] && cmp -s "$LG" "$P" && stat -c %a "$LG")" 600
# An edit with two typos. (Wait until it is older than the cache's 2 s racy window: a younger
# file is re-read on every event to verify its text, by design — policy_cache.hpp.)
sed -i 's/^cpu_shares = 3/cpu_sharez = 3\nmemory_limit = 1/' "$P"
sleep 2.2
for n in 1 2; do
  : > "$R/cg/cpu/$CTR_REL/cpu.shares"
  OUT=$(hook "$R" invoke --policy "$P" <<<"$CT" 2>"$R/err"); RC=$?
  check "last-good: broken file, event $n: exit 0, the last good copy classifies" \
    "$RC $(jq_get "$OUT" '.metadata.policy + " " + .metadata.rule + " " + .error')" "0 last-good site-be "
  check "last-good: broken file, event $n: the last good knobs are applied" "$(cat "$R/cg/cpu/$CTR_REL/cpu.shares")" 3
  check "last-good: broken file, event $n: SHA-256 of the copy" "$(jq_get "$OUT" .metadata.policy_sha256)" "$GOOD_SHA"
  check "last-good: broken file, event $n: the error in the Result" "$(jq_get "$OUT" .metadata.policy_error)" \
    "$P:11: classes.BE.container: unknown knob \"cpu_sharez\" (did you mean \"cpu_shares\"? see nri-qos.toml(5)) (+1 more error: run nri-qos check); applying the last good copy of $P (sha256 ${GOOD_SHA:0:12}) until it is fixed"
  check_contains "last-good: broken file, event $n: the error on stderr" "$(cat "$R/err")" "nri-qos: policy: $P:11: classes.BE.container: unknown knob"
  check_contains "last-good: broken file, event $n: the stderr record too" "$(grep '^nri-qos: time=' "$R/err")" \
    "level=warn source=invoke event=create"
  check "last-good: broken file, event $n: the event log record (policy, error)" \
    "$(tail -1 "$R/events.log" | jq -r '[.level, .outcome, .policy, .policy_sha256, (.policy_error | startswith("'"$P"':11: classes.BE.container: unknown knob"))] | join(" ")')" \
    "warn ok last-good $GOOD_SHA true"
done
if [ -n "$STRACE" ]; then
  "$STRACE" -f -e trace=open,openat,openat2 -o "$R/strace" "$BIN" invoke --policy "$P" --cgroup-root "$R/cg" --cgroup-layout v1 \
    --proc-root "$R/proc" --state-dir "$R/state" --cache-dir "$R/cache" --metrics-file "" --event-log "" <<<"$CT" >/dev/null 2>&1
  check "last-good: while broken, no TOML is opened (the error and the copy come from the cache)" "$(grep -c '\.toml"' "$R/strace")" 0
fi
CHK_ERR=$("$BIN" check "$P" --last-good-dir "$R/state/last-good" 2>&1 >/dev/null); RC=$?
CHK_OUT=$("$BIN" check "$P" --last-good-dir "$R/state/last-good" 2>/dev/null)
check "last-good: check exits 1" "$RC" 1
check "last-good: check lists both errors" "$CHK_ERR" "nri-qos: $P:11: classes.BE.container: unknown knob \"cpu_sharez\" (did you mean \"cpu_shares\"? see nri-qos.toml(5))
nri-qos: $P:12: classes.BE.container.memory_limit: 1 out of range [4096, 2^63-1] or \"max\" or \"N%\""
check_contains "last-good: check shows what the hook applies meanwhile" "$CHK_OUT" \
  "$P: 2 errors; meanwhile the hook applies the last good copy of $P ($LG, sha256 $GOOD_SHA, saved "
# settings.fail = "closed" of the copy is about failed knobs, not about the broken file.
OUT=$(hook "$R" invoke --policy "$P" <<<"$(jq -c '.labels={}' <<<"$CT")" 2>/dev/null); RC=$?
check "last-good: a broken file never fails a container (fail = closed copy)" "$RC/$(jq_get "$OUT" .error)" "0/"
# Fixed: the file applies again, no error.
sed -i 's/^cpu_sharez = 3/cpu_shares = 4/; /^memory_limit = 1$/d' "$P"
OUT=$(hook "$R" invoke --policy "$P" <<<"$CT" 2>"$R/err")
check "last-good: fixed: the file applies, no error" "$(jq_get "$OUT" '.metadata.policy + " " + (.metadata.policy_error // "none")')/$(noise "$R/err")" "file none/"
check "last-good: fixed: the record has no error" "$(tail -1 "$R/events.log" | jq -r '[.level, .policy, .policy_error // "none"] | join(" ")')" "info file none"
check "last-good: fixed: its knobs" "$(cat "$R/cg/cpu/$CTR_REL/cpu.shares")" 4
check "last-good: fixed: the copy follows" "$(cmp -s "$LG" "$P" && echo same)" same
# Broken with the copy disabled (--last-good-dir ""): the built-in policy.
echo "garbage" >> "$P"
OUT=$(hook "$R" invoke --policy "$P" --last-good-dir "" <<<"$CT" 2>/dev/null)
check "last-good: disabled: the built-in policy, with the error" \
  "$(jq_get "$OUT" '.metadata.policy + " " + .metadata.class')/$(jq_get "$OUT" .metadata.policy_error | grep -c 'applying the built-in policy')" "builtin KOORD-BE/1"
# explain shows the same choice.
R2=$(tree)
printf 'version = 1\n[settings]\ndefault_class = "LS"\n[classes.LS]\n' > "$R2/p.toml"
EXP=$(hook "$R2" explain --policy "$R2/p.toml" <<<"$CT")
check_contains "explain: says policy: file" "$EXP" "policy: file"

# ---- whatever compiles an edit into the cache also makes it the last good copy (issue 19 §2) ----
# A valid policy A is in force (an event compiled it: cache + last good copy). It is edited to B
# (valid) and only explain, status or reconcile runs — B is compiled into the shared cache then, so
# no event compiles it again. The next edit is broken: the hook must fall back to B, not to A.
for via in explain status reconcile; do
  R2=$(tree)
  P2=$R2/site.toml
  printf 'version = 1\n[settings]\ndefault_class = "LS"\n[[rules]]\nname = "site-be"\nclass = "BE"\nmatch.labels = { "koordinator.sh/qosClass" = "BE" }\n[classes.LS]\n[classes.BE.container]\ncpu_shares = 3\n' > "$P2"
  hook "$R2" invoke --policy "$P2" <<<"$CT" >/dev/null 2>&1
  sed -i 's/^cpu_shares = 3$/cpu_shares = 77/' "$P2"
  B_SHA=$(sha256sum "$P2" | cut -d' ' -f1)
  case $via in
    explain) hook "$R2" explain --policy "$P2" <<<"$CT" >/dev/null 2>&1 ;;
    *) "$BIN" "$via" --policy "$P2" --state-dir "$R2/state" --cache-dir "$R2/cache" --cgroup-root "$R2/cg" --cgroup-layout v1 \
         --proc-root "$R2/proc" >/dev/null 2>&1 ;;
  esac
  echo "garbage" >> "$P2"
  : > "$R2/cg/cpu/$CTR_REL/cpu.shares"
  OUT=$(hook "$R2" invoke --policy "$P2" <<<"$CT" 2>/dev/null)
  check "last-good after $via: a broken edit falls back to the edit $via compiled (B), not to the older A" \
    "$(jq_get "$OUT" '.metadata.policy + " " + .metadata.policy_sha256')/$(cat "$R2/cg/cpu/$CTR_REL/cpu.shares")" "last-good $B_SHA/77"
done

# ---- a large policy: a deadline while it compiles; compiled outside the event (issue 19 §2) -----
# 10,000 rules (bench/gen-policy.sh) under settings.fail = "closed": compiling them takes far
# longer than the deadline below (BENCHMARKS.md "cold path"), so an event that finds no compiled
# entry runs out of time while compiling.
R3=$(tree)
printf '%s\n' 'version = 1' '[settings]' 'default_class = "LS"' 'fail = "closed"' '[[rules]]' 'name = "site-be"' 'class = "BE"' \
  'match.labels = { "koordinator.sh/qosClass" = "BE" }' '[classes.LS]' '[classes.BE]' '[classes.BE.container]' 'cpu_shares = 3' > "$R3/base.toml"
BIG=$R3/big.toml
DL=1000  # the default; a hit takes ~1 ms, the compile ~4 s (BENCHMARKS.md "cold path")
# The small version is in force (an event compiled it: its last good copy says "closed"); then
# the file grows to 10,000 rules. A deadline during their compile answers fail-closed, never
# "no error".
cp "$R3/base.toml" "$BIG"
hook "$R3" invoke --policy "$BIG" <<<"$CT" >/dev/null 2>&1
bash "$TOP/bench/gen-policy.sh" 10000 "$R3/base.toml" > "$R3/big.tmp" && mv "$R3/big.tmp" "$BIG"
OUT=$(hook "$R3" invoke --policy "$BIG" --deadline-ms $DL <<<"$CT" 2>/dev/null); RC=$?
check "large policy: a deadline during its compile answers with the file's settings.fail (closed; its last good copy's too): exit 1" "$RC" 1
check_contains "large policy: ... and the Result's error says so" "$(jq_get "$OUT" .error)" \
  "nri-qos: deadline exceeded after $DL ms while the policy was being compiled: fail-closed (the policy file's settings.fail, read ahead of its compile), container refused"
# No last good copy: still the file's own settings.fail (closed), read ahead of the compile
# (issue #30 item 5; before: the built-in policy's, open).
OUT=$(hook "$R3" invoke --policy "$BIG" --deadline-ms $DL --last-good-dir "" <<<"$CT" 2>/dev/null); RC=$?
check "large policy: no last good copy: the file's own mode (closed): exit 1" "$RC" 1
check_contains "large policy: ... said in the error" "$(jq_get "$OUT" .error)" \
  "while the policy was being compiled: fail-closed (the policy file's settings.fail, read ahead of its compile), container refused"
# Issue #30 item 5: a fail-closed 10,000-rule policy just written on a node that never saw it —
# no compiled entry, no last good copy (a fresh cache and last-good directory) — fails closed at
# the deadline of its compile, never open because it is new or large. (Fails on the code before
# the fix: exit 0 and the built-in policy's fail-open warning.)
R4=$(tree)
cp "$BIG" "$R4/new.toml"
OUT=$(hook "$R4" invoke --policy "$R4/new.toml" --deadline-ms $DL --last-good-dir "$R4/lg" <<<"$CT" 2>/dev/null); RC=$?
check "new large policy: no cache, no last good copy: a deadline during its compile fails closed (exit 1)" \
  "$RC/$(ls "$R4/cache" 2>/dev/null | wc -l)/$(ls "$R4/lg" 2>/dev/null | wc -l)" "1/0/0"
check_contains "new large policy: ... the Result's error says whose mode" "$(jq_get "$OUT" .error)" \
  "nri-qos: deadline exceeded after $DL ms while the policy was being compiled: fail-closed (the policy file's settings.fail, read ahead of its compile), container refused"
# Compiled outside the event: a reconcile pass (the timer) compiles the configured policy even with
# no container known yet (a fresh state dir: after a reboot); the next event finds it compiled.
"$BIN" reconcile --policy "$BIG" --state-dir "$R3/fresh" --cache-dir "$R3/cache" --cgroup-root "$R3/cg" --cgroup-layout v1 \
  --proc-root "$R3/proc" >/dev/null 2>&1
: > "$R3/cg/cpu/$CTR_REL/cpu.shares"
OUT=$(hook "$R3" invoke --policy "$BIG" --deadline-ms $DL <<<"$CT" 2>/dev/null); RC=$?
check "large policy: compiled by reconcile, the next event recovers (its own rule, no deadline)" \
  "$RC/$(jq_get "$OUT" '.metadata.rule + " " + .error')/$(cat "$R3/cg/cpu/$CTR_REL/cpu.shares")" "0/site-be /3"

# ---- check: every error, warnings, suggestions --------------------------------------------------
cat > "$S/many.toml" <<'EOF'
version = 1
[settings]
default_class = "Ls"
[classes.LS.container]
memory_hgih = "90%"
[classes.BE]
gate.fallback = "nope"
[[rules]]
class = "be"
EOF
ERR=$("$BIN" check "$S/many.toml" 2>&1 >/dev/null); RC=$?
check "check: errors exit 1" "$RC" 1
check "check: every error in one run, with line and suggestion" "$ERR" "nri-qos: $S/many.toml:3: settings.default_class: unknown class \"Ls\" (did you mean \"LS\"?)
nri-qos: $S/many.toml:5: classes.LS.container: unknown knob \"memory_hgih\" (did you mean \"memory_high\"? see nri-qos.toml(5))
nri-qos: $S/many.toml:7: classes.BE.gate.fallback: unknown class \"nope\"
nri-qos: $S/many.toml:9: rules.class: unknown class \"be\" (did you mean \"BE\"?)"
cat > "$S/warn.toml" <<'EOF'
version = 1
[settings]
default_class = "LS"
[[rules]]
class = "BE"
[[rules]]
class = "LS"
match.namespace = "x"
[classes.LS.container]
memory_high = 512
[classes.BE]
[classes.SPARE]
EOF
ERR=$("$BIN" check "$S/warn.toml" 2>&1 >/dev/null); RC=$?
OUT=$("$BIN" check "$S/warn.toml" 2>/dev/null)
check "check: warnings only: exit 0" "$RC" 0
check "check: warnings" "$ERR" "nri-qos: $S/warn.toml:6: warning: rules: \"rule@6\" can never match: rule \"rule@4\" (line 4) comes first and matches everything it matches
nri-qos: $S/warn.toml:10: warning: classes.LS.container.memory_high = 512 bytes is below 1 MiB (did you mean \"512Mi\"?)
nri-qos: $S/warn.toml:12: warning: classes.SPARE: no rule, settings.default_class or gate.fallback uses this class"
check "check: warnings: summary" "$OUT" "$S/warn.toml: OK (2 rules, 3 classes, default class LS); 3 warnings"
ERR=$("$BIN" check "$BUNDLED" 2>&1 >/dev/null)
check "check: the bundled policy has no error and no warning" "$ERR" ""

# ---- settings typos ---------------------------------------------------------------------------------
R=$(tree)
OUT=$(hook "$R" invoke --policy "$POLICY" < <(jq -c --arg p "$POLICY" '.conf = {"polcy": $p}' <<<"$CT") 2>"$R/err"); RC=$?
check "conf typo: a bad request (fail-open), not ignored" "$RC/$(jq_get "$OUT" .metadata.class)" "0/null"
check "conf typo: named, with the key it meant" "$(jq_get "$OUT" .metadata.error)" \
  "bad request: /conf: unknown key \"polcy\" (did you mean \"policy\"?; known: policy) (the plugin conf of /etc/nri/conf.json; see nri-qos(8)) (fail-open: container not adjusted)"
check_contains "conf typo: on stderr" "$(cat "$R/err")" 'unknown key "polcy"'
OUT=$("$BIN" register --conf-json "$S/conf.json" --plugin-conf '{"polcy": "/etc/nri/nri-qos.toml"}' 2>&1); RC=$?
check "register --plugin-conf typo: exit 2" "$RC" 2
check "register --plugin-conf typo: message" "$OUT" 'nri-qos: error: invalid plugin conf: unknown key "polcy" (did you mean "policy"?; known: policy)'
check "register --plugin-conf typo: conf.json not written" "$([ -e "$S/conf.json" ] && echo written || echo absent)" absent

# ---- make without the build dependencies ------------------------------------------------------------
if command -v make >/dev/null; then
  OUT=$(make -C "$TOP" --no-print-directory BUILD="$S/build" CXX="$S/none/g++" PROTOC="$S/none/protoc" 2>&1); RC=$?
  check "make without a compiler: fails" "$([ "$RC" != 0 ] && echo failed)" failed
  check_contains "make without a compiler: names it" "$OUT" "$S/none/g++ (the C++ compiler; Debian package g++"
  check_contains "make without a compiler: names protoc" "$OUT" "protobuf compiler; Debian package protobuf-compiler"
  check_contains "make without a compiler: says which command installs them" "$OUT" "make deps"
  case $OUT in *"Error 127"*) fail "make without a compiler: still 'Error 127': ${OUT:0:300}" ;; *) pass "make without a compiler: no 'Error 127'" ;; esac
  OUT=$(make -C "$TOP" --no-print-directory BUILD="$S/build" BUILD_DEP_ITEMS="toml.hpp:libtoml11-dev nri-qos-no/such.hpp:libnosuch-dev libnri-qos-nosuch.a:libnosuch-dev" 2>&1); RC=$?
  check "make without a header and a library: fails before compiling" "$([ "$RC" != 0 ] && echo failed)/$(ls "$S/build/obj" 2>/dev/null)" failed/
  check_contains "make without a header: names it and its package" "$OUT" "<nri-qos-no/such.hpp> (header; Debian package libnosuch-dev)"
  check_contains "make without a static library: names it" "$OUT" "libnri-qos-nosuch.a (static library; Debian package libnosuch-dev)"
  check_contains "make without them: the apt-get command" "$OUT" "apt-get install libnosuch-dev"
  # make demo on a fresh machine (issue #33 §5): the dependency check of its build names only
  # packages that scripts/deps.sh demo installs (the companions' httplib.h once stopped it before
  # compiling), and deps.sh demo installs nothing else but the tools (g++, make, protoc, jq)
  items=$(make -C "$TOP" --no-print-directory -n demo BUILD="$S/build-demo" 2>/dev/null \
          | sed -n 's/.* BUILD_DEP_ITEMS="\([^"]*\)".*/\1/p' | head -1)
  ipk=$(tr ' ' '\n' <<<"$items" | sed -n 's/.*://p' | sort -u)
  dpk=$("$TOP/scripts/deps.sh" --list demo | sort -u)
  check "make demo: its build checks only what deps.sh demo installs" \
    "$([ -n "$ipk" ] && comm -23 <(echo "$ipk") <(echo "$dpk") | tr '\n' ' ')" ""
  check "make demo: deps.sh demo installs the hook's libraries and tools only" \
    "$(comm -13 <(echo "$ipk") <(echo "$dpk") | grep -vxE 'g\+\+|make|protobuf-compiler|jq' | tr '\n' ' ')" ""
  [ -n "$ipk" ] || fail "make demo: no BUILD_DEP_ITEMS in make -n demo"
else
  skip "make missing"
fi

finish

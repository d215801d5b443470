#!/bin/bash
# nri-qos under an NRI-capable containerd: 1.7 (Debian trixie's 1.7.24, NRI 0.6) or 2.1 (Debian
# sid's 2.1.x, NRI 0.8), extracted with dpkg -x into $E2E_CACHE/<suite>-root (the system is not
# changed), with bookworm's runc, NRI enabled.
#
#   containerd17.sh native [1.7|2.1]  native NRI: build/nri-qos installed as
#                                     /opt/nri/plugins/10-nri-qos (the ttrpc relay)
#   containerd17.sh adapter           (1.7 only) v0.1 path: /opt/nri/bin/nri-qos listed in
#                                     /etc/nri/conf.json, driven by the TEST-ONLY v0.1 adapter
#                                     (adapter/main.go) in /opt/nri/plugins
#   containerd17.sh prepare [1.7|2.1] only fetch/extract the packages, build the adapter (cache)
#   containerd17.sh down MODE [1.7|2.1]  clean up after an E2E_KEEP=1 run
#
# Result names: c17-native-*, c17-adapter-*, c21-native-*. Prints PASS/FAIL/SKIP lines on stdout
# (diagnostics on stderr); exit 1 if anything failed. Env: docs/e2e.md (E2E_CACHE, E2E_WORK,
# NRI_QOS_BIN, E2E_POLICY, E2E_KEEP=1, E2E_CGROUP_DRIVER, E2E_C21_SUITE = Debian suite of the
# 2.1 runtime, default sid).
# shellcheck disable=SC2034  # S, CTR, SHIM_PATH, OCI_CHECKS, OCI_OOM are read by lib.sh
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

MODE=${1:-native}
if [ "$MODE" = down ]; then MODE=${2:-native}; DOWN_ONLY=1; shift; fi
RT=${2:-1.7}
case $MODE/$RT in native/1.7|native/2.1|adapter/1.7|prepare/1.7|prepare/2.1) ;;
  *) echo "usage: $0 native [1.7|2.1] | adapter | prepare [1.7|2.1] | down MODE [1.7|2.1]" >&2; exit 2 ;;
esac
case $RT in
  1.7) DEB_SUITE=trixie; S=c17-$MODE; D=$E2E_WORK/containerd17-$MODE ;;
  2.1) DEB_SUITE=$C21_SUITE; S=c21-$MODE; D=$E2E_WORK/containerd21-$MODE; OCI_OOM=1 ;;
esac
RTROOT=$E2E_CACHE/$DEB_SUITE-root
CONTAINERD=$RTROOT/usr/bin/containerd
CTR=$RTROOT/usr/bin/ctr
SHIM_PATH=$RTROOT/usr/bin                 # containerd finds containerd-shim-runc-v2 via PATH
TR=$E2E_CACHE/trixie-root                 # Go toolchain + NRI Go module for the adapter
ADAPTER=$E2E_CACHE/bin/v010-adapter

# containerd (+ shim, ctr) of the runtime's Debian suite. trixie's and sid's binaries run on
# bookworm's glibc; their runc does not (trixie's needs GLIBC_2.38), so bookworm's runc is used.
fetch_runtime() {
  [ -x "$CONTAINERD" ] && [ -x "$SHIM_PATH/containerd-shim-runc-v2" ] && return 0
  debian_root "$DEB_SUITE" containerd && [ -x "$CONTAINERD" ]
}

go_bin() { ls -d "$TR"/usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -1; }

# The adapter's build inputs from trixie: the Go toolchain and the Go library closure of the
# NRI module (every golang-*-dev in the recursive Depends of golang-github-containerd-nri-dev).
fetch_go() {
  [ -n "$(go_bin)" ] && [ -d "$TR/usr/share/gocode/src/github.com/containerd/nri/pkg/stub" ] && return 0
  debian_apt trixie || return 1
  local gover libs
  gover=$(apt-cache "${APT_OPTS[@]}" depends golang-go 2>/dev/null | grep -o 'golang-1\.[0-9]*-go' | sort -V | tail -1)
  [ -n "$gover" ] || { log "cannot resolve trixie's golang-go"; return 1; }
  libs=$(apt-cache "${APT_OPTS[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
           --no-breaks --no-replaces --no-enhances golang-github-containerd-nri-dev 2>/dev/null \
         | grep -E '^golang-.*-dev$' | sort -u)
  # shellcheck disable=SC2086
  debian_root trixie "$gover" "${gover%-go}-src" $libs && [ -n "$(go_bin)" ]
}

# Build the test-only adapter offline: GOPATH mode over Debian's /usr/share/gocode.
build_adapter() {
  [ -x "$ADAPTER" ] && [ "$ADAPTER" -nt "$E2E_HERE/adapter/main.go" ] && return 0
  log "building the v0.1 adapter offline with $(go_bin)"
  mkdir -p "$E2E_CACHE/bin" "$E2E_CACHE/gocache"
  local gb; gb=$(go_bin)
  (cd "$E2E_HERE/adapter" && env -i PATH="$(dirname "$gb"):/usr/bin:/bin" HOME="$E2E_CACHE" \
      GO111MODULE=off GOPATH="$TR/usr/share/gocode" GOCACHE="$E2E_CACHE/gocache" GOTOOLCHAIN=local \
      GOPROXY=off GOFLAGS= CGO_ENABLED=0 "$gb" build -o "$ADAPTER.tmp" . >&2) || return 1
  mv -f "$ADAPTER.tmp" "$ADAPTER"
}

# The second NRI plugin of plugin-conflict: bench/gostub (containerd/nri pkg/stub), built the same
# way. For a Koordinator BE pod it sets CPU shares 2 at CreateContainer, as nri-qos's BE class does.
GOSTUB=$E2E_CACHE/bin/gostub
build_gostub() {
  [ -x "$GOSTUB" ] && [ "$GOSTUB" -nt "$REPO/bench/gostub/main.go" ] && return 0
  log "building bench/gostub offline with $(go_bin)"
  mkdir -p "$E2E_CACHE/bin" "$E2E_CACHE/gocache"
  local gb; gb=$(go_bin)
  (cd "$REPO/bench/gostub" && env -i PATH="$(dirname "$gb"):/usr/bin:/bin" HOME="$E2E_CACHE" \
      GO111MODULE=off GOPATH="$TR/usr/share/gocode" GOCACHE="$E2E_CACHE/gocache" GOTOOLCHAIN=local \
      GOPROXY=off GOFLAGS= CGO_ENABLED=0 "$gb" build -o "$GOSTUB.tmp" . >&2) || return 1
  mv -f "$GOSTUB.tmp" "$GOSTUB"
}

# ---------------------------------------------------------------------------------------------
RELAY=/opt/nri/plugins/10-nri-qos
RELAY_CONF=/etc/nri/conf.d/10-nri-qos.conf

relay_pids() { # live (not zombie) relay processes that are children of our containerd
  local cp; cp=$(containerd_pid) || return 0
  local p c
  for p in $(pgrep -P "$cp" 2>/dev/null); do
    c=$(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline") || continue
    [[ $c == *"$RELAY"* ]] || continue
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
    echo "$p"
  done
}

# native: point the relay at policy $1 (read at Configure, so containerd is (re)started after);
# the runtime's log, where the relay's recorder looks for NRI ownership conflicts, is ours.
set_native_policy() {
  mkdir -p /etc/nri/conf.d
  printf '{"policy": "%s", "log_file": "%s", "runtime_log": "%s"}\n' "$1" "$D/logs/relay.log" "$D/logs/containerd.log" > "$RELAY_CONF"
}

up() {
  nri_backup
  fetch_runtime || { skip "$S" "cannot fetch Debian $DEB_SUITE's containerd (network or apt): $(tail -1 "$E2E_CACHE/$DEB_SUITE.err" 2>/dev/null)"; return 2; }
  log "containerd: $("$CONTAINERD" --version) (Debian $DEB_SUITE $(debian_version "$DEB_SUITE" containerd))"
  if [ ! -x "$NRI_QOS_BIN" ]; then fail "$S-setup" "$NRI_QOS_BIN missing: run make"; return 1; fi
  install_test_policy "$D/policy/nri-qos.toml" || { fail "$S-setup" "test policy $TEST_POLICY unusable"; return 1; }
  write_fail_closed_policy "$D/policy/fail-closed.toml"
  rm -rf /opt/nri/plugins /etc/nri/conf.d /etc/nri/conf.json
  mkdir -p /opt/nri/plugins /etc/nri/conf.d
  if [ "$MODE" = adapter ]; then
    fetch_go || { skip "$S" "cannot fetch trixie's Go packages for the adapter"; return 2; }
    build_adapter || { fail "$S-setup" "adapter build failed"; return 1; }
    install -m 0755 "$ADAPTER" /opt/nri/plugins/00-v010-adapter
    printf '{"log": "%s"}\n' "$D/logs/adapter.log" > /etc/nri/conf.d/00-v010-adapter.conf
    install -D -m 0755 "$NRI_QOS_BIN" /opt/nri/bin/nri-qos
    set_v01_conf "$D/policy/nri-qos.toml"
  else
    install -m 0755 "$NRI_QOS_BIN" "$RELAY"
    set_native_policy "$D/policy/nri-qos.toml"
  fi
  write_config_common "$(nri_block)"
  start_containerd || { fail "$S-setup" "containerd did not start (see $D/logs/containerd.log)"; return 1; }
  import_image
}

# Registration: containerd launched the relay (a child of containerd, argv[0] the plugin path),
# and logged it registered under its file name.
native_register() {
  local name=$S-register relay; MISMATCH=""
  local _; for _ in $(seq 1 25); do relay=$(relay_pids | head -1); [ -n "$relay" ] && break; sleep 0.2; done
  [ -n "$relay" ] || MISMATCH="no relay process under containerd $(containerd_pid)"
  grep -q 'registered as \\\?"10-nri-qos\\\?"' "$D/logs/containerd.log" \
    || MISMATCH="${MISMATCH:+$MISMATCH; }containerd did not log 'registered as \"10-nri-qos\"'"
  log "  relay pid ${relay:-none}; $(grep -o 'plugin [^ ]* registered as [^ ]*' "$D/logs/containerd.log" | tail -1)"
  verdict "$name"
}

# Kill the relay's evaluation children while they handle events: a watcher polls
# /proc/<relay>/task/*/children (builtins only, ~50 us a round; a child lives for milliseconds)
# and SIGKILLs every evaluator (comm nri-qos-eval; exec mode: every child), by PID, while the pod
# "crash-me" starts. The relay's keeper and zygote (nri-qos-keeper, nri-qos-zygote) are not
# evaluations: they stay. Then the relay
# must still be registered (same PID, containerd did not log "closing plugin") and the next pod
# must be classified and adjusted correctly.
kill_children_of() { # RELAY_PID OUTFILE: runs until killed
  local relay=$1 out=$2 t kids k c
  while :; do
    for t in /proc/"$relay"/task/*; do
      kids=""; read -r kids 2>/dev/null < "$t/children"; [ -n "$kids" ] || continue
      for k in $kids; do
        c=""; read -r c 2>/dev/null < "/proc/$k/comm"
        case $c in nri-qos-keeper|nri-qos-zygote) continue ;; esac
        kill -9 "$k" 2>/dev/null && echo "$k" >> "$out"
      done
    done
  done
}

native_child_crash() {
  local name=$S-child-crash relay; relay=$(relay_pids | head -1)
  [ -n "$relay" ] || { fail "$name" "relay not running before the test"; return; }
  : > "$D/logs/crash-killed"
  local n=0 try watcher
  for try in 1 2 3; do   # a child lives for milliseconds: retry if the watcher missed them all
    kill_children_of "$relay" "$D/logs/crash-killed" &
    watcher=$!
    run_pod crash$try crash-me "$(kube_parent burstable)" --label koordinator.sh/qosClass=BE "${RES[@]}"
    kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
    stop_pod crash$try
    n=$(sort -u "$D/logs/crash-killed" | wc -l)
    log "  killed $n evaluation child(ren) of relay $relay during pod crash-me #$try (pod ok: $(j crash$try .ok))"
    [ "$n" = 0 ] || break
  done
  if [ "$n" = 0 ]; then
    skip "$name" "pending: no evaluation child of relay $relay was caught (needs a test hook, e.g. nri-eval --test-crash-if-pod)"
    return
  fi
  MISMATCH=""
  [ "$(relay_pids | head -1)" = "$relay" ] || MISMATCH="relay pid changed/gone: '$(relay_pids | tr '\n' ' ')' (was $relay)"
  grep -q 'closing plugin 10-nri-qos' "$D/logs/containerd.log" && MISMATCH="${MISMATCH:+$MISMATCH; }containerd closed the plugin: $(grep 'closing plugin 10-nri-qos' "$D/logs/containerd.log" | tail -1)"
  [ -z "$MISMATCH" ] || { fail "$name" "$MISMATCH"; return; }
  sc_be "$name" after-crash burstable --label koordinator.sh/qosClass=BE
}

# containerd restart: the old relay exits on EOF, the new containerd launches a new one, and the
# next pod is correct.
native_restart() {
  local name=$S-restart old; old=$(relay_pids | head -1)
  stop_containerd
  local _; for _ in $(seq 1 30); do [ -n "$old" ] && kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  if [ -n "$old" ] && kill -0 "$old" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$old/stat")" != Z ]; then
    fail "$name" "relay $old still running 3 s after containerd stopped"; kill_pids "$old"; start_containerd; return
  fi
  start_containerd || { fail "$name" "containerd did not restart"; return; }
  local new; for _ in $(seq 1 25); do new=$(relay_pids | head -1); [ -n "$new" ] && break; sleep 0.2; done
  [ -n "$new" ] && [ "$new" != "$old" ] || { fail "$name" "no new relay after restart (old $old, new '${new}')"; return; }
  log "  relay relaunched: $old -> $new"
  sc_be "$name" after-restart burstable --label koordinator.sh/qosClass=BE
}

# Issue 20 item 5: another NRI plugin sets the same field. bench/gostub as 05-gostub sets CPU
# shares for a Koordinator BE pod, as nri-qos's BE class does: containerd refuses the container
# ("plugins \"10-nri-qos\" and \"05-gostub\" both tried to set CPU shares") and undoes the create
# (RemoveContainer, never StartContainer). nri-qos must record it with the other plugin's name:
# the event log (failure adjustment-rejected), nri_qos_adjustment_rejected_total{other="05-gostub"}
# and `status`. Then, with settings.leave_to_others naming CPU shares and 05-gostub, the pod
# starts, gets gostub's shares, and nri-qos's record says "left to 05-gostub".
# The scenario's own metrics file (settings.metrics_file of its policies): the shared default
# file is also written by other nri-qos builds on a test host, which keep only the series they know.
PROM=$D/logs/nri_qos.prom
rejected_count() { sed -n 's/^nri_qos_adjustment_rejected_total{other="05-gostub"} //p' "$PROM" 2>/dev/null | tail -1; }
native_plugin_conflict() {
  local name=$S-plugin-conflict msg rec before after st pol=$D/policy/leave.toml cpol=$D/policy/conflict.toml
  fetch_go || { skip "$name" "cannot fetch trixie's Go packages for bench/gostub"; return; }
  build_gostub || { fail "$name" "bench/gostub build failed"; return; }
  install -m 0755 "$GOSTUB" /opt/nri/plugins/05-gostub
  echo '{}' > /etc/nri/conf.d/05-gostub.conf
  sed "s|^\\[settings\\]\$|[settings]\\nmetrics_file = \"$PROM\"|" "$D/policy/nri-qos.toml" > "$cpol"
  set_native_policy "$cpol"
  stop_containerd; start_containerd || { fail "$name" "containerd did not restart with 05-gostub"; return; }
  before=$(rejected_count); before=${before:-0}
  local seen; seen=$(wc -l < "$E2E_EVENT_LOG" 2>/dev/null || echo 0)   # records of earlier runs: not this one's
  if run_pod conflict conflict "$(kube_parent burstable)" "${RES[@]}" --label koordinator.sh/qosClass=BE; then
    fail "$name" "the pod started: containerd did not refuse two plugins setting CPU shares"
    stop_pod conflict
  else
    msg=$(first_error conflict); stop_pod conflict
    log "  CRI: $msg"
    sleep 2.5   # the relay's recorder waits for containerd's log line, then writes
    MISMATCH=""
    [[ $msg == *'both tried to set'* ]] || MISMATCH="CRI error is not containerd's ownership conflict: $msg"
    rec=$(tail -n +"$((seen + 1))" "$E2E_EVENT_LOG" 2>/dev/null | jq -c 'select(.failure == "adjustment-rejected" and .pod == "conflict")' 2>/dev/null | tail -1)
    log "  record: ${rec:-none in $E2E_EVENT_LOG}"
    [[ $rec == *'\"05-gostub\" both tried to set CPU shares'* ]] ||
      MISMATCH="${MISMATCH:+$MISMATCH; }no adjustment-rejected record naming 05-gostub in $E2E_EVENT_LOG"
    after=$(rejected_count); after=${after:-0}
    log "  nri_qos_adjustment_rejected_total{other=\"05-gostub\"}: $before -> $after"
    [ "$after" -gt "$before" ] || MISMATCH="${MISMATCH:+$MISMATCH; }nri_qos_adjustment_rejected_total{other=\"05-gostub\"} did not grow ($before -> $after) in $PROM"
    st=$("$NRI_QOS_BIN" status 2>&1 | grep 'adjustments undone by the runtime')
    log "  status: ${st:-no line}"
    [[ $st == *05-gostub* ]] || MISMATCH="${MISMATCH:+$MISMATCH; }status does not name 05-gostub"
    verdict "$name"
  fi
  # The same pod with CPU shares left to 05-gostub.
  name=$S-leave-to-others
  sed 's/^\[settings\]$/[settings]\nleave_to_others = [{field = "cpu.shares", plugin = "05-gostub"}]/' "$cpol" > "$pol"
  if ! msg=$("$NRI_QOS_BIN" check "$pol" 2>&1) || [[ $msg != *"cpu.shares left to 05-gostub"* ]]; then
    fail "$name" "nri-qos check: $(tr '\n' ' ' <<<"$msg")"
  else
    set_native_policy "$pol"
    stop_containerd; start_containerd || { fail "$name" "containerd did not restart"; return; }
    if start_or_fail "$name" leave burstable --label koordinator.sh/qosClass=BE; then
      MISMATCH=""
      expect_knob leave ctr cpu.shares 2    # gostub's
      expect_knob leave ctr cpu.cfs_burst_us 0
      rec=$(jq -c --arg id "$(j leave .ctr_id)" 'select(.id == $id and .event == "CreateContainer")' "$E2E_EVENT_LOG" 2>/dev/null | tail -1)
      log "  record: ${rec:-none}"
      [[ $rec == *'cpu_shares: left to 05-gostub'* ]] || MISMATCH="${MISMATCH:+$MISMATCH; }the CreateContainer record does not say cpu_shares left to 05-gostub"
      stop_pod leave
      verdict "$name"
    fi
  fi
  rm -f /opt/nri/plugins/05-gostub /etc/nri/conf.d/05-gostub.conf
  set_native_policy "$D/policy/nri-qos.toml"
  stop_containerd; start_containerd || fail "$S-setup" "containerd did not restart without 05-gostub"
}

# Issue 9 §4 (pol): a policy broken by an edit keeps the node on its last good version. A site
# policy (Koordinator BE gets cpu.shares 3; the built-in policy would give 2) classifies one pod,
# which saves its last good copy in /var/lib/nri-qos (from the relay's sandboxed evaluator); then
# a typo goes into the file and the next BE pod must still get cpu.shares 3, read back from the
# kernel and config.json.
native_last_good() {
  local name=$S-last-good-policy pol=$D/policy/site.toml copy
  sed 's/^cpu_shares = 2 .*/cpu_shares = 3/' "$D/policy/nri-qos.toml" > "$pol"
  grep -q '^cpu_shares = 3$' "$pol" || { fail "$name" "could not derive the site policy"; return; }
  set_native_policy "$pol"
  stop_containerd; start_containerd || { fail "$name" "containerd did not restart"; return; }
  start_or_fail "$name" lg-good burstable --label koordinator.sh/qosClass=BE || return
  MISMATCH=""; expect_knob lg-good ctr cpu.shares 3; stop_pod lg-good
  [ -z "$MISMATCH" ] || { fail "$name" "site policy not applied: $MISMATCH"; return; }
  copy=$(grep -lxF 'cpu_shares = 3' /var/lib/nri-qos/last-good-*.toml 2>/dev/null | head -1)
  [ -n "$copy" ] && cmp -s "$copy" "$pol" || { fail "$name" "no last good copy of $pol in /var/lib/nri-qos"; return; }
  printf 'cpu_sharez = 1\n' >> "$pol"   # a typo after an edit (in [classes.BE.pod])
  "$NRI_QOS_BIN" check "$pol" >/dev/null 2>&1 && { fail "$name" "the broken policy passes nri-qos check"; return; }
  start_or_fail "$name" lg-broken burstable --label koordinator.sh/qosClass=BE || return
  MISMATCH=""; expect_knob lg-broken ctr cpu.shares 3
  expect_oci lg-broken .linux.resources.cpu.shares 3
  stop_pod lg-broken
  verdict "$name"
}

# Issue 9 §4 (pol): the binary alone in /opt/nri/plugins — no /etc/nri/nri-qos.toml, no conf.d
# file — classifies with the policy compiled into it: a Koordinator BE pod gets the bundled BE
# class, read back from the kernel (and config.json). The Result metadata "policy: builtin" is
# not reachable here (containerd gives the relay /dev/null as stderr and there is no log_file
# without a conf.d file): the same binary's --version states the choice instead.
native_builtin() {
  local name=$S-builtin-policy ver
  stop_containerd
  rm -f "$RELAY_CONF" /etc/nri/nri-qos.toml
  install -m 0755 "$NRI_QOS_BIN" "$RELAY"
  if [ -n "$(ls -A /etc/nri/conf.d 2>/dev/null)" ] || [ -e /etc/nri/nri-qos.toml ]; then
    fail "$name" "could not clear /etc/nri/nri-qos.toml and /etc/nri/conf.d"; start_containerd; return
  fi
  start_containerd || { fail "$name" "containerd did not restart"; return; }
  ver=$("$RELAY" --version 2>&1 | grep '^policy:')
  log "  $RELAY --version: $ver"
  [ "$ver" = "policy: builtin (no /etc/nri/nri-qos.toml)" ] || { fail "$name" "--version says '$ver'"; return; }
  # The compiled-in policy is the bundled one, which trusts no pod-writable annotation: a
  # Koordinator batch pod gets koordlet's batch limits, kubelet's cpu.shares stays (issue #19;
  # sc_koord_batch in lib.sh).
  OCI_CHECKS=1 sc_koord_batch "$name"
}

# Issue 10 §4: the bundled policy (conf/nri.d/nri-qos.toml as shipped) installed as the policy
# file: a Koordinator batch pod gets koordlet's batchresource values (sc_koord_batch in lib.sh),
# read back from the real cgroup and config.json. The other scenarios keep their explicit test
# policy (tests/fixtures/policy/classic.toml), so they do not depend on the bundled defaults.
native_bundled() {
  local name=$S-koord-batch
  # With the operator's declaration that koord-manager owns the batch annotation (issue #19):
  # koordlet's full values, cpu.shares 512 included.
  declare_koordinator "$REPO/conf/nri.d/nri-qos.toml" "$D/policy/bundled.toml"
  set_native_policy "$D/policy/bundled.toml"
  stop_containerd; start_containerd || { fail "$name" "containerd did not restart with the bundled policy"; return; }
  KOORD_TRUSTED=1 OCI_CHECKS=1 sc_koord_batch "$name"
  set_native_policy "$D/policy/nri-qos.toml"
  stop_containerd; start_containerd || fail "$S-setup" "containerd did not restart with the test policy"
}

scenarios() {
  if [ "$MODE" = adapter ]; then
    want be-label && sc_be "$S-be-label" be-label burstable --label koordinator.sh/qosClass=BE
    set_v01_conf "$D/policy/fail-closed.toml"
    want fail-closed && sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
    set_v01_conf "$D/policy/nri-qos.toml"
    return
  fi
  want register && host_only && native_register
  OCI_CHECKS=1
  want be-label && sc_be "$S-be-label" be-label burstable --label koordinator.sh/qosClass=BE
  want ls-burst && sc_ls "$S-ls-burst" ls-burst
  want be-kube && sc_be "$S-be-kube" be-kube besteffort
  OCI_CHECKS=""
  want v2-knobs && sc_knobs "$S-v2-knobs" knobs
  want update-be && sc_update_be "$S-update-be"
  want update-ls && sc_update_ls "$S-update-ls"
  host_only || return 0   # the node VM: the rest is protocol-level, covered on the host
  want child-crash && native_child_crash
  want restart && native_restart
  want last-good && native_last_good
  want bundled && native_bundled
  want plugin-conflict && native_plugin_conflict
  want builtin && native_builtin
  set_native_policy "$D/policy/fail-closed.toml"
  stop_containerd; start_containerd || fail "$S-setup" "containerd did not restart with the fail-closed policy"
  want fail-closed && containerd_alive && sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
}

if [ "$MODE" = prepare ]; then
  mkdir -p "$E2E_CACHE"
  fetch_runtime || exit 1
  [ "$RT" = 1.7 ] && { fetch_go && build_adapter || exit 1; }
  exit 0
fi
suite_main up scenarios

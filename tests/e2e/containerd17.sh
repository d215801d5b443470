#!/bin/bash
# nri-qos under an NRI-capable containerd: 1.7 (Debian trixie's 1.7.24, NRI 0.6) or 2.1 (Debian
# sid's 2.1.x, NRI 0.8), extracted with dpkg -x into $E2E_CACHE/<suite>-root (the system is not
# changed); or 2.2 / 2.3 (containerd v2.2.7, NRI 0.11; v2.3.4, NRI 0.12: static builds from
# ../shared/runtimes, which Debian does not package, unpacked into $E2E_CACHE/containerd-<v>-root
# and checked against their SHA256SUMS; SKIP when ../shared/runtimes is absent); with
# bookworm's runc, NRI enabled.
#
#   containerd17.sh native [1.7|2.1|2.2|2.3]  native NRI: build/nri-qos installed as
#                                     /opt/nri/plugins/10-nri-qos (the ttrpc relay)
#   containerd17.sh adapter           (1.7 only) v0.1 path: /opt/nri/bin/nri-qos listed in
#                                     /etc/nri/conf.json, driven by the TEST-ONLY v0.1 adapter
#                                     (adapter/main.go) in /opt/nri/plugins
#   containerd17.sh prepare [1.7|2.1|2.2|2.3] only fetch/extract the runtime, build the adapter (cache)
#   containerd17.sh down MODE [1.7|2.1|2.2|2.3]  clean up after an E2E_KEEP=1 run
#
# Result names: c17-native-*, c17-adapter-*, c21-native-*, c22-native-*, c23-native-*. Prints
# PASS/FAIL/SKIP lines on stdout (diagnostics on stderr); exit 1 if anything failed. Env:
# docs/e2e.md (E2E_CACHE, E2E_WORK, NRI_QOS_BIN, E2E_POLICY, E2E_KEEP=1, E2E_CGROUP_DRIVER,
# E2E_C21_SUITE = Debian suite of the 2.1 runtime, default sid; E2E_RUNTIMES = the folder of the
# 2.2/2.3 builds, default ../shared/runtimes beside the checkout).
# shellcheck disable=SC2034  # S, CTR, SHIM_PATH, OCI_CHECKS, OCI_OOM are read by lib.sh
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

MODE=${1:-native}
if [ "$MODE" = down ]; then MODE=${2:-native}; DOWN_ONLY=1; shift; fi
RT=${2:-1.7}
case $MODE/$RT in native/1.7|native/2.1|native/2.2|native/2.3|adapter/1.7|prepare/1.7|prepare/2.1|prepare/2.2|prepare/2.3) ;;
  *) echo "usage: $0 native [1.7|2.1|2.2|2.3] | adapter | prepare [1.7|2.1|2.2|2.3] | down MODE [1.7|2.1|2.2|2.3]" >&2; exit 2 ;;
esac
# SHARED_RT: the containerd build of ../shared/runtimes this suite runs ("" = a Debian package)
SHARED_RT=""
case $RT in
  1.7) DEB_SUITE=trixie; S=c17-$MODE; D=$E2E_WORK/containerd17-$MODE ;;
  2.1) DEB_SUITE=$C21_SUITE; S=c21-$MODE; D=$E2E_WORK/containerd21-$MODE; OCI_OOM=1 ;;
  2.2) SHARED_RT=2.2.7; S=c22-$MODE; D=$E2E_WORK/containerd22-$MODE; OCI_OOM=1 ;;
  2.3) SHARED_RT=2.3.4; S=c23-$MODE; D=$E2E_WORK/containerd23-$MODE; OCI_OOM=1 ;;
esac
# The external relay's supervisor (ext_start): a bash loop on the host, the .deb's systemd unit in
# the node VM, which listens where the unit connects: NRI's default socket.
EXT_SUPERVISOR=loop
if ! host_only && [ "$MODE" = native ]; then EXT_SUPERVISOR=systemd; E2E_NRI_SOCK=/var/run/nri/nri.sock; fi
if [ -n "$SHARED_RT" ]; then DEB_SUITE=""; RTROOT=$E2E_CACHE/containerd-$SHARED_RT-root; else RTROOT=$E2E_CACHE/$DEB_SUITE-root; fi
CONTAINERD=$RTROOT/usr/bin/containerd
CTR=$RTROOT/usr/bin/ctr
SHIM_PATH=$RTROOT/usr/bin                 # containerd finds containerd-shim-runc-v2 via PATH
TR=$E2E_CACHE/trixie-root                 # Go toolchain + NRI Go module for the adapter
ADAPTER=$E2E_CACHE/bin/v010-adapter

# containerd (+ shim, ctr) of the runtime's Debian suite. trixie's and sid's binaries run on
# bookworm's glibc; their runc does not (trixie's needs GLIBC_2.38), so bookworm's runc is used.
# 2.2/2.3: the static builds of $E2E_RUNTIMES/containerd-<v>/ (containerd, its runc shim, ctr;
# xz, SHA256SUMS of the binaries: its README), unpacked once into $RTROOT/usr/bin and checked.
# RT_WHY: why not, for the SKIP line.
RT_WHY=""
fetch_runtime() {
  if [ -n "$SHARED_RT" ]; then
    local src=$E2E_RUNTIMES/containerd-$SHARED_RT b
    [ -x "$CONTAINERD" ] && [ -x "$SHIM_PATH/containerd-shim-runc-v2" ] && [ -f "$RTROOT/.e2e-sha256" ] &&
      cmp -s "$RTROOT/.e2e-sha256" "$src/SHA256SUMS" 2>/dev/null && return 0
    [ -f "$src/SHA256SUMS" ] || { RT_WHY="no containerd v$SHARED_RT build: $src/SHA256SUMS absent (E2E_RUNTIMES, ../shared/runtimes beside the checkout)"; return 1; }
    rm -rf "$RTROOT"; mkdir -p "$RTROOT/usr/bin"
    for b in containerd containerd-shim-runc-v2 ctr; do
      if ! { xz -dc "$src/$b.xz" > "$RTROOT/usr/bin/$b" && chmod 755 "$RTROOT/usr/bin/$b"; }; then
        RT_WHY="cannot unpack $src/$b.xz"; return 1
      fi
    done
    (cd "$RTROOT/usr/bin" && sha256sum --quiet -c "$src/SHA256SUMS" >&2) ||
      { RT_WHY="containerd v$SHARED_RT binaries do not match $src/SHA256SUMS"; rm -rf "$RTROOT"; return 1; }
    cp "$src/SHA256SUMS" "$RTROOT/.e2e-sha256"
    return 0
  fi
  [ -x "$CONTAINERD" ] && [ -x "$SHIM_PATH/containerd-shim-runc-v2" ] && return 0
  debian_root "$DEB_SUITE" containerd && [ -x "$CONTAINERD" ] && return 0
  RT_WHY="cannot fetch Debian $DEB_SUITE's containerd (network or apt): $(tail -1 "$E2E_CACHE/$DEB_SUITE.err" 2>/dev/null)"
  return 1
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

# gostub built, or already there (the node VM has no Go: nodevm.sh stages the host's build)
gostub_ready() { # 0 ready; 1 (SKIP) no Go to build it with; 2 (FAIL) the build failed. Reason in GOSTUB_WHY.
  [ -x "$GOSTUB" ] && [ "$GOSTUB" -nt "$REPO/bench/gostub/main.go" ] && return 0
  fetch_go || { GOSTUB_WHY="cannot fetch trixie's Go packages for bench/gostub"; return 1; }
  build_gostub || { GOSTUB_WHY="bench/gostub build failed"; return 2; }
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
  fetch_runtime || { skip "$S" "$RT_WHY"; return 2; }
  if [ -n "$SHARED_RT" ]; then log "containerd: $("$CONTAINERD" --version) ($E2E_RUNTIMES/containerd-$SHARED_RT, checked against its SHA256SUMS)"
  else log "containerd: $("$CONTAINERD" --version) (Debian $DEB_SUITE $(debian_version "$DEB_SUITE" containerd))"; fi
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
# The relay's policy for the conflict scenario: the launched relay's conf.d file, or (EXTERNAL=1:
# the node VM's packaged service) the service's /etc/nri/nri-qos.toml, read per event.
conflict_policy() { if [ -n "${EXTERNAL:-}" ]; then install -m 0644 "$1" "$EXT_POLICY_FILE"; else set_native_policy "$1"; fi; }
# The external relay reconnects after containerd's restart: wait for its Synchronize.
conflict_restart() { # NAME WHAT
  local before; [ -n "${EXTERNAL:-}" ] && before=$(ext_syncs)
  stop_containerd; start_containerd || { fail "$1" "containerd did not restart $2"; return 1; }
  [ -z "${EXTERNAL:-}" ] && return 0
  ext_wait 60 "" "$before" >/dev/null || { fail "$1" "the relay did not reconnect after containerd's restart $2"; return 1; }
}
# the relay's recorder waits for containerd's log line, then writes: poll for its record
conflict_record() { # SEEN
  local rec _
  for _ in $(seq 1 40); do
    rec=$(tail -n +"$(($1 + 1))" "$E2E_EVENT_LOG" 2>/dev/null | jq -c 'select(.failure == "adjustment-rejected" and .pod == "conflict")' 2>/dev/null | tail -1)
    [ -n "$rec" ] && break
    sleep 0.5
  done
  echo "$rec"
}
native_plugin_conflict() {
  local name=$S-plugin-conflict msg rec before after st pol=$D/policy/leave.toml cpol=$D/policy/conflict.toml
  local g=0; gostub_ready || g=$?
  [ $g = 0 ] || { if [ $g = 2 ]; then fail "$name" "$GOSTUB_WHY"; else skip "$name" "$GOSTUB_WHY (the node VM: none staged)"; fi; return; }
  install -m 0755 "$GOSTUB" /opt/nri/plugins/05-gostub
  echo '{}' > /etc/nri/conf.d/05-gostub.conf
  sed "s|^\\[settings\\]\$|[settings]\\nmetrics_file = \"$PROM\"|" "$D/policy/nri-qos.toml" > "$cpol"
  conflict_policy "$cpol"
  conflict_restart "$name" "with 05-gostub" || return
  before=$(rejected_count); before=${before:-0}
  local seen; seen=$(wc -l < "$E2E_EVENT_LOG" 2>/dev/null || echo 0)   # records of earlier runs: not this one's
  if run_pod conflict conflict "$(kube_parent burstable)" "${RES[@]}" --label koordinator.sh/qosClass=BE; then
    fail "$name" "the pod started: containerd did not refuse two plugins setting CPU shares"
    stop_pod conflict
  else
    msg=$(first_error conflict); stop_pod conflict
    log "  CRI: $msg"
    # NRI v0.12 (2.3): the deprecation that 05-gostub's StateChange fallback records (nri-v012's control)
    [ "$RT" = 2.3 ] && { deprecations "$DEP_CONTROL" || log "  ctr deprecations list failed: $(head -c 300 "$DEP_CONTROL")"; }
    MISMATCH=""
    [[ $msg == *'both tried to set'* ]] || MISMATCH="CRI error is not containerd's ownership conflict: $msg"
    rec=$(conflict_record "$seen")
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
  if [ -n "${EXTERNAL:-}" ]; then
    # the node VM: the conflict only (leave-to-others is the host's), and its last scenario:
    # 05-gostub goes with containerd at teardown, no restart here (minutes under TCG)
    rm -f /opt/nri/plugins/05-gostub /etc/nri/conf.d/05-gostub.conf
    conflict_policy "$D/policy/nri-qos.toml"
    return
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
  # The scenarios after this one (required, v01-*) expect the test policy again: put its conf.d
  # file back and restart, as native_bundled does (found when they first ran after it in one suite).
  set_native_policy "$D/policy/nri-qos.toml"
  stop_containerd; start_containerd || fail "$S-setup" "containerd did not restart with the test policy"
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

# ---------------------------------------------------------------------------------------------
# The relay as an external NRI plugin (issue #20): `nri-qos relay --socket <containerd's NRI
# socket>` (nri_block: disable_connections = false), the shape of the packages'
# nri-qos-relay.service and of the DaemonSet's relay container. Its supervisor (EXT_SUPERVISOR):
#   loop     (the host, whose PID 1 is not systemd; the DaemonSet-style scenario everywhere):
#            `nri-qos relay --socket $D/nri.sock --policy FILE` under a bash loop that behaves like
#            systemd's Restart=always (RestartSec=1) or the kubelet restarting the DaemonSet's
#            container (ext_supervise);
#   systemd  (the node VM): the project's .deb ($E2E_DEB) installed with dpkg, its
#            nri-qos-relay.service enabled as docs/native-nri.md says (`nri-qos unregister
#            --native; systemctl enable --now nri-qos-relay`), unchanged: it connects to NRI's
#            default socket /var/run/nri/nri.sock (E2E_NRI_SOCK, where the suite's containerd
#            listens) and reads /etc/nri/nri-qos.toml, where the test policy is installed as an
#            operator edits that file; systemd restarts it. containerd runs as containerd.service
#            there (lib.sh ctd_unit_on), so that the relay's recorder finds the runtime's log
#            where it looks by default (journal:containerd). The package is purged afterwards.
# Its liveness is read from /run/nri-qos/relay.json (`nri-qos status --relay`), its metrics from
# nri_qos_relay.prom, its Synchronize passes from its log (file or journal). The launched relay
# (/opt/nri/plugins/10-nri-qos) is removed first: the runtime must never see two plugins 10-nri-qos.
EXT_LOG=$D/logs/ext-relay.log
EXT_SUP=$D/relay-sup.pid                 # the supervisor's pid (teardown_all kills it)
EXT_HOLD=$D/relay-hold                   # while it exists the supervisor does not restart the relay
EXT_STATUS=/run/nri-qos/relay.json       # the relay's state dir is the default one
EXT_RESTART_SEC=${EXT_RESTART_SEC:-1}
EXT_UNIT=nri-qos-relay.service
EXT_DROPIN=/run/systemd/system/$EXT_UNIT.d/50-nri-qos-e2e.conf   # the test's hold (ExecStartPre)
EXT_POLICY_FILE=/etc/nri/nri-qos.toml    # the packaged service's policy (its default --policy)
EXT_PKG=$D/pkg-installed                 # the suite installed the .deb (teardown purges it)
if [ "$EXT_SUPERVISOR" = systemd ]; then
  # packaging/deb/debian/rules: METRICS_FILE; the relay's textfile is nri_qos_relay.prom beside it
  EXT_METRICS=/var/lib/prometheus/node-exporter/nri_qos.prom
else
  EXT_METRICS=$D/metrics/nri_qos.prom    # the relay's textfile: $D/metrics/nri_qos_relay.prom
fi
EXT_CUR=$EXT_SUPERVISOR                  # the supervisor of the relay started last (ext_start)

ext_supervise() { # POLICY: Restart=always, RestartSec=$EXT_RESTART_SEC (runs until killed)
  while :; do
    while [ -e "$EXT_HOLD" ]; do sleep 0.2; done
    # shellcheck disable=SC2086 # EXT_RELAY_ENV, EXT_RELAY_ARGS: words (the unseen scenario's)
    env ${EXT_RELAY_ENV:-} "$NRI_QOS_BIN" relay --socket "$(nri_sock)" --policy "$1" --log-file "$EXT_LOG" \
      --metrics-file "$D/metrics/nri_qos.prom" ${EXT_KUBELET_STATE:+--kubelet-cpu-state "$EXT_KUBELET_STATE"} ${EXT_RELAY_ARGS:-} </dev/null >>"$EXT_LOG" 2>&1
    printf '[%(%T)T] supervisor: relay exited (status %s); restart in %s s\n' -1 "$?" "$EXT_RESTART_SEC" >>"$EXT_LOG"
    sleep "$EXT_RESTART_SEC"
  done
}
ext_main_pid() { systemctl show -P MainPID "$EXT_UNIT" 2>/dev/null; }
ext_start() { # POLICY [loop|systemd]
  EXT_CUR=${2:-$EXT_SUPERVISOR}
  rm -f "$EXT_HOLD"
  if [ "$EXT_CUR" = systemd ]; then
    install -m 0644 "$1" "$EXT_POLICY_FILE"
    systemctl enable --now "$EXT_UNIT" >&2 || log "  systemctl enable --now $EXT_UNIT failed"
    log "  external relay: $EXT_UNIT MainPID $(ext_main_pid), policy $1 (installed as $EXT_POLICY_FILE)"
    return
  fi
  mkdir -p "$D/metrics"
  ( exec 9>&-; ext_supervise "$1" ) </dev/null &   # fd 9 (the suite lock) is not inherited
  echo $! > "$EXT_SUP"
  log "  external relay: supervisor pid $(cat "$EXT_SUP"), policy $1"
}
ext_stop() { # the service or the supervisor, then every relay process on our socket (service, relay, keeper, zygote)
  [ -f "$EXT_PKG" ] && systemctl stop "$EXT_UNIT" 2>/dev/null
  local p; p=$(cat "$EXT_SUP" 2>/dev/null)
  [ -n "$p" ] && kill -9 "$p" 2>/dev/null
  rm -f "$EXT_SUP"
  # shellcheck disable=SC2046
  kill $(pids_with_arg "$(nri_sock)") 2>/dev/null
  local _; for _ in $(seq 1 30); do [ -z "$(pids_with_arg "$(nri_sock)")" ] && break; sleep 0.1; done
  # shellcheck disable=SC2046
  kill_pids $(pids_with_arg "$(nri_sock)")
}
rj() { jq -r "$1" "$EXT_STATUS" 2>/dev/null; }   # rj FILTER: the relay's liveness file
ext_log_text() { # the relay's log: its file, or the service's journal
  if [ "$EXT_CUR" = systemd ]; then journalctl -q -u "$EXT_UNIT" -o cat --no-pager 2>/dev/null
  else cat "$EXT_LOG" 2>/dev/null; fi
}
# Synchronize passes the relay logged (one summary line per pass: docs/native-nri.md)
ext_syncs() { local n; n=$(ext_log_text | grep -c 'Synchronize: [0-9]* pods, [0-9]* containers .*evaluated'); echo "${n:-0}"; }
# ext_wait SECONDS [NOT_PID] [SYNCS_BEFORE]: until `nri-qos status --relay` says up and
# registered, with a service pid other than NOT_PID, and more Synchronize passes logged than
# SYNCS_BEFORE. Prints the seconds it took; non-zero on timeout.
ext_wait() {
  local t=$1 not=${2:-} before=${3:-0} t0=$EPOCHREALTIME
  local end=$((SECONDS + t))
  while [ $SECONDS -lt $end ]; do
    if "$NRI_QOS_BIN" status --relay >/dev/null 2>&1 && [ "$(rj .pid)" != "$not" ] && [ "$(ext_syncs)" -gt "$before" ]; then
      awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }'; return 0
    fi
    sleep 0.2
  done
  log "  relay not back within $t s: $("$NRI_QOS_BIN" status --relay 2>&1 | head -1); $(ext_log_text | tail -3 | tr '\n' '|')"
  return 1
}
ext_running() {
  if [ "$EXT_CUR" = systemd ]; then systemctl is-active -q "$EXT_UNIT" 2>/dev/null
  else [ -n "$(cat "$EXT_SUP" 2>/dev/null)" ] && kill -0 "$(cat "$EXT_SUP")" 2>/dev/null; fi &&
    "$NRI_QOS_BIN" status --relay >/dev/null 2>&1
}
ext_ensure() { # NAME: an external relay on the test policy, registered
  EXT_CUR=$EXT_SUPERVISOR
  ext_running && return 0
  ext_pkg_install "$1" || return 1
  ext_stop; ext_start "$D/policy/nri-qos.toml"
  ext_wait 30 >/dev/null || { fail "$1" "the external relay did not register within 30 s"; return 1; }
}

# systemd: the .deb installed as an operator does it on a node (nothing to do for the loop). The
# c16 part of the node VM may have left a package behind: purged first. The test's drop-in
# holds a restart while $EXT_HOLD exists (an ExecStartPre that waits), the unit stays the package's.
ext_pkg_install() { # NAME
  [ "$EXT_SUPERVISOR" = systemd ] || return 0
  [ -f "$EXT_PKG" ] && return 0
  local deb=${E2E_DEB:-} log=$D/logs/dpkg.log rc=0
  if dpkg-query -W -f='${Status}' nri-qos 2>/dev/null | grep -q 'ok installed'; then
    log "  nri-qos $(dpkg-query -W -f='${Version}' nri-qos) already installed (left by an earlier suite): dpkg --purge"
    dpkg --purge nri-qos >&2
  fi
  rm -f "$EXT_POLICY_FILE"   # the node before the install: no policy of an earlier suite
  touch "$EXT_PKG"           # before dpkg: a half-done install is purged at teardown too
  DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" </dev/null >"$log" 2>&1 || rc=$?
  log "  dpkg -i $(basename "$deb") (exit $rc): $(tr '\n' '|' < "$log" | tail -c 800)"
  [ $rc = 0 ] || { fail "$1" "dpkg -i exited $rc: $(tail -2 "$log" | tr '\n' ' ')"; return 1; }
  # docs/native-nri.md: the service instead of the launched plugin (postinst registered one)
  log "  nri-qos unregister --native: $(/usr/sbin/nri-qos unregister --native 2>&1 | tr '\n' ' ')"
  # The package's reconcile timer (every 30 s) would restore what these scenarios want the
  # relay's Synchronize to restore: stopped, so that a value is the relay's own work.
  systemctl stop nri-qos-reconcile.timer 2>/dev/null
  mkdir -p "$(dirname "$EXT_DROPIN")"
  printf '[Service]\n# e2e (tests/e2e/containerd17.sh): a restart waits while %s exists\nExecStartPre=/bin/sh -c "while [ -e %s ]; do sleep 0.2; done"\nTimeoutStartSec=300\n' \
    "$EXT_HOLD" "$EXT_HOLD" > "$EXT_DROPIN"
  systemctl daemon-reload
}
ext_pkg_purge() {
  [ -f "$EXT_PKG" ] || return 0
  systemctl disable --now "$EXT_UNIT" >/dev/null 2>&1
  rm -f "$EXT_DROPIN"; rmdir "$(dirname "$EXT_DROPIN")" 2>/dev/null
  DEBIAN_FRONTEND=noninteractive dpkg --purge nri-qos >> "$D/logs/dpkg.log" 2>&1 || log "dpkg --purge nri-qos failed: $(tail -2 "$D/logs/dpkg.log" | tr '\n' ' ')"
  systemctl daemon-reload
  rm -f "$EXT_PKG"
  local left=""
  [ -e "/lib/systemd/system/$EXT_UNIT" ] && left="$left /lib/systemd/system/$EXT_UNIT"
  systemctl is-active -q "$EXT_UNIT" 2>/dev/null && left="$left (the service still runs)"
  [ -e /usr/sbin/nri-qos ] || [ -L /usr/sbin/nri-qos ] && left="$left /usr/sbin/nri-qos"
  log "  dpkg --purge nri-qos: left${left:- nothing}"
}
suite_teardown() { ext_pkg_purge; }   # lib.sh teardown_all
# `nri-qos status` knows the pod OUT and classes it CLASS (the memo written at Synchronize)
expect_status_class() { # OUT CLASS
  local got; got=$("$NRI_QOS_BIN" status --format json 2>/dev/null |
    jq -r --arg p "$1" '[.entries[] | select(.pod == $p) | "\(if .sandbox then "sandbox" else .container end)=\(.class)/\(.last_event)"] | join(" ")')
  log "  status: $1: ${got:-not listed}"
  case " $got " in *" sandbox=$2/"*" $1-c=$2/"*|*" $1-c=$2/"*" sandbox=$2/"*) ;;
    *) MISMATCH="${MISMATCH:+$MISMATCH; }nri-qos status: pod $1 is '${got:-not listed}', want sandbox and $1-c class $2" ;; esac
}
# kernel values of OUT before any nri-qos saw it (CRI's own: shares 512, no burst): a check
# that the scenario tests something
expect_untouched() { # OUT
  expect_knob "$1" ctr cpu.shares 512
  expect_knob "$1" ctr cpu.cfs_burst_us 0
}

# sync-existing: a BE and an LS pod start while no nri-qos is registered (CRI's values); then
# the external relay connects: its Synchronize gives them their class's values (kernel) and
# `status` lists them with their class (the memo rebuilt by the pass). systemd: the .deb is
# installed only now, on the node with the two pods running, then its service enabled.
ext_sync_existing() {
  local name=$S-sync-existing before
  EXT_CUR=$EXT_SUPERVISOR
  ext_stop
  start_or_fail "$name" sx-be burstable --label koordinator.sh/qosClass=BE || return
  start_or_fail "$name" sx-ls burstable || { stop_pod sx-be; return; }
  MISMATCH=""; expect_untouched sx-be; expect_untouched sx-ls
  [ -z "$MISMATCH" ] || { fail "$name" "before the relay (not CRI's values: is a plugin registered?): $MISMATCH"; stop_pod sx-be; stop_pod sx-ls; return; }
  if [ "$EXT_SUPERVISOR" = systemd ]; then
    ext_pkg_install "$name" || { stop_pod sx-be; stop_pod sx-ls; return; }
    MISMATCH=""; expect_untouched sx-be
    [ -z "$MISMATCH" ] || { fail "$name" "the install itself changed the pod (the service is not started by the package): $MISMATCH"; stop_pod sx-be; stop_pod sx-ls; return; }
  fi
  before=$(ext_syncs)
  ext_start "$D/policy/nri-qos.toml"
  local took; took=$(ext_wait 30 "" "$before") || { fail "$name" "the external relay did not register and synchronize within 30 s"; stop_pod sx-be; stop_pod sx-ls; return; }
  log "  registered and synchronized ${took} s after start: $(ext_log_text | grep 'Synchronize: [0-9]* pods' | tail -1)"
  await_knob sx-be ctr cpu.shares 2; await_knob sx-ls ctr cpu.cfs_burst_us 50000
  MISMATCH=""
  expect_be sx-be
  expect_ls sx-ls 50000 $((64 * MIB))
  expect_status_class sx-be BE
  expect_status_class sx-ls LS
  stop_pod sx-be; stop_pod sx-ls
  verdict "$name"
}

# unseen (issue #33 §4): a pod created while the relay's Synchronize request is open is reported
# to it neither in that Synchronize nor by an event (containerd/containerd#13698,
# cri-o/cri-o#10090); the relay service's unseen pass (reconcile --unseen through CRI) adopts it.
# The relay starts with its Synchronize evaluator held UNSEEN_HOLD_MS (NRI_QOS_TEST_SYNC_DELAY_MS;
# containerd's plugin_request_timeout is 2 s, the reply still comes by its deadline) and
# --unseen-interval UNSEEN_S, while BE pods are created back to back (us-1..N; us-0 runs before,
# so that the Synchronize has an item to hold). Wanted: at least one pod's sandbox or container is
# adopted by the pass (event-log event "unseen": the hole happened; without it the scenario
# retries, then SKIPs "not reproduced" — still checking every pod's BE values), every pod has the BE values in the kernel no later than
# UNSEEN_S + 6 s after the Synchronize reply, and `status` lists each with class BE.
# Why this reproduces only sometimes (tried 2026-11-29, not kept): the hold does not widen the
# hole on containerd 2.2/2.3. Their CRI createContainer holds the NRI plugin-sync block
# (BlockPluginSync, a read lock of containerd/nri pkg/adaptation syncLock) from NewContainer (the
# NRI CreateContainer call) to its return, and a registering plugin's Synchronize takes it for
# writing until the plugin is in the plugin list (adaptation.go acceptPluginConnections:
# requestPluginSync .. finishedPluginSync). Six pods whose sandboxes ran first and whose
# CreateContainer was sent inside the held Synchronize (criclient held until the relay logged
# the hold; the relay's timestamps confirmed 6 of 6 each try, 3 tries each on 2.3.4 and 2.2.7)
# all waited for it (CreateContainer 1.6-1.8 s) and were classified by their own events. What is
# left, by our reading (not verified), is the pod sandbox path: internal/cri/server/sandbox_run.go
# calls NRI RunPodSandbox before it marks the sandbox ready and adds it to the store that a
# Synchronize lists, a narrow gap that pods started while the relay registers hit by chance.
# A pod whose container the Synchronize lists CREATED is not in that hole (it is in the pass, and
# its StartContainer reaches the relay): at load 3 us-3-1 was such a pod and kept CRI's values
# with records that said BE; that case is sync-created below, and such a pod is "not adopted".
UNSEEN_S=${UNSEEN_S:-12}
UNSEEN_HOLD_MS=${UNSEEN_HOLD_MS:-1300}
ext_unseen() {
  local name=$S-unseen try before t_sync took pods="" p i ids adopted="" lp
  [ "$EXT_SUPERVISOR" = systemd ] && { skip "$name" "the node VM's relay is the packaged service: no test setting slows its Synchronize there"; return; }
  [ -x "$(dirname "$NRI_QOS_BIN")/nri-qos-cri" ] || { fail "$name" "no $(dirname "$NRI_QOS_BIN")/nri-qos-cri (make all)"; return; }
  for try in 1 2 3; do
    ext_stop
    start_or_fail "$name" us-0 burstable --label koordinator.sh/qosClass=BE || return
    before=$(ext_syncs)
    EXT_RELAY_ENV="NRI_QOS_TEST_SYNC_DELAY_MS=$UNSEEN_HOLD_MS"
    EXT_RELAY_ARGS="--unseen-interval $UNSEEN_S --cri-socket unix://$D/containerd.sock"
    pods=""
    # six CRI clients 0.5 s apart; the relay starts as soon as containerd logs the first one's
    # RunPodSandbox (the client's own start-up takes seconds on a loaded host), so that the pods'
    # CRI calls spread over the relay's registration and its held Synchronize
    lp=""
    local ctd_lines; ctd_lines=$(wc -l < "$D/logs/containerd.log")
    for i in 1 2 3 4 5 6; do
      ( sleep "$(awk -v i="$i" 'BEGIN { print (i - 1) * 0.5 }')"
        run_pod "us-$try-$i" "us-$try-$i" "$(kube_parent burstable)" "${RES[@]}" --label koordinator.sh/qosClass=BE ) &
      lp="$lp $!"
    done
    local end=$((SECONDS + 30))
    until tail -n +"$((ctd_lines + 1))" "$D/logs/containerd.log" | grep -q "RunPodSandbox for name:..us-$try-1[^0-9]" || [ $SECONDS -ge $end ]; do sleep 0.05; done
    ext_start "$D/policy/nri-qos.toml"
    # shellcheck disable=SC2086
    ext_wait 30 "" "$before" >/dev/null || { wait $lp; fail "$name" "the external relay did not register and synchronize within 30 s"; EXT_RELAY_ENV=""; EXT_RELAY_ARGS=""; ext_stop; return; }
    t_sync=$EPOCHREALTIME
    log "  try $try: synchronized: $(ext_log_text | grep -E 'NRI_QOS_TEST_SYNC_DELAY_MS|Synchronize: [0-9]* pods' | tail -2 | tr '\n' '|')"
    # shellcheck disable=SC2086
    wait $lp
    for i in 1 2 3 4 5 6; do
      p=us-$try-$i
      if [ "$(j "$p" .ok)" = true ]; then pods="$pods $p"; else log "  $p: CRI: $(first_error "$p")"; stop_pod "$p"; fi
    done
    # every pod classified within the interval (+6 s: the pass itself, a loaded host)
    for p in $pods; do await_knob "$p" ctr cpu.shares 2 $((UNSEEN_S + 8)); done
    took=$(awk -v a="$t_sync" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    adopted=""
    for p in $pods; do
      ids=$(j "$p" '.pod_id, .ctr_id')
      for i in $ids; do
        [ -n "$(last_record "$i" unseen)" ] && adopted="$adopted $p"
      done
    done
    log "  try $try: pods$pods; adopted by the unseen pass:${adopted:- none}; all checked ${took} s after the Synchronize; relay log:" \
        "$(ext_log_text | grep -E 'unseen|adopted' | tail -6 | tr '\n' '|')"
    [ -n "$adopted" ] && break
    [ "$try" = 3 ] && break   # the last try's pods stay: their BE values are checked below
    for p in $pods; do stop_pod "$p"; done
    stop_pod us-0
  done
  MISMATCH=""
  if [ -z "$adopted" ]; then
    # the runtime reported every pod (its own timing, e.g. containerd 2.2.7 on a loaded host):
    # nothing for the pass to do, but every pod must still have its class
    for p in $pods; do expect_be "$p"; done
    if [ -z "$MISMATCH" ]; then
      skip "$name" "not reproduced: in 3 tries the runtime reported every pod created around the held Synchronize (all BE by their own events); the pass itself: $S-unseen-forgotten"
    else verdict "$name"; fi
  else
    for p in $pods; do expect_be "$p"; expect_status_class "$p" BE; done
    # the adoption found CRI's values (a pod no event had classified), and its record says so
    for p in $adopted; do
      local r; r=$(last_record "$(j "$p" .ctr_id)" unseen)
      [ -z "$r" ] || jq -e '.outcome == "ok" and .class == "BE"' <<<"$r" >/dev/null || MISMATCH="${MISMATCH:+$MISMATCH; }$p: unseen record $r"
      log "  $p: unseen record: $(jq -c '{event, class, outcome, drift}' <<<"${r:-null}")"
    done
    [ "$(rj .unseen.passes)" -gt 0 ] 2>/dev/null && [ "$(rj .unseen.last_status)" = 0 ] ||
      MISMATCH="${MISMATCH:+$MISMATCH; }relay.json unseen: $(jq -c .unseen "$EXT_STATUS" 2>/dev/null)"
    log "  relay.json unseen: $(jq -c .unseen "$EXT_STATUS" 2>/dev/null)"
    awk -v t="$took" -v i="$UNSEEN_S" 'BEGIN { exit !(t <= i + 8) }' || MISMATCH="${MISMATCH:+$MISMATCH; }classified ${took} s after the Synchronize (interval $UNSEEN_S s)"
    verdict "$name"
  fi
  # shellcheck disable=SC2086 # pods: words
  set -- $pods
  if [ $# -gt 0 ]; then ext_unseen_forgotten "$S-unseen-forgotten" "$1"
  else fail "$S-unseen-forgotten" "no pod of the unseen scenario ran (CRI errors above)"; fi
  for p in $pods; do stop_pod "$p"; done
  stop_pod us-0
  EXT_RELAY_ENV=""; EXT_RELAY_ARGS=""
  ext_stop   # the next scenario's relay has neither the test hold nor this interval
}

# unseen-forgotten (issue #33 §4): the unseen pass on a real containerd, whether or not the race
# above happened. containerd 2.2/2.3 hold a CreateContainer until a registering plugin has
# synchronized (see above), so the hole is not reproducible at will; a pod whose records the relay
# does not have is what the hole leaves, and the pass decides by those records alone
# (cli/discover.cpp plan_unseen: the ids of the state dir's last/ records). So: one running BE pod
# of the scenario loses its records (last/<sandbox>/ in the relay's state dir) and its container's
# cpu weight goes back to a non-BE value, as a pod no event classified has it. Wanted: within the
# pass interval (+8 s) the pass lists it through CRI, classifies it BE from CRI's labels, writes
# the BE values (cpu.shares 2), records a new event-log record "unseen" (outcome ok, class BE) and
# its last records again, and `status` lists it as BE.
unseen_records() { jq -c --arg id "$1" 'select(.id == $id and .event == "unseen")' "$E2E_EVENT_LOG" 2>/dev/null | grep -c .; }  # ID: how many
ext_unseen_forgotten() { # NAME POD (the relay runs with --unseen-interval UNSEEN_S)
  local name=$1 p=$2 sb ctr st=/run/nri-qos dir f n0 n1 r t0 took
  MISMATCH=""
  sb=$(j "$p" .pod_id); ctr=$(j "$p" .ctr_id); dir=$st/last/$sb
  if [ ! -f "$dir/$ctr.json" ]; then fail "$name" "$p: no last record $dir/$ctr.json (the relay records each container it classifies)"; return; fi
  n0=$(unseen_records "$ctr")
  cg_prime "$p"
  if [ "$LAYOUT" = v1 ]; then f=$(cg_dir "$p" ctr cpu.shares)/cpu.shares; echo 1024 > "$f"
  else f=$(cg_dir "$p" ctr cpu.shares)/cpu.weight; echo 39 > "$f"; fi
  rm -rf "$dir"
  t0=$EPOCHREALTIME
  log "  $p: forgot its records ($dir), set $f to $(cat "$f")"
  await_knob "$p" ctr cpu.shares 2 $((UNSEEN_S + 8))
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  expect_be "$p"
  expect_status_class "$p" BE
  [ -f "$dir/$ctr.json" ] || MISMATCH="${MISMATCH:+$MISMATCH; }no last record $dir/$ctr.json after the pass"
  n1=$(unseen_records "$ctr")
  r=$(last_record "$ctr" unseen)
  if [ "$n1" -gt "$n0" ] && jq -e '.outcome == "ok" and .class == "BE"' <<<"$r" >/dev/null; then
    log "  $p: unseen record after ${took} s: $(jq -c '{event, class, outcome}' <<<"$r")"
  else MISMATCH="${MISMATCH:+$MISMATCH; }no new unseen record for $ctr ($n0 -> $n1): ${r:-none}"; fi
  log "  relay.json unseen: $(jq -c .unseen "$EXT_STATUS" 2>/dev/null)"
  verdict "$name"
}

# sync-created (issue #33 §4; found by c23-native-unseen at load 3, try 3: us-3-1 kept CRI's
# cpu.shares 512 and oom_score_adj 0 with records that said BE, so the unseen pass left it): a
# container the relay's Synchronize lists in state CREATED was created without nri-qos's
# CreateContainer adjustment, the pass's ContainerUpdate changes only its spec (containerd
# internal/cri/server/container_update_resources.go updateContainerResources: task.Update only
# when RUNNING), and CRI StartContainer makes the task before it waits for the plugin sync
# (container_start.go: NewTask, then BlockPluginSync). ContainerUpdate has no oom_score_adj, and
# the pass has no pid to write it to. So: a BE pod's container created while no nri-qos is
# registered, started while the relay's Synchronize is held (NRI_QOS_TEST_SYNC_DELAY_MS): its task
# gets CRI's values. Wanted: the BE values in the kernel (cpu.shares 2, oom_score_adj 1000),
# written by the relay at its StartContainer (the relay's "unadjusted" input; record
# StartContainer, ok, BE, cpu.shares and oom_score_adj applied), and `status` lists it as BE.
# Old code: cpu.shares 512 (or 2 when the start came after the update) and oom_score_adj 0.
# Not on 1.7 (C17_ELSEWHERE): containerd 1.7 has no plugin-sync block, so a StartContainer during
# the pass does not reach the relay at all.
ext_sync_created() {
  local name=$S-sync-created go=$D/sc-go lp before lines ctd_lines end ctr r
  [ "$EXT_SUPERVISOR" = systemd ] && { skip "$name" "the node VM's relay is the packaged service: no test setting slows its Synchronize there"; return; }
  ext_stop
  rm -f "$go"
  ctd_lines=$(wc -l < "$D/logs/containerd.log")
  run_pod sc-be sc-be "$(kube_parent burstable)" "${RES[@]}" --label koordinator.sh/qosClass=BE --start-when "$go" &
  lp=$!
  end=$((SECONDS + 60))
  until tail -n +"$((ctd_lines + 1))" "$D/logs/containerd.log" | grep -q 'for name:..sc-be-c.. returns container id' || [ $SECONDS -ge $end ]; do sleep 0.1; done
  before=$(ext_syncs); lines=$(ext_log_text | wc -l)
  EXT_RELAY_ENV="NRI_QOS_TEST_SYNC_DELAY_MS=$UNSEEN_HOLD_MS"
  ext_start "$D/policy/nri-qos.toml"
  end=$((SECONDS + 30))
  until ext_log_text | tail -n +"$((lines + 1))" | grep -q 'NRI_QOS_TEST_SYNC_DELAY_MS: waiting' || [ $SECONDS -ge $end ]; do sleep 0.05; done
  touch "$go"   # StartContainer while the Synchronize is held
  if ! ext_wait 30 "" "$before" >/dev/null; then
    wait $lp; fail "$name" "the external relay did not register and synchronize within 30 s"
    stop_pod sc-be; EXT_RELAY_ENV=""; ext_stop; rm -f "$go"; return
  fi
  wait $lp || { fail "$name" "CRI: $(first_error sc-be)"; stop_pod sc-be; EXT_RELAY_ENV=""; ext_stop; rm -f "$go"; return; }
  ctr=$(j sc-be .ctr_id)
  log "  sc-be: $(ext_log_text | tail -n +"$((lines + 1))" | grep -E 'NRI_QOS_TEST_SYNC_DELAY_MS|Synchronize: [0-9]* pods|CREATED in this' | tr '\n' '|')"
  log "  sc-be: containerd: $(tail -n +"$((ctd_lines + 1))" "$D/logs/containerd.log" | grep -E "StartContainer for ..$ctr|synchronizing plugin|connected and synchronized" | sed 's/^time="[^T]*T\([^Z]*\)Z" level=[a-z]* msg=/\1 /' | cut -c1-110 | tr '\n' '|')"
  MISMATCH=""
  await_knob sc-be ctr cpu.shares 2 5
  expect_be sc-be
  expect_status_class sc-be BE
  r=$(last_record "$ctr" StartContainer)
  log "  sc-be: StartContainer record: $(jq -c '{class, outcome, applied, failed}' <<<"${r:-null}")"
  jq -e '.outcome == "ok" and .class == "BE" and (.applied | test("cpu.shares=2")) and (.applied | test("oom_score_adj=1000"))' <<<"$r" >/dev/null ||
    MISMATCH="${MISMATCH:+$MISMATCH; }StartContainer record of $ctr does not say cpu.shares=2 and oom_score_adj=1000 applied: ${r:-none}"
  verdict "$name"
  stop_pod sc-be
  EXT_RELAY_ENV=""; rm -f "$go"
  ext_stop   # the next scenario's relay has no test hold
}

# relay-back: kill -9 the relay service; the supervisor holds the restart while a BE pod is
# created (no nri-qos registered: CRI's values), then lets it go; within 30 s of the kill the
# relay is registered again (status --relay, containerd's log) and its Synchronize has given the
# gap pod the BE values.
ext_relay_back() {
  local name=$S-relay-back old rp before t0 took reg0 nr0="" held
  ext_ensure "$name" || return
  old=$(rj .pid); rp=$(rj .relay_pid); before=$(ext_syncs); reg0=$(grep -c 'registered as \\\?"10-nri-qos' "$D/logs/containerd.log")
  if [ "$EXT_CUR" = systemd ]; then
    nr0=$(systemctl show -P NRestarts "$EXT_UNIT")
    [ "$(ext_main_pid)" = "$old" ] || log "  relay.json pid $old is not $EXT_UNIT's MainPID $(ext_main_pid)"
  fi
  touch "$EXT_HOLD"
  t0=$EPOCHREALTIME
  kill -9 "$old"
  # its connected relay follows (PR_SET_PDEATHSIG): the runtime has no nri-qos from then on
  local _; for _ in $(seq 1 50); do kill -0 "$rp" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$rp" 2>/dev/null && log "  the relay $rp of the killed service $old still runs"
  log "  killed the relay service $old (kill -9; its relay $rp gone); relay.json: $("$NRI_QOS_BIN" status --relay 2>&1 | head -1)"
  if ! start_or_fail "$name" rb-gap burstable --label koordinator.sh/qosClass=BE; then rm -f "$EXT_HOLD"; return; fi
  MISMATCH=""; expect_untouched rb-gap
  [ -z "$MISMATCH" ] || { fail "$name" "the gap pod was classified while no relay ran: $MISMATCH"; rm -f "$EXT_HOLD"; stop_pod rb-gap; return; }
  held=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  rm -f "$EXT_HOLD"
  ext_wait 30 "$old" "$before" >/dev/null
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  await_knob rb-gap ctr cpu.shares 2
  log "  back after ${took} s (from the kill; the restart was held ${held} s while the gap pod was created):" \
      "$("$NRI_QOS_BIN" status --relay 2>&1 | head -1)"
  MISMATCH=""
  "$NRI_QOS_BIN" status --relay >/dev/null 2>&1 && [ "$(rj .pid)" != "$old" ] || MISMATCH="not registered again: $("$NRI_QOS_BIN" status --relay 2>&1 | head -1)"
  if [ "$EXT_CUR" = systemd ]; then
    # systemd brought it back (Restart=always): one more restart, its new MainPID is the service
    # in relay.json. Under TCG creating the gap pod alone takes longer than 30 s: the 30 s count
    # from the moment the test stopped holding the restart.
    local nr1 mp; nr1=$(systemctl show -P NRestarts "$EXT_UNIT"); mp=$(ext_main_pid)
    log "  systemd: NRestarts $nr0 -> $nr1, MainPID $old -> $mp ($(readlink "/proc/$mp/exe"))"
    [ "$nr1" -gt "$nr0" ] 2>/dev/null || MISMATCH="${MISMATCH:+$MISMATCH; }systemd did not restart $EXT_UNIT (NRestarts $nr0 -> $nr1)"
    [ "$mp" = "$(rj .pid)" ] || MISMATCH="${MISMATCH:+$MISMATCH; }MainPID $mp is not relay.json's service pid $(rj .pid)"
    awk -v t="$took" -v h="$held" 'BEGIN { exit !(t - h <= 30) }' || MISMATCH="${MISMATCH:+$MISMATCH; }back $took s after the kill, $held s of it held (> 30 s)"
  else
    awk -v t="$took" 'BEGIN { exit !(t <= 30) }' || MISMATCH="${MISMATCH:+$MISMATCH; }back after $took s (> 30 s)"
  fi
  [ "$(grep -c 'registered as \\\?"10-nri-qos' "$D/logs/containerd.log")" -gt "$reg0" ] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }containerd did not log a new registration of 10-nri-qos"
  log "  containerd: $(grep -o 'plugin [^ ]* registered as [^ ]*' "$D/logs/containerd.log" | tail -1)"
  expect_be rb-gap
  expect_status_class rb-gap BE
  stop_pod rb-gap
  verdict "$name"
}

# relay-back-child: kill -9 of the connected relay process alone (the service stays, as when an
# evaluation bug or the OOM killer takes the relay): the service connects again by itself (back-off
# 0.5 s), with the same service pid, one more reconnect and a new Synchronize.
ext_relay_child_back() {
  local name=$S-relay-back-child svc rp rc0 before took
  ext_ensure "$name" || return
  svc=$(rj .pid); rp=$(rj .relay_pid); rc0=$(rj .reconnects); before=$(ext_syncs)
  kill -9 "$rp"
  took=$(ext_wait 30 "" "$before") || { fail "$name" "not registered again within 30 s of killing relay $rp"; return; }
  log "  killed relay $rp of service $svc; back after ${took} s: $("$NRI_QOS_BIN" status --relay 2>&1 | head -1)"
  MISMATCH=""
  [ "$(rj .pid)" = "$svc" ] || MISMATCH="service pid $svc -> $(rj .pid) (the service itself restarted)"
  [ "$(rj .relay_pid)" != "$rp" ] || MISMATCH="${MISMATCH:+$MISMATCH; }relay pid unchanged ($rp)"
  [ "$(rj .reconnects)" -gt "$rc0" ] 2>/dev/null || MISMATCH="${MISMATCH:+$MISMATCH; }reconnects $rc0 -> $(rj .reconnects)"
  verdict "$name"
}

# containerd-restart: with the external relay registered and a BE pod classified by its events,
# cpu.shares is put back to CRI's value by hand; containerd restarts; the relay reconnects (the
# reconnect counter in relay.json and the metrics goes up) and its Synchronize restores the value.
ext_containerd_restart() {
  local name=$S-containerd-restart rc0 before f rc1 m
  ext_ensure "$name" || return
  start_or_fail "$name" cr-be burstable --label koordinator.sh/qosClass=BE || return
  MISMATCH=""; expect_knob cr-be ctr cpu.shares 2
  [ -z "$MISMATCH" ] || { fail "$name" "not classified at its events: $MISMATCH"; stop_pod cr-be; return; }
  f=$(cg_dir cr-be ctr cpu.shares)/cpu.shares; [ "$LAYOUT" = v2 ] && f=$(cg_dir cr-be ctr)/cpu.weight
  want_knob cpu.shares 512 > "$f"
  log "  reset by hand: $f = $(cat "$f")"
  rc0=$(rj .reconnects); before=$(ext_syncs)
  stop_containerd; start_containerd || { fail "$name" "containerd did not restart"; stop_pod cr-be; return; }
  local took; took=$(ext_wait 30 "" "$before") || { fail "$name" "no reconnect + Synchronize within 30 s of containerd's start"; stop_pod cr-be; return; }
  await_knob cr-be ctr cpu.shares 2
  rc1=$(rj .reconnects)
  m=$(sed -n 's/^nri_qos_relay_reconnects_total //p' "$(dirname "$EXT_METRICS")/nri_qos_relay.prom" 2>/dev/null)
  log "  reconnected ${took} s after containerd started: reconnects $rc0 -> $rc1 (metrics: ${m:-none});" \
      "$(ext_log_text | grep 'Synchronize: [0-9]* pods' | tail -1)"
  MISMATCH=""
  [ "$rc1" -gt "$rc0" ] 2>/dev/null || MISMATCH="relay.json reconnects $rc0 -> $rc1"
  [ "$m" = "$rc1" ] || MISMATCH="${MISMATCH:+$MISMATCH; }nri_qos_relay_reconnects_total '${m}' != relay.json's $rc1"
  expect_be cr-be
  stop_pod cr-be
  verdict "$name"
}

# deb-upgrade (systemd only): `dpkg -i $E2E_DEB_UPGRADE` (the same build repacked as a higher
# version: nodevm.sh stage_deb) while the service serves. The package restarts the service
# (dh_installsystemd --restart-after-upgrade): a new MainPID whose /proc/PID/exe is the upgraded
# package's /opt/nri/bin/nri-qos (same inode; not "(deleted)"), registered and synchronized again
# within 30 s; the upgrade's postinst (`nri-qos register`) must not install the launched plugin
# beside the service (the runtime would see two 10-nri-qos at its next start); the next BE pod
# gets every BE value.
ext_deb_upgrade() {
  local name=$S-deb-upgrade deb=${E2E_DEB_UPGRADE:-} log=$D/logs/dpkg-upgrade.log old before v0 v1 rc=0 new exe took
  [ -n "$deb" ] && [ -f "$deb" ] || { skip "$name" "no upgrade .deb staged (nodevm.sh stage_deb: make deb)"; return; }
  ext_ensure "$name" || return
  old=$(ext_main_pid); before=$(ext_syncs); v0=$(dpkg-query -W -f='${Version}' nri-qos)
  DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" </dev/null >"$log" 2>&1 || rc=$?
  log "  dpkg -i $(basename "$deb") (exit $rc): $(tr '\n' '|' < "$log" | tail -c 800)"
  systemctl stop nri-qos-reconcile.timer 2>/dev/null   # started again by the upgrade (ext_pkg_install)
  took=$(ext_wait 30 "$old" "$before") || took=""
  new=$(ext_main_pid); exe=$(readlink "/proc/$new/exe" 2>/dev/null); v1=$(dpkg-query -W -f='${Version}' nri-qos)
  log "  nri-qos $v0 -> $v1; $EXT_UNIT MainPID $old -> $new, exe $exe; registered again after ${took:-?} s: $("$NRI_QOS_BIN" status --relay 2>&1 | head -1)"
  MISMATCH=""
  [ $rc = 0 ] || MISMATCH="dpkg -i exited $rc"
  [ "$v1" = "$(dpkg-deb -f "$deb" Version)" ] || MISMATCH="${MISMATCH:+$MISMATCH; }installed version $v1, not $(dpkg-deb -f "$deb" Version)"
  [ -n "$took" ] || MISMATCH="${MISMATCH:+$MISMATCH; }not registered and synchronized again within 30 s"
  [ -n "$new" ] && [ "$new" != 0 ] && [ "$new" != "$old" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the service was not restarted (MainPID $old -> $new)"
  [ "$(rj .pid)" = "$new" ] || MISMATCH="${MISMATCH:+$MISMATCH; }relay.json's service pid $(rj .pid) is not MainPID $new"
  if [[ $exe == *deleted* ]] || [ "$(stat -Lc %d:%i "/proc/$new/exe" 2>/dev/null)" != "$(stat -Lc %d:%i /opt/nri/bin/nri-qos 2>/dev/null)" ]; then
    MISMATCH="${MISMATCH:+$MISMATCH; }the service runs '$exe', not the upgraded /opt/nri/bin/nri-qos"
  fi
  if [ -e "$RELAY" ] || [ -L "$RELAY" ]; then
    MISMATCH="${MISMATCH:+$MISMATCH; }the upgrade installed the launched plugin $RELAY -> $(readlink "$RELAY") beside the running service"
    rm -f "$RELAY"
  fi
  if start_or_fail "$name" du-be burstable --label koordinator.sh/qosClass=BE; then
    expect_be du-be
    stop_pod du-be
    verdict "$name"
  fi
}

# daemonset-style: the relay's policy is a file in a directory laid out as the kubelet mounts a
# ConfigMap (nri-qos.toml -> ..data/nri-qos.toml, ..data -> ..<timestamp>/), updated the way the
# kubelet does it (a new timestamped directory, a ..data_tmp symlink renamed over ..data). A BE pod
# gets cpu.shares 2; after the edit (BE cpu_shares 64) the next BE pod gets 64, from the same relay
# process (no restart).
# The relay runs as the DaemonSet's relay container starts it (deploy/kubernetes/install.sh relay:
# --kubelet-cpu-state at kubelet's checkpoint in the node's kubelet directory, issue #30 §3). On
# the cgroup v1 host: while that directory is out of sight (a DaemonSet that does not mount it),
# kubelet's exclusive CPUs are unknown and a pod-written cpuset (resource-status, within the pod's
# quota, class PIN of a rule the scenario puts first) is refused, not pinned; once the directory is there without a checkpoint (no
# CPU manager) the same pod is pinned.
cm_publish() { # DIR POLICY-FILE VERSION: kubelet's atomic writer, as far as the reader can tell
  local dir=$1 ts=..2026_11_27_00_00_0$3.e2e old
  mkdir -p "$dir/$ts"; cp "$2" "$dir/$ts/nri-qos.toml"
  old=$(readlink "$dir/..data" 2>/dev/null)
  ln -sfn "$ts" "$dir/..data_tmp" && mv -T "$dir/..data_tmp" "$dir/..data"
  [ -L "$dir/nri-qos.toml" ] || ln -s ..data/nri-qos.toml "$dir/nri-qos.toml"
  [ -n "$old" ] && [ "$old" != "$ts" ] && rm -rf "${dir:?}/$old"
  return 0
}
ext_daemonset() {
  local name=$S-daemonset-style cm=$D/configmap pid
  rm -rf "$cm"; mkdir -p "$cm"
  # the suite's policy with a first rule for the pin pods: label e2e.nri-qos/class=pin → class PIN,
  # koordlet's cpuset from resource-status (koordinator.cpuset, untrusted: applied within the quota)
  awk '!done && /^\[\[rules\]\]/ { print "[[rules]]\nname = \"e2e-pin\"\nclass = \"PIN\"\nmatch.labels = { \"e2e.nri-qos/class\" = \"pin\" }\n"; done = 1 } { print }' \
    "$D/policy/nri-qos.toml" > "$D/policy/ds.toml"
  printf '\n[classes.PIN.container]\ncpuset_cpus = { fact = "koordinator.cpuset" }\n' >> "$D/policy/ds.toml"
  "$NRI_QOS_BIN" check "$D/policy/ds.toml" >/dev/null 2>&1 || { fail "$name" "could not derive the policy with the pin rule"; return; }
  sed 's/^cpu_shares = 2 .*/cpu_shares = 64/' "$D/policy/ds.toml" > "$D/policy/edited.toml"
  grep -q '^cpu_shares = 64$' "$D/policy/edited.toml" || { fail "$name" "could not derive the edited policy"; return; }
  cm_publish "$cm" "$D/policy/ds.toml" 1
  rm -rf "$D/kubelet"
  ext_stop; EXT_KUBELET_STATE=$D/kubelet/cpu_manager_state ext_start "$cm/nri-qos.toml" loop   # the DaemonSet's container: restarted by the kubelet, not systemd
  ext_wait 30 >/dev/null || { fail "$name" "the external relay did not register within 30 s"; return; }
  pid=$(rj .relay_pid)
  start_or_fail "$name" ds-before burstable --label koordinator.sh/qosClass=BE || return
  MISMATCH=""; expect_knob ds-before ctr cpu.shares 2
  stop_pod ds-before
  [ -z "$MISMATCH" ] || { fail "$name" "before the edit: $MISMATCH"; return; }
  if [ "$LAYOUT" = v1 ]; then
    local pin=(--label e2e.nri-qos/class=pin --annotation 'scheduling.koordinator.sh/resource-status={"cpuset":"1"}' --cpu-quota 100000)
    start_or_fail "$name" ds-pin-unknown burstable "${pin[@]}" || return
    local got; got=$(read_knob ctr ds-pin-unknown cpuset.cpus)
    log "  ds-pin-unknown: ctr cpuset.cpus = $got (kubelet's directory $D/kubelet out of sight: not 1)"
    [ "$got" != 1 ] || MISMATCH="kubelet's exclusive CPUs unknown, yet the pod-written cpuset 1 was pinned"
    stop_pod ds-pin-unknown
    mkdir -p "$D/kubelet"
    start_or_fail "$name" ds-pin-none burstable "${pin[@]}" || return
    expect_knob ds-pin-none ctr cpuset.cpus 1
    stop_pod ds-pin-none
    rm -rf "$D/kubelet"
    [ -z "$MISMATCH" ] || { fail "$name" "kubelet's checkpoint: $MISMATCH"; return; }
  fi
  cm_publish "$cm" "$D/policy/edited.toml" 2
  log "  ConfigMap updated: ..data -> $(readlink "$cm/..data"); $(grep -c '^cpu_shares = 64$' "$cm/nri-qos.toml") line(s) 'cpu_shares = 64'"
  start_or_fail "$name" ds-after burstable --label koordinator.sh/qosClass=BE || return
  MISMATCH=""
  expect_knob ds-after ctr cpu.shares 64
  [ "$(rj .relay_pid)" = "$pid" ] || MISMATCH="${MISMATCH:+$MISMATCH; }the relay restarted (pid $pid -> $(rj .relay_pid))"
  stop_pod ds-after
  verdict "$name"
}

# sync-launched: the same for the launched relay (/opt/nri/plugins) installed on a node whose BE
# pod already runs, then a containerd restart (what the packages' `register --native` asks for).
# NRI 0.8+ (containerd 2.x) synchronizes launched plugins at start-up; NRI 0.6 (containerd
# 1.7.0-1.7.25) does not (docs/native-nri.md): there the pod keeps CRI's values until the
# external relay (sync-existing) or `nri-qos reconcile`, so 1.7 reports SKIP with that reason.
native_sync_launched() {
  local name=$S-sync-launched n
  if [ "$RT" = 1.7 ]; then
    skip "$name" "containerd 1.7.24 (NRI 0.6) does not synchronize launched plugins at start-up: covered by the external relay's sync-existing"
    return
  fi
  stop_containerd; rm -f "$RELAY"
  start_containerd || { fail "$name" "containerd did not start without the relay"; return; }
  if start_or_fail "$name" sl-be burstable --label koordinator.sh/qosClass=BE; then
    MISMATCH=""; expect_untouched sl-be
    [ -n "$MISMATCH" ] && MISMATCH="before the relay (not CRI's values): $MISMATCH"
    n=$(grep -c 'Synchronize: [0-9]* pods' "$D/logs/relay.log" 2>/dev/null)
    stop_containerd
    install -m 0755 "$NRI_QOS_BIN" "$RELAY"; set_native_policy "$D/policy/nri-qos.toml"
    if start_containerd; then
      local _; for _ in $(seq 1 50); do [ "$(grep -c 'Synchronize: [0-9]* pods' "$D/logs/relay.log" 2>/dev/null)" -gt "${n:-0}" ] && break; sleep 0.2; done
      log "  relay: $(grep 'Synchronize: [0-9]* pods' "$D/logs/relay.log" | tail -1)"
      log "  containerd: $(grep -o 'pre-installed NRI plugin [^ ]* synchronization success' "$D/logs/containerd.log" | tail -1)"
      if [ -z "$MISMATCH" ]; then expect_be sl-be; expect_status_class sl-be BE; fi
      stop_pod sl-be
      verdict "$name"
      return
    fi
    fail "$name" "containerd did not restart with the relay"; stop_pod sl-be
  fi
  [ -x "$RELAY" ] || { stop_containerd; install -m 0755 "$NRI_QOS_BIN" "$RELAY"; set_native_policy "$D/policy/nri-qos.toml"; start_containerd; }
}

# The external-relay scenarios: containerd without the launched relay (and without its conf.d
# file: the relay's command line is all its configuration, as in the DaemonSet), then back to the
# launched relay for the scenarios after them. In the node VM (EXT_SUPERVISOR=systemd) containerd
# runs as containerd.service, the relay is the .deb's service (installed by sync-existing, or the
# first scenario that needs it), plus deb-upgrade and plugin-conflict against that service; the
# package is purged at the end.
external_scenarios() {
  local n any=""
  for n in sync-existing unseen sync-created relay-back relay-back-child containerd-restart daemonset-style deb-upgrade plugin-conflict; do
    want "$n" && any=1
  done
  [ -n "$any" ] || return 0
  if [ "$EXT_SUPERVISOR" = systemd ] && [ ! -f "${E2E_DEB:-}" ]; then
    for n in sync-existing relay-back relay-back-child containerd-restart deb-upgrade plugin-conflict; do
      want "$n" && skip "$S-$n" "no .deb staged (make deb before the VM run): the node's relay is the packaged nri-qos-relay.service"
    done
    return 0
  fi
  stop_containerd
  rm -f "$RELAY" "$RELAY_CONF"
  [ "$EXT_SUPERVISOR" = systemd ] && ctd_unit_on
  start_containerd || { fail "$S-setup" "containerd did not start without the launched relay"; return; }
  [ -z "$(relay_pids)" ] || { fail "$S-setup" "a launched relay runs although $RELAY was removed"; return; }
  want sync-existing && ext_sync_existing
  want unseen && ext_unseen
  want sync-created && ext_sync_created
  want relay-back && ext_relay_back
  want relay-back-child && ext_relay_child_back
  want containerd-restart && ext_containerd_restart
  [ "$EXT_SUPERVISOR" = systemd ] && want deb-upgrade && ext_deb_upgrade
  want daemonset-style && ext_daemonset
  if [ "$EXT_SUPERVISOR" = systemd ]; then   # the node VM's last: nothing runs after it
    want plugin-conflict && ext_ensure "$S-plugin-conflict" && EXTERNAL=1 native_plugin_conflict
    ext_stop
    ext_pkg_purge
    return 0   # teardown stops containerd.service and restores /etc/nri, /opt/nri
  fi
  ext_stop
  stop_containerd
  install -m 0755 "$NRI_QOS_BIN" "$RELAY"
  set_native_policy "$D/policy/nri-qos.toml"
  start_containerd || fail "$S-setup" "containerd did not restart with the launched relay"
}

# Issue #31 item 2, containerd 2.3 (NRI v0.12): nri-qos serves the dedicated event RPCs and
# tells its NRI version at registration. Shown two ways, each with a control that proves the
# check can fail:
#  - containerd's log: 10-nri-qos registered "with NRI version v0.12.0", never "with NRI version
#    unknown", and no deprecated-interface line about it ("NRI plugin uses a deprecated
#    interface." with details "does not implement a dedicated <event> RPC call", or "uses
#    deprecated StateChange": containerd/nri v0.12.0 pkg/adaptation/plugin.go
#    warnDeprecatedEvent, logged by containerd's plugins/nri recorder.go PluginWarning). Control:
#    when 05-gostub (plugin-conflict; built on trixie's older NRI) ran in this log, the same
#    pattern must match its lines.
#  - `ctr deprecations list` (the 2.3.4 ctr): it must work (exit 0, its "ID LAST OCCURRENCE
#    MESSAGE" header) and must not list io.containerd.deprecation/nri-plugin-interface. That
#    entry names no plugin (recorder.go emits deprecation.NRIPluginInterface whichever plugin it
#    was) and the warning service forgets it at a restart, so the listing is read from a
#    containerd started with 10-nri-qos as its only NRI plugin that has since sent every event of
#    a pod's life (RunPodSandbox .. RemovePodSandbox, an UpdateContainer). Control: the listing
#    that plugin-conflict took while 05-gostub was loaded ($DEP_CONTROL) must list that entry.
DEP_CONTROL=$D/logs/deprecations-with-gostub.txt
NRI_DEP_ID=io.containerd.deprecation/nri-plugin-interface
# ctr prints nothing at all when the list is empty (the node VM's cgroup v2 node: no cgroup-v1
# entry either), else its table under that header.
deprecations() { # OUT-FILE: `ctr deprecations list` of our containerd; 1 when ctr failed or printed something else than its table
  "$CTR" --address "$D/containerd.sock" deprecations list > "$1" 2>&1 || return 1
  [ ! -s "$1" ] || head -1 "$1" | grep -Eq '^ID[[:space:]]+LAST OCCURRENCE[[:space:]]+MESSAGE'
}
dep_ids() { awk 'NR > 1 && $1 ~ /^io\./ {print $1}' "$1" | sort -u | tr '\n' ' '; }
native_nri012() {
  local name=$S-nri-v012 log=$D/logs/containerd.log bad reg dep=$D/logs/deprecations.txt nctl others
  local pat='with NRI version unknown|does not implement a dedicated|uses deprecated StateChange|deprecated interface'
  MISMATCH=""
  reg=$(grep -a 'registered as \\\?"10-nri-qos\\\?"' "$log" | tail -1)
  log "  registration: ${reg:-none}"
  [[ $reg == *'with NRI version v0.12.0'* ]] || MISMATCH="containerd did not log 10-nri-qos registered with NRI version v0.12.0: ${reg:-no line}"
  bad=$(grep -a '10-nri-qos' "$log" | grep -a -E "$pat" | head -3)
  [ -z "$bad" ] || MISMATCH="${MISMATCH:+$MISMATCH; }containerd's log: $(tr '\n' ' ' <<<"$bad")"
  if grep -aq 'registered as \\\?"05-gostub' "$log"; then
    nctl=$(grep -a '05-gostub' "$log" | grep -a -c -E "$pat")
    log "  control: lines about 05-gostub (older NRI) that the pattern matches: $nctl"
    [ "$nctl" -gt 0 ] || MISMATCH="${MISMATCH:+$MISMATCH; }control: the pattern matches none of 05-gostub's lines (the log check is blind)"
  else
    log "  control: 05-gostub did not run in this log (plugin-conflict not selected): the log pattern is unchecked"
  fi
  # a containerd whose only NRI plugin is 10-nri-qos, through a pod's whole life
  others=$(find /opt/nri/plugins -mindepth 1 ! -name 10-nri-qos 2>/dev/null | tr '\n' ' ')
  [ -z "$others" ] || MISMATCH="${MISMATCH:+$MISMATCH; }other NRI plugins installed: $others"
  set_native_policy "$D/policy/nri-qos.toml"
  stop_containerd; start_containerd || { fail "$name" "containerd did not restart"; return; }
  start_or_fail "$name" v012 burstable --label koordinator.sh/qosClass=BE || return
  update_ctr v012 resize --cpu-shares 1024 --cpu-quota 80000 --cpu-period 100000 || MISMATCH="${MISMATCH:+$MISMATCH; }$UPDATE_ERR"
  expect_be v012
  stop_pod v012
  if deprecations "$dep"; then
    log "  ctr deprecations list (after a pod's life, 10-nri-qos the only NRI plugin): $(dep_ids "$dep")$([ -s "$dep" ] || echo '(empty: exit 0, nothing printed)')"
    if awk 'NR > 1 {print $1}' "$dep" | grep -qxF "$NRI_DEP_ID"; then
      MISMATCH="${MISMATCH:+$MISMATCH; }ctr deprecations list has $NRI_DEP_ID with 10-nri-qos as the only NRI plugin: $(grep -F "$NRI_DEP_ID" "$dep" | head -c 300)"
    fi
  else
    MISMATCH="${MISMATCH:+$MISMATCH; }ctr deprecations list did not work: $(head -c 300 "$dep" | tr '\n' ' ')"
  fi
  if [ -f "$DEP_CONTROL" ]; then
    log "  control: ctr deprecations list while 05-gostub was loaded: $(dep_ids "$DEP_CONTROL")"
    awk 'NR > 1 {print $1}' "$DEP_CONTROL" | grep -qxF "$NRI_DEP_ID" ||
      MISMATCH="${MISMATCH:+$MISMATCH; }control: ctr deprecations list did not list $NRI_DEP_ID while 05-gostub (older NRI) was loaded (the listing check is blind)"
  else
    log "  control: no listing taken with 05-gostub loaded (plugin-conflict not run): the listing check is unchecked"
  fi
  verdict "$name"
}

# Issue #31 item 4: runtime-level fail-closed with NRI's default validator (containerd >= 2.2;
# containerd/nri v0.11 plugins/default-validator validateRequiredPlugins, run at CreateContainer
# only). `nri-qos register --native --require` writes [plugins."io.containerd.nri.v1.nri"
# .default_validator] enable = true, required_plugins = ["nri-qos"] into the suite's config (its
# plugin link into a scratch directory); the exemption key is added by hand, as docs/native-nri.md
# tells (register never writes it: a pod annotation must not lift the requirement unless the
# operator chose a key and guards it). Then, with containerd restarted:
#   PREFIX-refused: relay absent (its binary moved away, so not registered): a BE pod's container
#                   is refused, the message names nri-qos (`required plugin "nri-qos" not present`)
#   PREFIX-exempt:  still absent: a pod annotated tolerate-missing-nri-plugins.noderesource.dev=true
#                   starts, unadjusted (cpu.shares 512: nothing saw it)
#   PREFIX-running: the relay back: a BE pod starts with the BE class's values (sc_be)
# Afterwards the suite's config is put back and containerd restarted.
REQ_TOLERATE=tolerate-missing-nri-plugins.noderesource.dev
native_required() {
  local p=$1 cfg=$D/config.toml out msg
  cp "$cfg" "$D/config.toml.before-require"
  MISMATCH=""
  out=$("$NRI_QOS_BIN" register --native --require --containerd-config "$cfg" --containerd-version "$SHARED_RT" \
          --plugins-dir "$D/require-plugins" --binary "$RELAY" --backup-dir "$D/require-backup" --state-dir "$D/require-state" \
          --conf-json "$D/require-conf.json" --isulad-config "$D/none.json" --crio-config "$D/none.conf" 2>&1) ||
    MISMATCH="register --require failed: $(tr '\n' ' ' <<<"$out")"
  log "  register --require: $(tr '\n' '|' <<<"$out")"
  grep -q '^  required_plugins = \["nri-qos"\]' "$cfg" || MISMATCH="${MISMATCH:+$MISMATCH; }no required_plugins = [\"nri-qos\"] in $cfg"
  [ -n "$(ls -A "$D/require-backup" 2>/dev/null)" ] || MISMATCH="${MISMATCH:+$MISMATCH; }register --require left no backup in $D/require-backup"
  printf '  tolerate_missing_plugins_annotation = "%s"\n' "$REQ_TOLERATE" >> "$cfg"
  log "  containerd's validator table: $(sed -n '/default_validator\]/,$p' "$cfg" | tr '\n' '|')"
  stop_containerd
  mv "$RELAY" "$D/relay.off"
  start_containerd || MISMATCH="${MISMATCH:+$MISMATCH; }containerd did not start with the validator (see $D/logs/containerd.log)"
  if [ -z "$MISMATCH" ]; then
    if run_pod req-refused req-refused "$(kube_parent burstable)" --label koordinator.sh/qosClass=BE "${RES[@]}"; then
      MISMATCH="the pod started without nri-qos registered"
    else
      msg=$(first_error req-refused)
      log "  refused: $msg"
      [[ $msg == *'required plugin "nri-qos" not present'* ]] || MISMATCH="the refusal does not name nri-qos: $msg"
    fi
    stop_pod req-refused
  fi
  verdict "$p-refused"
  MISMATCH=""
  if run_pod req-exempt req-exempt "$(kube_parent burstable)" --label koordinator.sh/qosClass=BE \
       --annotation "$REQ_TOLERATE=true" "${RES[@]}"; then
    expect_knob req-exempt ctr cpu.shares 512
  else MISMATCH="the exempt pod was refused: $(first_error req-exempt)"; fi
  stop_pod req-exempt
  verdict "$p-exempt"
  stop_containerd
  mv "$D/relay.off" "$RELAY"
  if start_containerd; then
    local _; for _ in $(seq 1 25); do [ -n "$(relay_pids)" ] && break; sleep 0.2; done
    sc_be "$p-running" req-running burstable --label koordinator.sh/qosClass=BE
  else fail "$p-running" "containerd did not restart with the relay"; fi
  stop_containerd
  cp "$D/config.toml.before-require" "$cfg"
  start_containerd || fail "$S-setup" "containerd did not restart without the validator"
}
# containerd 1.7 (NRI v0.6.1) runs the scenarios whose outcome depends on NRI v0.6 or on 1.7's
# code: registration, the create-time values with config.json (oom_score_adj written by nri-qos at
# StartContainer, not carried), the updates (1.7's update path, oom_score_adj written again at
# PostUpdateContainer), sync-launched (SKIP: 0.6 does not synchronize launched plugins),
# sync-existing (the external relay: 0.6's only Synchronize) and fail-closed. The relay's own
# protocol and policy handling do not depend on the runtime and run on native21, native22 and
# native23 (and their VM subset), not again here: C17_ELSEWHERE (docs/e2e.md; E2E_C17_ALL=1 runs
# them on 1.7 too).
C17_ELSEWHERE='child-crash|restart|relay-back|relay-back-child|containerd-restart|daemonset-style|last-good|bundled|plugin-conflict|builtin|unseen|sync-created'
if [ "$MODE/$RT" = native/1.7 ] && [ -z "${E2E_C17_ALL:-}" ]; then
  eval "lib_$(declare -f want)"
  want() { lib_want "$1" && ! [[ $1 =~ ^($C17_ELSEWHERE)$ ]]; }
fi
# NRI v0.1 on containerd 2.x (issue #31 §6): the podsandbox controller reads /etc/nri/conf.json at
# every sandbox start (internal/cri/server/podsandbox/sandbox_run.go Controller.Start: state
# "create" for the pause task) and when the sandbox task exits (opts.go WithNRISandboxDelete:
# "delete"), never for a container. Counted in the event log: the v0.1 hook's records are
# events "create"/"delete" (sandbox true), the relay's "RunPodSandbox".
v01_count() { # SANDBOX_ID EVENT [sandbox|container ID]: records of that event for the sandbox (or that container)
  local n
  if [ "${3:-sandbox}" = sandbox ]; then
    n=$(jq -c --arg id "$1" --arg ev "$2" 'select(.sandbox_id == $id and .sandbox == true and .event == $ev)' "$E2E_EVENT_LOG" 2>/dev/null | grep -c .)
  else
    n=$(jq -c --arg id "$4" --arg ev "$2" 'select(.id == $id and .sandbox == false and .event == $ev)' "$E2E_EVENT_LOG" 2>/dev/null | grep -c .)
  fi
  echo "${n:-0}"
}
v01_off() { rm -f /etc/nri/conf.json /opt/nri/bin/nri-qos; }
native_v01_sandbox() {
  local name=$S-v01-sandbox out=v01-sandbox pod ctr c r k i
  MISMATCH=""
  install -D -m 0755 "$NRI_QOS_BIN" /opt/nri/bin/nri-qos
  set_v01_conf "$D/policy/nri-qos.toml"
  start_or_fail "$name" "$out" burstable --label koordinator.sh/qosClass=BE || { v01_off; return; }
  pod=$(j "$out" .pod_id); ctr=$(j "$out" .ctr_id)
  c=$(v01_count "$pod" create); r=$(v01_count "$pod" RunPodSandbox); k=$(v01_count "$pod" create container "$ctr")
  log "  sandbox ${pod:0:12}: v0.1 create records $c, native RunPodSandbox records $r; container ${ctr:0:12}: v0.1 create records $k"
  [ "$c" = 1 ] || MISMATCH="the v0.1 hook evaluated the sandbox $c time(s), not once"
  [ "$r" = 1 ] || MISMATCH="${MISMATCH:+$MISMATCH; }the relay evaluated the sandbox $r time(s), not once"
  [ "$k" = 0 ] || MISMATCH="${MISMATCH:+$MISMATCH; }the v0.1 hook was called for the container ($k record(s))"
  expect_be "$out"
  # 2.2+ warns (pkg/deprecation NRIV010Plugin); 2.0/2.1 run the hook silently
  [ "$RT" = 2.1 ] || grep -a -q 'Deprecated NRI plugin(s) nri-qos' "$D/logs/containerd.log" \
    || MISMATCH="${MISMATCH:+$MISMATCH; }containerd did not log 'Deprecated NRI plugin(s) nri-qos'"
  stop_pod "$out"
  for i in $(seq 1 25); do [ "$(v01_count "$pod" delete)" -ge 1 ] && break; sleep 0.2; done
  log "  after the pod's stop: v0.1 delete records of the sandbox $(v01_count "$pod" delete)"
  [ "$(v01_count "$pod" delete)" -ge 1 ] || MISMATCH="${MISMATCH:+$MISMATCH; }no v0.1 delete record when the sandbox stopped"
  v01_off
  verdict "$name"
}
# A conf.json entry naming a binary that does not exist: every pod start fails, and `status`
# says so in one line.
native_v01_stale() {
  local name=$S-v01-stale out=v01-stale st err
  MISMATCH=""
  mkdir -p /etc/nri
  printf '{"version": "0.1", "plugins": [{"type": "nri-qos-gone"}]}\n' > /etc/nri/conf.json
  st=$("$NRI_QOS_BIN" status --state-dir "$D/v01-stale-state" --conf-json /etc/nri/conf.json 2>&1 | grep -a 'nri-qos-gone')
  log "  status: $st"
  [[ $st == 'warning: '*'fails every pod start'* ]] || MISMATCH="status did not warn about the stale entry: ${st:-no line}"
  if run_pod "$out" "$out" "$(kube_parent burstable)" "${RES[@]}"; then
    MISMATCH="${MISMATCH:+$MISMATCH; }the pod started with a conf.json entry naming a missing binary"
  else
    err=$(first_error "$out")
    log "  the pod's start failed: $err"
    [[ $err == *'nri invoke'*'nri-qos-gone'* ]] || MISMATCH="${MISMATCH:+$MISMATCH; }the pod failed, but not with nri invoke ... nri-qos-gone: $err"
  fi
  stop_pod "$out"
  v01_off
  verdict "$name"
}
# register --mode both on 2.x, on a node that still lists nri-qos in conf.json (an upgrade from
# 1.6): the native plugin only, our entry removed; the next pod's sandbox is evaluated once.
native_v01_both() {
  local name=$S-v01-both out=v01-both reg pod c r
  MISMATCH=""
  install -D -m 0755 "$NRI_QOS_BIN" /opt/nri/bin/nri-qos
  set_v01_conf "$D/policy/nri-qos.toml"
  reg=$("$NRI_QOS_BIN" register --mode both --conf-json /etc/nri/conf.json --plugins-dir "$D/both-plugins" \
        --binary /opt/nri/bin/nri-qos --containerd-config "$D/config.toml" \
        --containerd-version "$("$CONTAINERD" --version | awk '{print $3}')" --state-dir "$D/both-state" 2>&1)
  log "  register --mode both: $(tr '\n' '|' <<<"$reg")"
  [ -L "$D/both-plugins/10-nri-qos" ] || MISMATCH="register --mode both installed no native plugin link"
  jq -e '.plugins[]? | select(.type == "nri-qos")' /etc/nri/conf.json >/dev/null 2>&1 \
    && MISMATCH="${MISMATCH:+$MISMATCH; }register --mode both left nri-qos in conf.json"
  grep -q 'registering the native plugin only' <<<"$reg" || MISMATCH="${MISMATCH:+$MISMATCH; }register did not say it registers the native plugin only"
  if start_or_fail "$name" "$out" burstable --label koordinator.sh/qosClass=BE; then
    pod=$(j "$out" .pod_id)
    c=$(v01_count "$pod" create); r=$(v01_count "$pod" RunPodSandbox)
    log "  sandbox ${pod:0:12}: v0.1 create records $c, native RunPodSandbox records $r"
    [ "$c" = 0 ] && [ "$r" = 1 ] || MISMATCH="${MISMATCH:+$MISMATCH; }the sandbox was evaluated $c time(s) by the v0.1 hook and $r by the relay (want 0 and 1)"
    expect_be "$out"
    stop_pod "$out"
    v01_off
    verdict "$name"
  else
    v01_off
  fi
}

# Resident evaluators give the same results as one process per event (issue #34 §2; the relay's
# own comparison: tests/nri_relay.sh relay-resident-same-results). Two passes over the same
# node-value scenarios (be-label, ls-burst, be-kube, v2-knobs, update-be, update-ls, proc-knobs),
# each on a containerd restarted with the test policy: settings.evaluator_events unset (N = 1,
# one-shot) and = $RES_EVENTS (1000). Each scenario checks its expected values as usual
# ($S-same-n1-*, $S-same-n1000-*); RES_DIGEST notes every value read back (kernel files, /proc
# oom_score_adj, config.json: the adjustment as the runtime applied it) and the kernel files and
# config.json of every container at its stop (lib.sh res_snapshot), and the pods' event-log
# records without times, ids and the evaluator field (res_records). $S-resident-same passes when
# the two digests and the two record sets are identical, the N = 1 records all say
# evaluator=one-shot and the N = 1000 records all say evaluator=resident.
RES_EVENTS=${E2E_RESIDENT_EVENTS:-1000}
res_pass() { # N: one pass; its digest in $D/logs/res-N.digest, its records in $D/logs/res-N.records
  local n=$1 p=$S-same-n$1 off
  if [ "$n" = 1 ]; then E2E_EVALUATOR_EVENTS='' install_test_policy "$D/policy/res-$n.toml"
  else E2E_EVALUATOR_EVENTS=$n install_test_policy "$D/policy/res-$n.toml"; fi || return 1
  set_native_policy "$D/policy/res-$n.toml"
  stop_containerd; start_containerd || { RES_WHY="containerd did not restart with the evaluator_events = $n policy"; return 1; }
  local _; for _ in $(seq 1 25); do [ -n "$(relay_pids | head -1)" ] && break; sleep 0.2; done
  RES_DIGEST=$D/logs/res-$n.digest
  : > "$RES_DIGEST"; : > "$RES_DIGEST.pods"
  off=$(stat -c %s "$E2E_EVENT_LOG" 2>/dev/null || echo 0)
  OCI_CHECKS=1
  sc_be "$p-be-label" be-label burstable --label koordinator.sh/qosClass=BE
  sc_ls "$p-ls-burst" ls-burst
  sc_be "$p-be-kube" be-kube besteffort
  OCI_CHECKS=""
  sc_knobs "$p-v2-knobs" knobs
  sc_update_be "$p-update-be"
  sc_update_ls "$p-update-ls"
  sc_proc "$p-proc-knobs"
  res_settle
  res_records "$off" > "$D/logs/res-$n.records"
  log "  pass N = $n: $(wc -l < "$RES_DIGEST") values, $(wc -l < "$D/logs/res-$n.records") records of $(grep -c . "$RES_DIGEST.pods") pods; evaluator: $(cat "$RES_DIGEST.modes")"
  RES_DIGEST=""
}
native_resident_same() {
  local name=$S-resident-same d1 d2 m1 m2
  RES_WHY="" MISMATCH=""
  res_pass 1 && res_pass "$RES_EVENTS"
  RES_DIGEST=""
  [ -z "$RES_WHY" ] || { fail "$name" "$RES_WHY"; return; }
  d1=$D/logs/res-1 d2=$D/logs/res-$RES_EVENTS
  if ! cmp -s "$d1.digest" "$d2.digest"; then
    MISMATCH="kernel/config.json values differ (N = 1 <, N = $RES_EVENTS >): $(diff "$d1.digest" "$d2.digest" | grep '^[<>]' | head -4 | tr '\n' ' ')"
  fi
  if ! cmp -s "$d1.records" "$d2.records"; then
    MISMATCH="${MISMATCH:+$MISMATCH; }event-log records differ (N = 1 <, N = $RES_EVENTS >): $(diff "$d1.records" "$d2.records" | grep '^[<>]' | head -2 | cut -c1-400 | tr '\n' ' ')"
  fi
  [ -s "$d1.records" ] && [ "$(wc -l < "$d1.digest")" -ge 40 ] ||
    MISMATCH="${MISMATCH:+$MISMATCH; }too little to compare: $(wc -l < "$d1.digest") values, $(wc -l < "$d1.records") records"
  m1=$(cat "$d1.digest.modes") m2=$(cat "$d2.digest.modes")
  [[ $m1 =~ ^[0-9]+\ one-shot\ $ ]] || MISMATCH="${MISMATCH:+$MISMATCH; }N = 1 records' evaluator: '$m1' (want one-shot only)"
  [[ $m2 =~ ^[0-9]+\ resident\ $ ]] || MISMATCH="${MISMATCH:+$MISMATCH; }N = $RES_EVENTS records' evaluator: '${m2}' (want resident only)"
  [ -n "$MISMATCH" ] || log "  resident-same: $(wc -l < "$d1.digest") values and $(wc -l < "$d1.records") records identical; evaluator $m1/ $m2"
  verdict "$name"
}

scenarios() {
  if [ "$MODE" = adapter ]; then
    want be-label && sc_be "$S-be-label" be-label burstable --label koordinator.sh/qosClass=BE
    set_v01_conf "$D/policy/fail-closed.toml"
    want fail-closed && sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
    set_v01_conf "$D/policy/nri-qos.toml"
    return
  fi
  if [ "$RT" = 1.7 ] && [ -z "${E2E_C17_ALL:-}" ] && host_only; then
    skip "$S-elsewhere" "not repeated on containerd 1.7, run on native21/22/23: ${C17_ELSEWHERE//|/ } (E2E_C17_ALL=1 runs them here)"
  fi
  want register && host_only && native_register
  # The node VM with containerd 2.3.4 in the same boot (nodevm.sh: E2E_VM_C23=1): 2.1 runs only
  # the packaged relay service's scenarios (external_scenarios); the node-shaped ones below run on
  # 2.3.4 after it, the same scenario code on the runtime nodes run today (issue #31: CI time)
  if ! host_only && [ "$RT" = 2.1 ] && [ -n "${E2E_VM_C23:-}" ]; then
    skip "$S-node-values" "run on vm-c23-native in the same boot: be-label ls-burst be-kube v2-knobs update-be update-ls sync-launched"
    external_scenarios
    return 0
  fi
  OCI_CHECKS=1
  want be-label && sc_be "$S-be-label" be-label burstable --label koordinator.sh/qosClass=BE
  want ls-burst && sc_ls "$S-ls-burst" ls-burst
  want be-kube && sc_be "$S-be-kube" be-kube besteffort
  OCI_CHECKS=""
  want v2-knobs && sc_knobs "$S-v2-knobs" knobs
  want update-be && sc_update_be "$S-update-be"
  want update-ls && sc_update_ls "$S-update-ls"
  # in-place pod resize (UpdatePodSandboxResources): containerd >= 2.2's CRI has the call
  case $RT in 2.2|2.3) want resize && sc_resize "$S-resize" ;; esac
  want proc-knobs && sc_proc "$S-proc-knobs"
  if ! host_only; then
    # the node VM: the node's life with the relay (issue #20): the launched relay synchronizing a
    # running pod, then the packaged relay service; the rest is protocol-level, covered on the host
    want sync-launched && native_sync_launched
    # 2.3.4 (NRI 0.12) runs in the same boot after 2.1, which covers the packaged relay service
    # on this node; 2.3.4's external relay is the host's (nodevm.sh)
    if [ "$RT" = 2.3 ]; then want nri-v012 && native_nri012; return 0; fi
    external_scenarios
    return 0
  fi
  want child-crash && native_child_crash
  want restart && native_restart
  want sync-launched && native_sync_launched
  external_scenarios
  want last-good && native_last_good
  want bundled && native_bundled
  want plugin-conflict && native_plugin_conflict
  want builtin && native_builtin
  case $RT in 2.2|2.3) want required && native_required "$S-required" ;; esac
  if [ "${RT%%.*}" = 2 ]; then   # the v0.1 path on containerd 2.x (sandboxes only)
    want v01-sandbox && native_v01_sandbox
    want v01-stale && native_v01_stale
    want v01-both && native_v01_both
  fi
  # resident evaluators against one-shot (issue #34 §2): on 2.3.4 only (CI time, ~1.5 min)
  [ "$RT" = 2.3 ] && want resident-same && native_resident_same
  set_native_policy "$D/policy/fail-closed.toml"
  stop_containerd; start_containerd || fail "$S-setup" "containerd did not restart with the fail-closed policy"
  want fail-closed && containerd_alive && sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
  [ "$RT" = 2.3 ] && want nri-v012 && native_nri012
}

if [ "$MODE" = prepare ]; then
  mkdir -p "$E2E_CACHE"
  # 2.2/2.3 without ../shared/runtimes: nothing to prepare (their suites SKIP)
  fetch_runtime || { log "$RT_WHY"; [ -n "$SHARED_RT" ] && exit 0; exit 1; }
  [ "$RT" = 1.7 ] && { fetch_go && build_adapter || exit 1; }
  # the node VM's plugin-conflict: bench/gostub, staged by nodevm.sh (best effort: SKIP without)
  [ "$RT" = 2.1 ] && { gostub_ready || log "no bench/gostub for the node VM: $GOSTUB_WHY"; }
  exit 0
fi
suite_main up scenarios

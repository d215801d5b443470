#!/bin/bash
# nri-qos under containerd 1.7 (Debian trixie's containerd 1.7.24, extracted with dpkg -x into
# $E2E_CACHE/trixie-root; the bookworm system is not changed) + bookworm's runc, NRI enabled.
#
#   containerd17.sh adapter   v0.1 path: /opt/nri/bin/nri-qos listed in /etc/nri/conf.json, driven
#                             by the TEST-ONLY v0.1 adapter (adapter/main.go) in /opt/nri/plugins
#   containerd17.sh native    native NRI: build/nri-qos installed as /opt/nri/plugins/10-nri-qos
#                             (ttrpc relay), no adapter
#   containerd17.sh prepare   only fetch/extract trixie packages and build the adapter (cache)
#
# Prints PASS/FAIL/SKIP lines on stdout (diagnostics on stderr); exit 1 if anything failed.
# Env: E2E_CACHE (default /var/cache/nri-qos-e2e), E2E_WORK (/var/lib/nri-qos-e2e),
#      NRI_QOS_BIN (build/nri-qos), E2E_POLICY (bundled policy), E2E_KEEP=1 (leave containerd
#      running after the scenarios: stop it later with `containerd17.sh down MODE`).
# shellcheck disable=SC2034  # CTR, SHIM_PATH, OCI_CHECKS are read by lib.sh
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

MODE=${1:-native}
[ "$MODE" = down ] && MODE=${2:-native} && DOWN_ONLY=1
case $MODE in adapter|native|prepare) ;; *) echo "usage: $0 adapter|native|prepare|down MODE" >&2; exit 2 ;; esac
S=c17-$MODE                               # result name prefix
D=$E2E_WORK/containerd17-$MODE
TR=$E2E_CACHE/trixie-root
CONTAINERD=$TR/usr/bin/containerd
CTR=$TR/usr/bin/ctr
SHIM_PATH=$TR/usr/bin                     # containerd finds containerd-shim-runc-v2 via PATH
ADAPTER=$E2E_CACHE/bin/v010-adapter
APT_T=(-o Dir::Etc::sourcelist="$E2E_CACHE/trixie.sources" -o Dir::Etc::sourceparts=/dev/null
       -o Dir::State::Lists="$E2E_CACHE/apt/lists" -o Dir::Cache="$E2E_CACHE/apt/cache"
       -o Dir::State::status=/dev/null)

go_bin() { ls -d "$TR"/usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -1; }

# trixie containerd + Go toolchain + the Go library closure of the NRI module, dpkg -x'ed.
# A private apt config (own sources/lists/cache under $E2E_CACHE); the system's apt is untouched.
fetch_trixie() {
  [ -x "$CONTAINERD" ] && [ -n "$(go_bin)" ] && [ -d "$TR/usr/share/gocode/src/github.com/containerd/nri/pkg/stub" ] && return 0
  log "fetching trixie packages into $E2E_CACHE (apt-get download + dpkg -x)"
  mkdir -p "$E2E_CACHE/apt/lists/partial" "$E2E_CACHE/apt/cache/archives/partial" "$E2E_CACHE/debs" "$TR"
  cat > "$E2E_CACHE/trixie.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get "${APT_T[@]}" update -qq </dev/null >&2 || return 1
  local gover libs
  gover=$(apt-cache "${APT_T[@]}" depends golang-go 2>/dev/null | grep -o 'golang-1\.[0-9]*-go' | sort -V | tail -1)
  [ -n "$gover" ] || { log "cannot resolve trixie's golang-go"; return 1; }
  # Go library closure of the NRI module: every golang-*-dev in its recursive Depends
  libs=$(apt-cache "${APT_T[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
           --no-breaks --no-replaces --no-enhances golang-github-containerd-nri-dev 2>/dev/null \
         | grep -E '^golang-.*-dev$' | sort -u)
  rm -f "$E2E_CACHE"/debs/*.deb
  # shellcheck disable=SC2086
  (cd "$E2E_CACHE/debs" && apt-get "${APT_T[@]}" download -qq containerd "$gover" "${gover%-go}-src" $libs \
     </dev/null 2>&1 | grep -v unsandboxed >&2 || true)
  local f
  for f in "$E2E_CACHE"/debs/*.deb; do dpkg -x "$f" "$TR" || return 1; done
  [ -x "$CONTAINERD" ] && [ -n "$(go_bin)" ]
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

# ---------------------------------------------------------------------------------------------
NRI_BLOCK="[plugins.\"io.containerd.nri.v1.nri\"]
  disable = false
  disable_connections = false
  plugin_config_path = \"/etc/nri/conf.d\"
  plugin_path = \"/opt/nri/plugins\"
  plugin_registration_timeout = \"5s\"
  plugin_request_timeout = \"2s\"
  socket_path = \"$D/nri.sock\""

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

# native: point the relay at policy $1 (read at Configure, so containerd is (re)started after)
set_native_policy() {
  mkdir -p /etc/nri/conf.d
  printf '{"policy": "%s"}\n' "$1" > "$RELAY_CONF"
}

up() {
  nri_backup
  fetch_trixie || { skip "$S" "cannot fetch trixie's containerd packages (network or apt)"; return 2; }
  log "containerd: $("$CONTAINERD" --version)"
  if [ ! -x "$NRI_QOS_BIN" ]; then fail "$S-setup" "$NRI_QOS_BIN missing: run make"; return 1; fi
  install_test_policy "$D/policy/nri-qos.toml" || { fail "$S-setup" "bundled policy $BUNDLED_POLICY missing"; return 1; }
  write_fail_closed_policy "$D/policy/fail-closed.toml"
  rm -rf /opt/nri/plugins /etc/nri/conf.d /etc/nri/conf.json
  mkdir -p /opt/nri/plugins /etc/nri/conf.d
  if [ "$MODE" = adapter ]; then
    build_adapter || { fail "$S-setup" "adapter build failed"; return 1; }
    install -m 0755 "$ADAPTER" /opt/nri/plugins/00-v010-adapter
    printf '{"log": "%s"}\n' "$D/logs/adapter.log" > /etc/nri/conf.d/00-v010-adapter.conf
    install -D -m 0755 "$NRI_QOS_BIN" /opt/nri/bin/nri-qos
    set_v01_conf "$D/policy/nri-qos.toml"
  else
    install -m 0755 "$NRI_QOS_BIN" "$RELAY"
    set_native_policy "$D/policy/nri-qos.toml"
  fi
  write_config_common "$NRI_BLOCK"
  start_containerd || { fail "$S-setup" "containerd did not start (see $D/logs/containerd.log)"; return 1; }
  import_image
}

# OCI bundle config.json of the container of OUT (runc v2 shim state dir)
oci() { jq -r "$2" "$D/state/io.containerd.runtime.v2.task/k8s.io/$(j "$1" .ctr_id)/config.json" 2>/dev/null; }
expect_oci() { # OUT FILTER WANT
  local got; got=$(oci "$1" "$2")
  [ "$got" = "$3" ] || MISMATCH="${MISMATCH:+$MISMATCH; }config.json $2=$got want $3"
  log "  $1: config.json $2 = $got (want $3)"
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
    run_pod crash$try crash-me "/kubepods/burstable/pod{uid}" --label koordinator.sh/qosClass=BE "${RES[@]}"
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
  sc_be "$name" after-crash --label koordinator.sh/qosClass=BE
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
  local new; new=$(relay_pids | head -1)
  [ -n "$new" ] && [ "$new" != "$old" ] || { fail "$name" "no new relay after restart (old $old, new '${new}')"; return; }
  log "  relay relaunched: $old -> $new"
  sc_be "$name" after-restart --label koordinator.sh/qosClass=BE
}

main() {
  if [ "$MODE" = prepare ]; then
    mkdir -p "$E2E_CACHE"; fetch_trixie && build_adapter; return
  fi
  local why; why=$(preflight)
  [ -z "$why" ] || { skip "$S" "$why"; return 0; }
  take_lock || { fail "$S-setup" "lock"; return 1; }
  [ -n "${DOWN_ONLY:-}" ] && { teardown_all; return 0; }
  trap 'teardown_all' EXIT
  trap 'exit 130' INT TERM
  cleanup_stale  # leftovers of a run that was killed (-9): processes, mounts, cgroups, backup
  local rc=0; up || rc=$?
  [ $rc = 2 ] && return 0
  [ $rc = 0 ] || return 1
  if [ "$MODE" = adapter ]; then
    sc_be "$S-be-label" be-label --label koordinator.sh/qosClass=BE
    set_v01_conf "$D/policy/fail-closed.toml"
    sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
    set_v01_conf "$D/policy/nri-qos.toml"
  else
    OCI_CHECKS=1
    sc_be "$S-be-label" be-label --label koordinator.sh/qosClass=BE
    sc_ls "$S-ls-burst" ls-burst
    native_child_crash
    native_restart
    OCI_CHECKS=""
    set_native_policy "$D/policy/fail-closed.toml"
    stop_containerd; start_containerd || fail "$S-setup" "containerd did not restart with the fail-closed policy"
    containerd_alive && sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
  fi
  if [ -n "${E2E_KEEP:-}" ]; then trap - EXIT; log "E2E_KEEP: containerd left running (socket $D/containerd.sock)"; fi
  [ "$NFAIL" = 0 ]
}

main

#!/bin/sh
# nri-qos node installer: the init step of the nri-qos DaemonSet (deploy/kubernetes/).
# POSIX sh + coreutils/busybox only (cp, cmp, mkdir, mv, rm, chmod, ln, readlink, md5sum, sleep).
#
# Usage: install.sh [install|relay|sync-policy|uninstall]        (default: install)
#
# install (the init container; idempotent, every step is skipped when already in place):
#   1. copy the static binary $NRI_QOS_SRC_BIN to $HOST_ROOT/opt/nri/bin/nri-qos
#      (temp file + rename: a runtime exec'ing the hook never sees a partial binary);
#   2. validate the policy $POLICY_SRC (`nri-qos check`), then install it as
#      $HOST_ROOT/etc/nri/nri-qos.toml (temp file + rename). The ConfigMap is the source of
#      truth: a node-local edit of that file is replaced (the previous file is kept as
#      nri-qos.toml.bak once). Then precompile it into the node's cache and last good store
#      (`nri-qos check $NODE_POLICY --cache-dir $NRI_QOS_CACHE_DIR --last-good-dir
#      $NRI_QOS_LAST_GOOD_DIR`), the directories the hook and the relay read, so that no event
#      waits for the compile of a large policy: the cache is keyed by the policy's path and inode
#      as the node sees them, so the container must see the node's /etc/nri at /etc/nri, the
#      node's /run/nri-qos and /var/lib/nri-qos at their names;
#   3. pick the mode by $NRI_QOS_MODE and write it to $NRI_QOS_MODE_FILE for the containers:
#        auto   (default) what the node runs: the runtime's NRI socket $HOST_ROOT$NRI_SOCKET
#               exists (containerd >= 1.7 with NRI enabled, 2.x by default, iSulad with NRI) →
#               external; otherwise (containerd 1.5/1.6) → v01;
#        external the relay container connects to the NRI socket as an external plugin
#               (`nri-qos relay --socket`): no runtime restart; our conf.json entry and native
#               symlinks are removed so that no event is handled twice;
#        v01    `nri-qos register --mode v01 --conf-json $HOST_ROOT/etc/nri/conf.json`
#               (containerd 1.6, or 1.7+ with the v010-adapter; read at every pod event);
#        native `nri-qos register --native --plugins-dir $HOST_ROOT/opt/nri/plugins
#               --index $NRI_QOS_INDEX --binary /opt/nri/bin/nri-qos` (pre-installed plugin: the
#               runtime loads it when it starts, so restart containerd);
#        both   native, and v01 where it adds events: with no NRI socket (containerd 1.5/1.6).
#               With the socket (containerd >= 1.7, NRI on) native only, and our conf.json entry
#               removed: 1.7 never reads conf.json, 2.x runs it at every pod sandbox start and
#               stop beside the native plugin (each sandbox evaluated twice; docs/install.md
#               "The v0.1 path on containerd 2.x"). Do not use v01 AND native with the
#               v010-adapter installed: every event would be handled twice.
#      If $NRI_QOS_PLUGIN_CONF is set (a JSON object) it is passed as --plugin-conf.
# relay [ARGS...] (the relay container): mode external → exec `nri-qos relay --socket $NRI_SOCKET
#   --kubelet-cpu-state $NRI_QOS_KUBELET_CPU_STATE [--metrics-listen $NRI_QOS_METRICS_LISTEN]
#   [--cri-socket unix://$NRI_QOS_CRI_SOCKET | --unseen-interval 0 when it is set empty]
#   ARGS...` (the container's restart is the relay's restart; its log is `kubectl logs`); other
#   modes → `nri-qos serve-metrics --listen $NRI_QOS_METRICS_LISTEN` when that is set, else stay
#   idle (the runtime execs the hook itself).
# sync-policy (the policy-sync container): every $NRI_QOS_SYNC_SECONDS, install (and precompile)
#   a changed $POLICY_SRC as step 2 does, so a ConfigMap edit reaches the node (the hook and the relay read
#   the policy file at every event) without a pod restart; a policy `nri-qos check` rejects is
#   reported once and the node keeps its policy.
# uninstall: unregister from conf.json, remove native symlinks to /opt/nri/bin/nri-qos, remove
#   the binary; the policy file is left in place.
#
# Environment (defaults in brackets):
#   HOST_ROOT [/host]                 where the node's / is mounted (hostPath volumes)
#   NRI_QOS_SRC_BIN [/opt/nri/bin/nri-qos]   binary shipped in the image
#   NRI_QOS [$NRI_QOS_SRC_BIN]        binary used to run check/register/relay (in the container)
#   POLICY_SRC [/etc/nri-qos-policy/nri-qos.toml]   policy from the ConfigMap ("" = keep the
#                                     node's policy, or install none if it has none)
#   NRI_QOS_MODE [auto]  NRI_QOS_INDEX [10]  NRI_QOS_PLUGIN_CONF []
#   NRI_SOCKET [/var/run/nri/nri.sock]  the runtime's NRI socket as the node sees it
#   NRI_QOS_MODE_FILE [/run/nri-qos-pod/mode]  mode chosen by install (a pod-local emptyDir)
#   NRI_QOS_SYNC_SECONDS [10]  NRI_QOS_SYNC_ONCE []  (sync-policy: one pass, for tests)
#   NODE_POLICY [/etc/nri/nri-qos.toml]  the installed policy at the node's path, as this container
#                                     sees it (the node's /etc/nri mounted at /etc/nri)
#   NRI_QOS_CACHE_DIR [/run/nri-qos/cache]  the node's compiled policy cache (the hook's default;
#                                     "" = do not precompile)
#   NRI_QOS_LAST_GOOD_DIR [/var/lib/nri-qos]  the node's last good policy store (the hook's default)
#   NRI_QOS_METRICS_LISTEN []        ADDRESS:PORT of the relay's /metrics ("" = none; chart metrics.enabled)
#   NRI_QOS_KUBELET_CPU_STATE [/var/lib/kubelet/cpu_manager_state]  kubelet's CPU manager
#                                     checkpoint, passed to the relay (the node's kubelet directory
#                                     mounted read-only at its name; "" = the node has none)
#   NRI_QOS_CRI_SOCKET [unset: the relay's default, /run/containerd/containerd.sock]  the runtime's
#                                     CRI socket for the relay's unseen pass (its directory mounted
#                                     read-only at its name; "" = no pass, --unseen-interval 0)
# Exit status: 0 done, 1 a step failed (message on stderr), 2 bad usage/environment.
set -eu

HOST_ROOT=${HOST_ROOT:-/host}
NRI_QOS_SRC_BIN=${NRI_QOS_SRC_BIN:-/opt/nri/bin/nri-qos}
NRI_QOS=${NRI_QOS:-$NRI_QOS_SRC_BIN}
POLICY_SRC=${POLICY_SRC-/etc/nri-qos-policy/nri-qos.toml}
NRI_QOS_MODE=${NRI_QOS_MODE:-auto}
NRI_SOCKET=${NRI_SOCKET:-/var/run/nri/nri.sock}
NRI_QOS_MODE_FILE=${NRI_QOS_MODE_FILE:-/run/nri-qos-pod/mode}
NRI_QOS_SYNC_SECONDS=${NRI_QOS_SYNC_SECONDS:-10}
NRI_QOS_INDEX=${NRI_QOS_INDEX:-10}
NRI_QOS_PLUGIN_CONF=${NRI_QOS_PLUGIN_CONF:-}
NODE_POLICY=${NODE_POLICY:-/etc/nri/nri-qos.toml}
NRI_QOS_CACHE_DIR=${NRI_QOS_CACHE_DIR-/run/nri-qos/cache}
NRI_QOS_LAST_GOOD_DIR=${NRI_QOS_LAST_GOOD_DIR-/var/lib/nri-qos}
NRI_QOS_KUBELET_CPU_STATE=${NRI_QOS_KUBELET_CPU_STATE-/var/lib/kubelet/cpu_manager_state}
ACTION=${1:-install}

# Paths as the node sees them (symlink target, conf.json entry) vs. where we write them.
HOST_BIN=/opt/nri/bin/nri-qos
DST_BIN=$HOST_ROOT$HOST_BIN
DST_POLICY=$HOST_ROOT/etc/nri/nri-qos.toml
CONF_JSON=$HOST_ROOT/etc/nri/conf.json
PLUGINS_DIR=$HOST_ROOT/opt/nri/plugins

log() { echo "nri-qos-install: $*"; }
die() { echo "nri-qos-install: error: $*" >&2; exit "${2:-1}"; }

# install_file SRC DST MODE: copy when different; temp file in DST's directory + rename.
install_file() {
  if [ -f "$2" ] && cmp -s "$1" "$2"; then
    log "$2 up to date"
    return 0
  fi
  mkdir -p "$(dirname "$2")"
  tmp="$(dirname "$2")/.$(basename "$2").nri-qos-install.$$"
  cp "$1" "$tmp" && chmod "$3" "$tmp" && mv -f "$tmp" "$2" || {
    rm -f "$tmp"
    die "cannot install $2"
  }
  log "installed $2"
}

# precompile: compile the installed policy into the node's cache and last good store (step 2).
# The hook still compiles a policy it finds no cache entry for, so a policy this cannot
# precompile is a warning on stderr, never a failed install.
precompile() {
  if [ -z "$NRI_QOS_CACHE_DIR" ]; then
    log "NRI_QOS_CACHE_DIR is empty: policy not precompiled (the first event compiles it)"; return 0
  fi
  if [ ! -f "$NODE_POLICY" ] || ! cmp -s "$NODE_POLICY" "$DST_POLICY"; then
    echo "nri-qos-install: warning: the node's policy is not at $NODE_POLICY here (mount the node's /etc/nri at /etc/nri): not precompiled; the first event compiles it" >&2
    return 0
  fi
  if "$NRI_QOS" check "$NODE_POLICY" --cache-dir "$NRI_QOS_CACHE_DIR" --last-good-dir "$NRI_QOS_LAST_GOOD_DIR" >/dev/null; then
    log "precompiled $NODE_POLICY into $NRI_QOS_CACHE_DIR (last good copy in ${NRI_QOS_LAST_GOOD_DIR:-(none)})"
  else
    echo "nri-qos-install: warning: precompiling $NODE_POLICY into $NRI_QOS_CACHE_DIR failed; the first event compiles it" >&2
  fi
}

# install_policy: step 2 (validate $POLICY_SRC, keep the node's previous file once, install,
# precompile). Returns 1 (message on stderr) when the policy is missing or rejected: the node is
# unchanged.
install_policy() {
  if [ ! -f "$POLICY_SRC" ]; then
    echo "nri-qos-install: error: policy $POLICY_SRC missing (is the ConfigMap mounted?)" >&2; return 1
  fi
  if ! "$NRI_QOS" check "$POLICY_SRC" >/dev/null; then
    echo "nri-qos-install: error: policy $POLICY_SRC rejected by 'nri-qos check'; node left unchanged" >&2; return 1
  fi
  if [ -f "$DST_POLICY" ] && ! cmp -s "$POLICY_SRC" "$DST_POLICY" && [ ! -e "$DST_POLICY.bak" ]; then
    cp -p "$DST_POLICY" "$DST_POLICY.bak"
    log "kept the node's previous policy as $DST_POLICY.bak"
  fi
  install_file "$POLICY_SRC" "$DST_POLICY" 0644
  precompile
}

case "$NRI_QOS_MODE" in auto|external|v01|native|both) ;; *) die "NRI_QOS_MODE must be auto, external, v01, native or both (got '$NRI_QOS_MODE')" 2 ;; esac
case "$NRI_QOS_INDEX" in [0-9][0-9]) ;; *) die "NRI_QOS_INDEX must be two digits (got '$NRI_QOS_INDEX')" 2 ;; esac
[ -d "$HOST_ROOT" ] || die "HOST_ROOT $HOST_ROOT is not a directory (mount the node's / there)" 2

case "$ACTION" in
install)
  [ -x "$NRI_QOS_SRC_BIN" ] || die "binary $NRI_QOS_SRC_BIN missing or not executable" 2
  install_file "$NRI_QOS_SRC_BIN" "$DST_BIN" 0755

  [ -z "$POLICY_SRC" ] || install_policy || exit 1

  mode=$NRI_QOS_MODE
  if [ "$mode" = auto ]; then
    if [ -S "$HOST_ROOT$NRI_SOCKET" ]; then mode=external; else mode=v01; fi
    log "mode auto: $([ $mode = external ] && echo "NRI socket $NRI_SOCKET found" || echo "no NRI socket at $NRI_SOCKET (containerd 1.5/1.6, or NRI disabled)") → $mode"
  fi
  set --
  [ -z "$NRI_QOS_PLUGIN_CONF" ] || set -- --plugin-conf "$NRI_QOS_PLUGIN_CONF"
  case "$mode" in
  external)
    # The relay container serves every event: nothing else may call nri-qos for them.
    "$NRI_QOS" unregister --conf-json "$CONF_JSON" >/dev/null || die "unregister from $CONF_JSON failed"
    "$NRI_QOS" unregister --native --plugins-dir "$PLUGINS_DIR" --binary "$HOST_BIN" >/dev/null || \
      die "removing native plugin links from $PLUGINS_DIR failed"
    ;;
  both)
    if [ -S "$HOST_ROOT$NRI_SOCKET" ]; then
      log "mode both: NRI socket $NRI_SOCKET found (containerd >= 1.7): the native plugin only; a conf.json entry would make containerd 2.x evaluate each pod sandbox twice"
      "$NRI_QOS" unregister --conf-json "$CONF_JSON" >/dev/null || die "unregister from $CONF_JSON failed"
    else
      "$NRI_QOS" register --mode v01 --conf-json "$CONF_JSON" "$@" || die "register in $CONF_JSON failed"
    fi
    ;;
  v01)
    "$NRI_QOS" register --mode v01 --conf-json "$CONF_JSON" "$@" || die "register in $CONF_JSON failed"
    ;;
  esac
  if [ "$mode" = native ] || [ "$mode" = both ]; then
    # Symlink content is the node's path; the same path exists in the image, so the existence
    # check inside `register --native` is meaningful.
    "$NRI_QOS" register --native --plugins-dir "$PLUGINS_DIR" --index "$NRI_QOS_INDEX" \
      --binary "$HOST_BIN" || die "native registration in $PLUGINS_DIR failed"
  fi
  mkdir -p "$(dirname "$NRI_QOS_MODE_FILE")" && echo "$mode" > "$NRI_QOS_MODE_FILE" || \
    die "cannot write the mode to $NRI_QOS_MODE_FILE"
  log "done (mode $mode)"
  ;;
relay)
  mode=$(cat "$NRI_QOS_MODE_FILE" 2>/dev/null) || die "no mode in $NRI_QOS_MODE_FILE (did the install init container run?)" 2
  if [ "$mode" = external ]; then
    shift
    # the unseen pass's CRI endpoint (relay --cri-socket); given empty: the pass is off
    if [ -z "${NRI_QOS_CRI_SOCKET-unset}" ]; then
      set -- --unseen-interval 0 "$@"
      log "NRI_QOS_CRI_SOCKET is empty: no periodic pass over containers no event reported (--unseen-interval 0)"
    elif [ -n "${NRI_QOS_CRI_SOCKET:-}" ]; then
      case $NRI_QOS_CRI_SOCKET in
        unix://*) set -- --cri-socket "$NRI_QOS_CRI_SOCKET" "$@" ;;
        /*) set -- --cri-socket "unix://$NRI_QOS_CRI_SOCKET" "$@" ;;
        *) die "NRI_QOS_CRI_SOCKET must be an absolute path (or unix://PATH), not '$NRI_QOS_CRI_SOCKET'" 2 ;;
      esac
    fi
    set -- relay --socket "$NRI_SOCKET" --kubelet-cpu-state "$NRI_QOS_KUBELET_CPU_STATE" \
      ${NRI_QOS_METRICS_LISTEN:+--metrics-listen "$NRI_QOS_METRICS_LISTEN"} "$@"
    log "mode external: nri-qos $*"
    exec "$NRI_QOS" "$@"
  fi
  if [ -n "${NRI_QOS_METRICS_LISTEN:-}" ]; then
    log "mode $mode: the runtime runs the hook itself; serving its metrics on $NRI_QOS_METRICS_LISTEN"
    exec "$NRI_QOS" serve-metrics --listen "$NRI_QOS_METRICS_LISTEN"
  fi
  log "mode $mode: the runtime runs the hook itself; nothing to serve here"
  trap 'exit 0' TERM INT
  while :; do sleep 3600 & wait $!; done
  ;;
sync-policy)
  [ -n "$POLICY_SRC" ] || { log "POLICY_SRC is empty: the node's policy is not managed here"; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done; }
  trap 'exit 0' TERM INT
  rejected=""
  while :; do
    if [ -f "$POLICY_SRC" ] && ! cmp -s "$POLICY_SRC" "$DST_POLICY"; then
      sum=$(md5sum < "$POLICY_SRC")   # busybox has no cksum
      if [ "$sum" != "$rejected" ]; then
        if install_policy; then rejected=""; else rejected=$sum; fi
      fi
    fi
    [ -z "${NRI_QOS_SYNC_ONCE:-}" ] || exit 0
    sleep "$NRI_QOS_SYNC_SECONDS" & wait $!
  done
  ;;
uninstall)
  rc=0
  if [ -x "$NRI_QOS" ]; then
    "$NRI_QOS" unregister --conf-json "$CONF_JSON" || rc=1
    "$NRI_QOS" unregister --native --plugins-dir "$PLUGINS_DIR" --binary "$HOST_BIN" || rc=1
  else
    die "binary $NRI_QOS missing: cannot unregister" 2
  fi
  [ "$rc" -eq 0 ] || die "unregister failed; binary $DST_BIN kept"
  rm -f "$DST_BIN"
  log "removed $DST_BIN (policy $DST_POLICY kept)"
  ;;
*)
  die "usage: install.sh [install|relay|sync-policy|uninstall]" 2
  ;;
esac

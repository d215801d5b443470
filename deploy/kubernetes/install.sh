#!/bin/sh
# nri-qos node installer: the init step of the nri-qos DaemonSet (deploy/kubernetes/).
# POSIX sh + coreutils/busybox only (cp, cmp, mkdir, mv, rm, chmod, ln, readlink).
#
# Usage: install.sh [install|uninstall]        (default: install)
#
# install (idempotent; every step is skipped when already in place):
#   1. copy the static binary $NRI_QOS_SRC_BIN to $HOST_ROOT/opt/nri/bin/nri-qos
#      (temp file + rename: a runtime exec'ing the hook never sees a partial binary);
#   2. validate the policy $POLICY_SRC (`nri-qos check`), then install it as
#      $HOST_ROOT/etc/nri/nri-qos.toml (temp file + rename). The ConfigMap is the source of
#      truth: a node-local edit of that file is replaced (the previous file is kept as
#      nri-qos.toml.bak once);
#   3. by $NRI_QOS_MODE:
#        v01    (default) `nri-qos register --conf-json $HOST_ROOT/etc/nri/conf.json`
#               (containerd 1.6, or 1.7+ with the v010-adapter; read at every pod event);
#        native `nri-qos register --native --plugins-dir $HOST_ROOT/opt/nri/plugins
#               --index $NRI_QOS_INDEX --binary /opt/nri/bin/nri-qos` (containerd >= 1.7 with
#               NRI enabled; the runtime loads plugins when it starts: restart containerd);
#        both   both of the above. Do not use v01 AND native with the v010-adapter installed:
#               every event would be handled twice.
#      If $NRI_QOS_PLUGIN_CONF is set (a JSON object) it is passed as --plugin-conf.
# uninstall: unregister from conf.json, remove native symlinks to /opt/nri/bin/nri-qos, remove
#   the binary; the policy file is left in place.
#
# Environment (defaults in brackets):
#   HOST_ROOT [/host]                 where the node's / is mounted (hostPath volumes)
#   NRI_QOS_SRC_BIN [/opt/nri/bin/nri-qos]   binary shipped in the image
#   NRI_QOS [$NRI_QOS_SRC_BIN]        binary used to run check/register (runs in the container)
#   POLICY_SRC [/etc/nri-qos-policy/nri-qos.toml]   policy from the ConfigMap ("" = keep the
#                                     node's policy, or install none if it has none)
#   NRI_QOS_MODE [v01]  NRI_QOS_INDEX [10]  NRI_QOS_PLUGIN_CONF []
# Exit status: 0 done, 1 a step failed (message on stderr), 2 bad usage/environment.
set -eu

HOST_ROOT=${HOST_ROOT:-/host}
NRI_QOS_SRC_BIN=${NRI_QOS_SRC_BIN:-/opt/nri/bin/nri-qos}
NRI_QOS=${NRI_QOS:-$NRI_QOS_SRC_BIN}
POLICY_SRC=${POLICY_SRC-/etc/nri-qos-policy/nri-qos.toml}
NRI_QOS_MODE=${NRI_QOS_MODE:-v01}
NRI_QOS_INDEX=${NRI_QOS_INDEX:-10}
NRI_QOS_PLUGIN_CONF=${NRI_QOS_PLUGIN_CONF:-}
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

case "$NRI_QOS_MODE" in v01|native|both) ;; *) die "NRI_QOS_MODE must be v01, native or both (got '$NRI_QOS_MODE')" 2 ;; esac
case "$NRI_QOS_INDEX" in [0-9][0-9]) ;; *) die "NRI_QOS_INDEX must be two digits (got '$NRI_QOS_INDEX')" 2 ;; esac
[ -d "$HOST_ROOT" ] || die "HOST_ROOT $HOST_ROOT is not a directory (mount the node's / there)" 2

case "$ACTION" in
install)
  [ -x "$NRI_QOS_SRC_BIN" ] || die "binary $NRI_QOS_SRC_BIN missing or not executable" 2
  install_file "$NRI_QOS_SRC_BIN" "$DST_BIN" 0755

  if [ -n "$POLICY_SRC" ]; then
    [ -f "$POLICY_SRC" ] || die "policy $POLICY_SRC missing (is the ConfigMap mounted?)" 2
    "$NRI_QOS" check "$POLICY_SRC" >/dev/null || die "policy $POLICY_SRC rejected by 'nri-qos check'; node left unchanged"
    if [ -f "$DST_POLICY" ] && ! cmp -s "$POLICY_SRC" "$DST_POLICY" && [ ! -e "$DST_POLICY.bak" ]; then
      cp -p "$DST_POLICY" "$DST_POLICY.bak"
      log "kept the node's previous policy as $DST_POLICY.bak"
    fi
    install_file "$POLICY_SRC" "$DST_POLICY" 0644
  fi

  set --
  [ -z "$NRI_QOS_PLUGIN_CONF" ] || set -- --plugin-conf "$NRI_QOS_PLUGIN_CONF"
  if [ "$NRI_QOS_MODE" != native ]; then
    "$NRI_QOS" register --conf-json "$CONF_JSON" "$@" || die "register in $CONF_JSON failed"
  fi
  if [ "$NRI_QOS_MODE" != v01 ]; then
    # Symlink content is the node's path; the same path exists in the image, so the existence
    # check inside `register --native` is meaningful.
    "$NRI_QOS" register --native --plugins-dir "$PLUGINS_DIR" --index "$NRI_QOS_INDEX" \
      --binary "$HOST_BIN" || die "native registration in $PLUGINS_DIR failed"
  fi
  log "done (mode $NRI_QOS_MODE)"
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
  die "usage: install.sh [install|uninstall]" 2
  ;;
esac

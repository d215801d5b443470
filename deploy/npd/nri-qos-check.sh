#!/bin/sh
# nri-qos health check for node-problem-detector's custom plugin monitor (nri-qos-plugin-monitor.json
# beside this file; docs/operations.md "Per-node trouble without ssh"). One check per call, the
# answer in NPD's plugin protocol (kubernetes/node-problem-detector pkg/custompluginmonitor/types
# types.go: exit 0 OK, 1 NonOK, 2 Unknown; the first line of stdout is the condition's message,
# cut by NPD at max_output_length):
#   relay        `nri-qos status --relay` (src/cli/status.cpp relay_liveness: exit 0 when the relay
#                service is alive and registered with the runtime, 1 otherwise) → OK / NonOK. A
#                node without a relay service (no STATE_DIR/relay.json: the runtime execs the hook
#                itself, modes v01/native) is OK.
#   policy       `nri-qos check POLICY` (exit 0 valid, 1 rejected: the hook runs on the last good
#                copy or the built-in policy) → OK / NonOK with the first error.
#   annotations  `nri-qos status`'s "annotations: <runtime> does not pass ..." line (pod annotations
#                the policy reads that the runtime does not pass to the v0.1 hook) → NonOK with it.
# Anything else (no binary, an unexpected exit status, bad usage) → Unknown.
#
# Usage: nri-qos-check.sh relay|policy|annotations
# Environment: NRI_QOS [/opt/nri/bin/nri-qos] (the node's static binary, mounted read-only into
#   NPD's container), NRI_QOS_STATE_DIR [/run/nri-qos], NRI_QOS_POLICY [/etc/nri/nri-qos.toml].
#   `status --relay` tells a live service from a stale file by its pid: NPD's pod needs hostPID.
NRI_QOS=${NRI_QOS:-/opt/nri/bin/nri-qos}
STATE_DIR=${NRI_QOS_STATE_DIR:-/run/nri-qos}
POLICY=${NRI_QOS_POLICY:-/etc/nri/nri-qos.toml}

unknown() { echo "nri-qos: $*"; exit 2; }
[ -x "$NRI_QOS" ] || unknown "no executable $NRI_QOS (mount the node's /opt/nri/bin)"

case "${1:-}" in
relay)
  if [ ! -e "$STATE_DIR/relay.json" ]; then
    echo "nri-qos: no relay service on this node (the runtime runs the hook itself)"
    exit 0
  fi
  out=$("$NRI_QOS" status --relay --state-dir "$STATE_DIR" 2>&1)
  rc=$?
  line=$(printf '%s\n' "$out" | head -n 1)
  case $rc in
    0) echo "nri-qos $line"; exit 0 ;;
    1) echo "nri-qos $line"; exit 1 ;;
    *) unknown "status --relay exited $rc: $line" ;;
  esac
  ;;
policy)
  out=$("$NRI_QOS" check "$POLICY" 2>&1)
  rc=$?
  case $rc in
    0) echo "nri-qos: policy $POLICY is valid"; exit 0 ;;
    1) echo "nri-qos: policy rejected: $(printf '%s\n' "$out" | sed -n 's/^nri-qos: //p' | head -n 1)"; exit 1 ;;
    *) unknown "check exited $rc: $(printf '%s\n' "$out" | head -n 1)" ;;
  esac
  ;;
annotations)
  out=$("$NRI_QOS" status --state-dir "$STATE_DIR" --policy "$POLICY" 2>&1)
  rc=$?
  [ $rc = 0 ] || unknown "status exited $rc: $(printf '%s\n' "$out" | head -n 1)"
  line=$(printf '%s\n' "$out" | grep -m1 '^annotations: ')
  if [ -n "$line" ]; then
    echo "nri-qos $line"
    exit 1
  fi
  echo "nri-qos: the runtime passes every annotation the policy reads"
  exit 0
  ;;
*)
  unknown "usage: nri-qos-check.sh relay|policy|annotations"
  ;;
esac

#!/bin/bash
# nri-qos as an NRI v0.1 one-shot hook under containerd 1.6 (Debian bookworm package, which has
# NRI v0.1 built into its CRI plugin) + runc, driven over CRI by cri/criclient.py.
# /opt/nri/bin/nri-qos = build/nri-qos, listed in /etc/nri/conf.json with conf.policy pointing at
# a test copy of the bundled policy. containerd 1.6 re-reads conf.json on every invocation.
#
#   containerd16.sh          run the scenarios (setup + teardown included)
#   containerd16.sh down     clean up after an E2E_KEEP=1 run
# Prints PASS/FAIL/SKIP lines on stdout (diagnostics on stderr); exit 1 if anything failed.
# Env: see docs/e2e.md (E2E_CGROUP_DRIVER=systemd is what the node VM uses).
# shellcheck disable=SC2034  # S, CTR, SHIM_PATH are read by lib.sh
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

S=c16
D=$E2E_WORK/containerd16
CONTAINERD=/usr/bin/containerd
CTR=/usr/bin/ctr
SHIM_PATH=""
[ "${1:-}" = down ] && DOWN_ONLY=1

up() {
  nri_backup
  log "containerd: $("$CONTAINERD" --version)"
  grep -aq /etc/nri/conf.json "$CONTAINERD" || { skip "$S" "$CONTAINERD has no NRI v0.1 support"; return 2; }
  if [ ! -x "$NRI_QOS_BIN" ]; then fail "$S-setup" "$NRI_QOS_BIN missing: run make"; return 1; fi
  install_test_policy "$D/policy/nri-qos.toml" || { fail "$S-setup" "test policy $TEST_POLICY unusable"; return 1; }
  BUNDLED_COPY=$D/policy/bundled.toml; install -D -m 0644 "$BUNDLED_POLICY" "$BUNDLED_COPY"
  write_fail_closed_policy "$D/policy/fail-closed.toml"
  rm -rf /opt/nri/bin /etc/nri/conf.json
  install -D -m 0755 "$NRI_QOS_BIN" /opt/nri/bin/nri-qos
  # systemd driver: the companion that sets unit properties, where the hook looks for it
  if [ "$E2E_CGROUP_DRIVER" = systemd ] && [ -x "$(dirname "$NRI_QOS_BIN")/nri-qos-systemd" ]; then
    install -D -m 0755 "$(dirname "$NRI_QOS_BIN")/nri-qos-systemd" /usr/libexec/nri-qos/nri-qos-systemd
  fi
  set_v01_conf "$D/policy/nri-qos.toml"
  write_config_common ""
  start_containerd || { fail "$S-setup" "containerd did not start (see $D/logs/containerd.log)"; return 1; }
  import_image
}

scenarios() {
  # 1. class from the pod label
  want be-label && sc_be "$S-be-label" be-label burstable --label koordinator.sh/qosClass=BE
  # 2. no class label, burstable pod -> LS (CPU burst = 100 % of quota)
  want ls-burst && sc_ls "$S-ls-burst" ls-burst
  # 3. no class label, BestEffort pod -> BE from the kube QoS class (cgroup parent)
  want be-kube && sc_be "$S-be-kube" be-kube besteffort
  # 4. class from an allow-listed pod annotation (pod_annotations = ["*", "*/*"])
  want be-annotation && host_only && sc_be "$S-be-annotation" be-annotation burstable --annotation openfuyao.com/qos-level=BE
  # 5. cgroup v2 knobs of the test class (v2 hosts only)
  want v2-knobs && sc_knobs "$S-v2-knobs" knobs
  # 6. kubelet-style UpdateContainerResources undoes cpu.shares; nri-qos reconcile restores it
  want reconcile && sc_reconcile "$S-reconcile"
  # 6b. cgroup v2: nri-qos's weights on the scale of runc's (issue #24; bundled policy, auto)
  want weight-order && [ "$LAYOUT" = v2 ] && sc_weight_order "$S-weight-order"
  # 6c. containerd without the pod_annotations allow-list: the batch pod's record says the
  #     annotation is not passed (issue #25 §1); containerd restarted, host only
  want not-passed && host_only && sc_not_passed "$S-not-passed"
  # 6d. a pod started before nri-qos was registered, adopted by reconcile --discover over CRI
  want discover && sc_discover "$S-discover"
  # 6c. systemd driver: nri-qos's values survive `systemctl daemon-reload` (issue #25 §2)
  want daemon-reload && [ "$E2E_CGROUP_DRIVER" = systemd ] && sc_daemon_reload "$S-daemon-reload"
  # 7. fail-closed class with a knob the kernel rejects -> StartContainer fails
  set_v01_conf "$D/policy/fail-closed.toml"
  want fail-closed && sc_fail_closed "$S-fail-closed" "$D/policy/fail-closed.toml"
  set_v01_conf "$D/policy/nri-qos.toml"
  # 8. node VM only: the .deb over its life on the node (issue #25, issue #20 "deb upgraded"), in
  #    this order, each step needing the ones before it (selecting one runs them all): pkg-install
  #    (allow-list warning, a running pod adopted), pkg-not-passed, pkg-pass-annotations,
  #    pkg-reconcile (quiet pass, then one correction), pkg-upgrade, pkg-purge
  if [ -n "$E2E_NODE_SUBSET" ] && { want pkg-install || want pkg-not-passed || want pkg-pass-annotations ||
       want pkg-reconcile || want pkg-upgrade || want pkg-purge; }; then
    sc_pkg_lifecycle "$S"
  fi
}

suite_main up scenarios

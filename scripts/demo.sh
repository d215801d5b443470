#!/bin/bash
# `make demo`: run nri-qos on real requests captured from containerd 1.6.20 (bundled in
# tests/fixtures/requests/) with the bundled default policy, against a scratch cgroup v1 tree
# that mirrors the request's cgroupsPath, and show the Result and the files written.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/nri-qos
POLICY=conf/nri.d/nri-qos.toml
REQ=tests/fixtures/requests/containerd-1.6.20
ROOT=$(mktemp -d /tmp/nri-qos-demo.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT

ctr=$(jq -r .spec.cgroupsPath "$REQ/container-create.json" | sed 's#^/##')
pod=${ctr%/*}
pid=$(jq -r .pid "$REQ/container-create.json")
# The same pod as a Koordinator batch pod: kube-BestEffort (batch-* extended resources do not count
# for the QoS class), label koordinator.sh/qosClass=BE, and the annotation koord-manager's webhook
# writes from its batch resources (batch-cpu request 500m / limit 1k, batch-memory limit 256Mi).
bectr=kubepods/besteffort/${ctr#kubepods/burstable/}
bepod=${bectr%/*}
SPEC='{"containers":{"cgfs-ctr":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"256Mi"},"requests":{"kubernetes.io/batch-cpu":"500","kubernetes.io/batch-memory":"256Mi"}}}}'
batch() { jq -c --arg p "/$bectr" --arg sp "/$bepod/$(jq -r .id "$REQ/sandbox-create.json")" --arg s "$SPEC" '
  .labels["koordinator.sh/qosClass"]="BE" | .spec.annotations["node.koordinator.sh/extended-resource-spec"]=$s
  | .spec.resources={} | .spec.cgroupsPath=(if .id == .sandboxID then $sp else $p end)' "$1"; }
# What kubelet and runc leave in a BestEffort pod's cgroups: shares 2, no CFS quota, no limit.
for d in "$ctr" "$bectr"; do
  for c in cpu memory; do mkdir -p "$ROOT/$c/$d"; done
  for x in "$d" "${d%/*}"; do
    echo 2 > "$ROOT/cpu/$x/cpu.shares"; echo -1 > "$ROOT/cpu/$x/cpu.cfs_quota_us"; echo 0 > "$ROOT/cpu/$x/cpu.cfs_burst_us"
    echo 9223372036854771712 > "$ROOT/memory/$x/memory.limit_in_bytes"
  done
done
# The operator's declaration that only koord-manager writes the batch annotation (its webhook and
# an admission policy keep pod authors from it): the bundled policy's commented [guarded] line,
# enabled. Without it the batch facts only restrict (quota, memory limit) and the batch
# cpu.shares above kubelet's 2 is refused with the key to declare (man 5 nri-qos.toml, Trust).
POLICY_K=$ROOT/nri-qos-koordinator.toml
sed 's|^# "node.koordinator.sh/extended-resource-spec" = |"node.koordinator.sh/extended-resource-spec" = |' "$POLICY" > "$POLICY_K"
grep -q '^"node.koordinator.sh/extended-resource-spec"' "$POLICY_K" || { echo "demo: the bundled policy has no Koordinator [guarded] line" >&2; exit 1; }
mkdir -p "$ROOT/proc/$pid"; echo 0 > "$ROOT/proc/$pid/oom_score_adj"
run() { "$BIN" invoke --policy "${P:-$POLICY}" --cgroup-root "$ROOT" --cgroup-layout v1 --proc-root "$ROOT/proc" \
          --state-dir "$ROOT/state" --cache-dir "$ROOT/cache" --last-good-dir "$ROOT/last-good"; }

echo "### 1. The sandbox and container requests exactly as containerd 1.6.20 sent them (a Burstable pod, no colocation class)"
echo "\$ nri-qos invoke < $REQ/container-create.json"
run < "$REQ/sandbox-create.json" >/dev/null
run < "$REQ/container-create.json" | jq .
echo
echo "### 2. The same pod as a Koordinator batch pod (label koordinator.sh/qosClass=BE, node.koordinator.sh/extended-resource-spec)"
echo "#    with the bundled policy plus the operator's declaration: [guarded.annotations] \"node.koordinator.sh/extended-resource-spec\""
batch "$REQ/sandbox-create.json" | P=$POLICY_K run | jq -c '{class: .metadata.class, applied: .metadata.applied}'
batch "$REQ/container-create.json" | P=$POLICY_K run | jq .
echo
echo "### Files in the scratch cgroup tree after the hook ran (koordlet's batchresource hook writes the same):"
for f in "pod cpu/$bepod/cpu.shares" "pod cpu/$bepod/cpu.cfs_quota_us" "pod memory/$bepod/memory.limit_in_bytes" \
         "container cpu/$bectr/cpu.shares" "container cpu/$bectr/cpu.cfs_quota_us" "container memory/$bectr/memory.limit_in_bytes"; do
  printf '  %-10s %-22s %s\n' "${f%% *}" "${f##*/}" "$(cat "$ROOT/${f#* }")"
done
echo
echo "### explain (dry run) of the batch container: where each value comes from"
batch "$REQ/container-create.json" | \
  "$BIN" explain --policy "$POLICY_K" --cgroup-root "$ROOT" --cgroup-layout v1 --proc-root "$ROOT/proc" --state-dir "$ROOT/state" --cache-dir ""

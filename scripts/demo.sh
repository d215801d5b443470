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
for c in cpu memory; do mkdir -p "$ROOT/$c/$ctr"; done
for f in cpu.shares cpu.cfs_burst_us cpu.idle; do echo "(kernel default)" > "$ROOT/cpu/$ctr/$f"; echo "(kernel default)" > "$ROOT/cpu/$pod/$f"; done
mkdir -p "$ROOT/proc/$pid"; echo 0 > "$ROOT/proc/$pid/oom_score_adj"
run() { "$BIN" invoke --policy "$POLICY" --cgroup-root "$ROOT" --cgroup-layout v1 --proc-root "$ROOT/proc" \
          --state-dir "$ROOT/state" --cache-dir "$ROOT/cache"; }

echo "### 1. The sandbox and container requests exactly as containerd 1.6.20 sent them (a Burstable pod, no class label)"
echo "\$ nri-qos invoke < $REQ/container-create.json"
run < "$REQ/sandbox-create.json" >/dev/null
run < "$REQ/container-create.json" | jq .
echo
echo "### 2. The same pod labelled koordinator.sh/qosClass=BE (offline work)"
jq -c '.labels["koordinator.sh/qosClass"]="BE"' "$REQ/sandbox-create.json" | run | jq -c '{class: .metadata.class, applied: .metadata.applied}'
jq -c '.labels["koordinator.sh/qosClass"]="BE"' "$REQ/container-create.json" | run | jq .
echo
echo "### Files in the scratch cgroup tree after the hook ran:"
for f in "container cpu/$ctr/cpu.shares" "container cpu/$ctr/cpu.cfs_burst_us" "process proc/$pid/oom_score_adj"; do
  printf '  %-10s %-22s %s\n' "${f%% *}" "${f##*/}" "$(cat "$ROOT/${f#* }")"
done
echo
echo "### explain (dry run) of the BE container:"
jq -c '.labels["koordinator.sh/qosClass"]="BE"' "$REQ/container-create.json" | \
  "$BIN" explain --policy "$POLICY" --cgroup-root "$ROOT" --cgroup-layout v1 --proc-root "$ROOT/proc" --state-dir "$ROOT/state" --cache-dir ""

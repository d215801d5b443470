#!/bin/bash
# nri-qos real-containerd end-to-end suite (`make e2e`). Runs, one after the other:
#   containerd16.sh          containerd 1.6.20 (bookworm) + runc, nri-qos as NRI v0.1 hook
#   containerd17.sh adapter  containerd 1.7.24 (trixie) + runc, v0.1 path via the test-only adapter
#   containerd17.sh native   containerd 1.7.24 native NRI, nri-qos as /opt/nri/plugins/10-nri-qos
# Prints every suite's `PASS name` / `FAIL name (why)` / `SKIP name (why)` lines and a final
# `e2e: N passed, N failed` (skips are counted on a separate line). Exit 1 on any FAIL.
# Skips cleanly (exit 0) when the machine does not allow it: not root, no cgroup mount, apt
# unavailable, another containerd running. Suite diagnostics go to stderr (and to
# $E2E_WORK/<suite>/logs/). Env: see docs/e2e.md. Select suites: run.sh [16] [adapter] [native].
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

suites=("$@"); [ ${#suites[@]} = 0 ] && suites=(16 adapter native)
why=$(preflight)
if [ -n "$why" ]; then echo "SKIP e2e ($why)"; echo "e2e: 0 passed, 0 failed"; exit 0; fi

T0=$SECONDS; out=$(mktemp); rc=0
for s in "${suites[@]}"; do
  t=$SECONDS
  case $s in
    16) cmd=(bash "$HERE/containerd16.sh") ;;
    adapter|native) cmd=(bash "$HERE/containerd17.sh" "$s") ;;
    *) echo "run.sh: unknown suite '$s' (16, adapter, native)" >&2; rm -f "$out"; exit 2 ;;
  esac
  # stdin closed: nothing may wait for a terminal (CI)
  "${cmd[@]}" </dev/null | tee "$out.one"; st=${PIPESTATUS[0]}
  cat "$out.one" >> "$out"
  if [ "$st" != 0 ] && ! grep -q '^FAIL ' "$out.one"; then
    echo "FAIL suite-$s (exited with status $st without a FAIL line)" | tee -a "$out"
  fi
  [ "$st" = 0 ] || rc=1
  rm -f "$out.one"
  log "suite $s: $((SECONDS - t)) s"
done
np=$(grep -c '^PASS ' "$out"); nf=$(grep -c '^FAIL ' "$out"); ns=$(grep -c '^SKIP ' "$out")
rm -f "$out"
[ "$ns" = 0 ] || echo "e2e: $ns skipped"
echo "e2e: $np passed, $nf failed"
log "e2e total: $((SECONDS - T0)) s"
[ "$nf" = 0 ] && [ $rc = 0 ]

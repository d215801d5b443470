#!/bin/bash
# nri-qos real-containerd end-to-end suite (`make e2e`). Suites:
#   16        containerd16.sh           containerd 1.6.20 (bookworm) + runc, nri-qos as NRI v0.1 hook
#   adapter   containerd17.sh adapter   containerd 1.7.24 (trixie), v0.1 path via the test-only adapter
#   native    containerd17.sh native    containerd 1.7.24 native NRI (0.6), the relay in /opt/nri/plugins
#   native21  containerd17.sh native 2.1  containerd 2.1.x (sid) native NRI (0.8), the relay
#   native22  containerd17.sh native 2.2  containerd v2.2.7 (../shared/runtimes) native NRI (0.11)
#   native23  containerd17.sh native 2.3  containerd v2.3.4 (../shared/runtimes) native NRI (0.12:
#                                         dedicated event RPCs); both SKIP without ../shared/runtimes
#   vm        nodevm.sh                 a systemd + cgroup v2 node in a qemu VM: 16 and native21
#                                       inside it, systemd cgroup driver
# The host suites share /etc/nri and /opt/nri and run one after the other (and take a lock); the
# VM touches nothing of the host's NRI paths, so it runs at the same time, started first (it is
# the longest). Prints every suite's `PASS name` / `FAIL name (why)` / `SKIP name (why)` lines and
# a final `e2e: N passed, N failed` (skips on a line of their own). Exit 1 on any FAIL.
# Skips cleanly (exit 0) when the machine does not allow it: not root, no cgroup mount, apt
# unavailable, another containerd running. Diagnostics go to stderr (and $E2E_WORK/<suite>/logs/).
# Env: docs/e2e.md. Select suites: run.sh [16] [adapter] [native] [native21] [native22] [native23] [vm].
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

suites=("$@"); [ ${#suites[@]} = 0 ] && suites=(16 adapter native native21 native22 native23 vm)
why=$(preflight)
if [ -n "$why" ]; then echo "SKIP ${E2E_PREFIX}e2e ($why)"; echo "e2e: 0 passed, 0 failed"; exit 0; fi

suite_cmd() {
  case $1 in
    16) echo "$HERE/containerd16.sh" ;;
    adapter) echo "$HERE/containerd17.sh adapter" ;;
    native) echo "$HERE/containerd17.sh native 1.7" ;;
    native21) echo "$HERE/containerd17.sh native 2.1" ;;
    native22) echo "$HERE/containerd17.sh native 2.2" ;;
    native23) echo "$HERE/containerd17.sh native 2.3" ;;
    vm) echo "$HERE/nodevm.sh" ;;
    *) return 1 ;;
  esac
}
for s in "${suites[@]}"; do
  suite_cmd "$s" >/dev/null || { echo "run.sh: unknown suite '$s' (16, adapter, native, native21, native22, native23, vm)" >&2; exit 2; }
done

T0=$SECONDS
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# run_one NAME: one suite, stdin closed (nothing may wait for a terminal); its lines to stdout
# and $OUT/NAME; a suite that dies without a FAIL line is reported as FAIL suite-NAME.
run_one() {
  local s=$1 t=$SECONDS st
  # shellcheck disable=SC2046
  bash $(suite_cmd "$s") </dev/null | tee "$OUT/$s"; st=${PIPESTATUS[0]}
  if [ "$st" != 0 ] && ! grep -q '^FAIL ' "$OUT/$s"; then
    echo "FAIL ${E2E_PREFIX}suite-$s (exited with status $st without a FAIL line)" | tee -a "$OUT/$s"
  fi
  echo "$st" > "$OUT/$s.rc"
  log "suite $s: $((SECONDS - t)) s"
}

vm_pid=""
for s in "${suites[@]}"; do
  [ "$s" = vm ] && { run_one vm & vm_pid=$!; }
done
for s in "${suites[@]}"; do
  [ "$s" = vm ] || run_one "$s"
done
[ -n "$vm_pid" ] && wait "$vm_pid"

cat "$OUT"/*.rc >/dev/null 2>&1
np=$(cat "$OUT"/* 2>/dev/null | grep -c '^PASS ')
nf=$(cat "$OUT"/* 2>/dev/null | grep -c '^FAIL ')
ns=$(cat "$OUT"/* 2>/dev/null | grep -c '^SKIP ')
rc=0; for f in "$OUT"/*.rc; do [ "$(cat "$f")" = 0 ] || rc=1; done
[ "$ns" = 0 ] || echo "e2e: $ns skipped"
echo "e2e: $np passed, $nf failed"
log "e2e total: $((SECONDS - T0)) s"
[ "$nf" = 0 ] && [ $rc = 0 ]

#!/bin/bash
# Conformance suite: nri-qos against the seed systems' node agents (issue #10 §4).
# Runs every case under tests/conformance/cases through `nri-qos invoke` and `nri-qos nri-eval`
# on scratch cgroup v1 and v2 trees and compares the files with what that system's node agent
# (plus kubelet) ends with. Prints PASS/FAIL/SKIP lines and the table system x behaviour; exits
# non-zero on any difference not listed in differences.json. See README.md.
#   tests/conformance/run.sh [--case 'koordinator/*'] [--layout v1|v2] [--path invoke|nri] [-v]
#   tests/conformance/run.sh --selftest      # checks the runner itself
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
export NRI_QOS_BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
command -v python3 >/dev/null || { echo "FAIL conformance: python3 missing (scripts/deps.sh test)"; exit 1; }
[ -x "$NRI_QOS_BIN" ] || { echo "FAIL conformance: binary $NRI_QOS_BIN missing (run make)"; exit 1; }
if python3 "$HERE/gen.py" --check >/tmp/nri-qos-conf-gen.$$ 2>&1; then
  echo "PASS conformance: generated fixtures match case.json (gen.py --check)"
else
  echo "FAIL conformance: fixtures out of date, run python3 tests/conformance/gen.py: $(tr '\n' ' ' </tmp/nri-qos-conf-gen.$$)"
  rm -f /tmp/nri-qos-conf-gen.$$; exit 1
fi
rm -f /tmp/nri-qos-conf-gen.$$
if [ "${1:-}" = --selftest ]; then
  shift; exec python3 "$HERE/selftest.py" "$@"
fi
# A full run with the bundled policy also checks that docs/conformance.md shows this table.
if [ $# = 0 ] && [ -z "${NRI_QOS_POLICY:-}" ]; then
  exec python3 "$HERE/conformance.py" --markdown-check "$TOP/docs/conformance.md"
fi
exec python3 "$HERE/conformance.py" "$@"

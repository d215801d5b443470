#!/bin/bash
# Same Results from two builds: every captured request (tests/fixtures/requests, the conformance
# cases' v0.1 and native requests), with the bundled policy and the test fixture policies, through
# `invoke` (v0.1) or `nri-eval` (native) of OLD and NEW, each on a scratch cgroup root of its own;
# stdout (the Result or the native answer) and the exit code must be byte-identical.
# For changes that must not change behaviour (issue #23: the src/ layout).
#
#   scripts/same-results.sh OLD_BINARY [NEW_BINARY (default build/nri-qos)]
#   e.g. git worktree add /tmp/old HEAD~3 && make -C /tmp/old && scripts/same-results.sh /tmp/old/build/nri-qos
#
# Exit 0 when every run matches, 1 with the first differences otherwise.
set -u
OLD=${1:?usage: scripts/same-results.sh OLD_BINARY [NEW_BINARY]}
NEW=${2:-build/nri-qos}
TOP=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/nri-qos-same.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

run() {  # BIN MODE POLICY REQUEST OUT
  local root="$TMP/root"
  rm -rf "$root"; mkdir -p "$root/cg" "$root/state" "$root/resctrl"
  "$1" "$2" --policy "$3" --cgroup-root "$root/cg" --cgroup-layout v1 --state-dir "$root/state" \
    --cache-dir "" --last-good-dir "" --metrics-file "" --event-log "" --resctrl-root "$root/resctrl" \
    --systemd-helper "" --kubelet-cpu-state "" <"$4" >"$5" 2>/dev/null
  echo "exit $?" >>"$5"
}

n=0 bad=0
policies=("$TOP/conf/nri.d/nri-qos.toml" "$TOP"/tests/fixtures/policy/*.toml)
while IFS= read -r req; do
  case "$req" in
    */nri/*|*/nri-events/*) mode=nri-eval ;;
    *) mode=invoke ;;
  esac
  for pol in "${policies[@]}"; do
    run "$OLD" "$mode" "$pol" "$req" "$TMP/old"
    run "$NEW" "$mode" "$pol" "$req" "$TMP/new"
    n=$((n + 1))
    if ! cmp -s "$TMP/old" "$TMP/new"; then
      bad=$((bad + 1))
      if [ "$bad" -le 3 ]; then
        echo "DIFF $mode ${req#"$TOP"/} with ${pol#"$TOP"/}:"
        diff "$TMP/old" "$TMP/new" | head -n 6
      fi
    fi
  done
done < <(find "$TOP/tests/fixtures/requests" "$TOP/tests/conformance/cases" -name '*.json' -path '*requests*' | sort)
echo "same-results: $n runs, $((n - bad)) identical, $bad different"
[ "$bad" -eq 0 ]

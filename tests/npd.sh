#!/bin/bash
# tests/npd.sh — the node-problem-detector plugin (deploy/npd, issue #33 §6), run by tests/run.sh.
# The check script against the real binary and a scratch state directory, in NPD's protocol
# (exit 0 OK, 1 NonOK, 2 Unknown; the message on stdout):
#   npd-config            the plugin monitor config parses; every rule runs the script with a
#                         check it knows, on a condition the config declares
#   npd-relay-none        no relay.json (modes v01/native): OK
#   npd-relay-registered  a live nri-qos service, registered: OK with status's line
#   npd-relay-unregistered  alive, not registered: NonOK
#   npd-relay-down        the service's pid gone (a stale relay.json): NonOK, "DOWN"
#   npd-policy-valid / npd-policy-rejected  `nri-qos check`: OK / NonOK with the error
#   npd-annotations       status's "annotations: ... does not pass" line → NonOK (a stand-in
#                         binary prints it), none → OK
#   npd-unknown           no binary, an unknown check: Unknown
# Env: NRI_QOS_BIN (default build/nri-qos). Output: PASS/FAIL/SKIP lines; exit 1 on a failure.
set -u
cd "$(dirname "$0")/.."
BIN=${NRI_QOS_BIN:-$PWD/build/nri-qos}
S=$PWD/deploy/npd/nri-qos-check.sh
FAILS=0
TMP=$(mktemp -d /tmp/nri-qos-npd.XXXXXX)
holder=
trap '[ -n "$holder" ] && kill $holder 2>/dev/null; rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; FAILS=$((FAILS + 1)); }
[ -x "$BIN" ] || { fail "npd-prerequisites: need $BIN (make)"; exit 1; }

# run CHECK [ENV...]: sets rc and out
run() { local c=$1; shift; out=$(env NRI_QOS="$BIN" NRI_QOS_STATE_DIR="$TMP/state" NRI_QOS_POLICY="$TMP/policy.toml" "$@" sh "$S" "$c" 2>&1); rc=$?; }
expect() {  # NAME RC PATTERN
  if [ "$rc" = "$2" ] && printf '%s' "$out" | grep -q -- "$3"; then pass "$1: exit $rc, $out"
  else fail "$1: exit $rc (want $2), output: $out (want /$3/)"; fi
}

if python3 - deploy/npd/nri-qos-plugin-monitor.json "$S" <<'PY'
import json, re, sys
c = json.load(open(sys.argv[1]))
script = open(sys.argv[2]).read()
checks = set(re.findall(r"^([a-z]+)\)$", script, re.M))
conds = {x["type"] for x in c["conditions"]}
assert c["plugin"] == "custom" and c["rules"], c
for r in c["rules"]:
    assert r["type"] == "permanent" and r["condition"] in conds, r
    assert r["path"].endswith("/nri-qos-check.sh") and len(r["args"]) == 1 and r["args"][0] in checks, (r, checks)
assert {r["condition"] for r in c["rules"]} == conds
PY
then pass "npd-config"; else fail "npd-config"; fi

mkdir -p "$TMP/state"
cp conf/nri.d/nri-qos.toml "$TMP/policy.toml"
run relay; expect npd-relay-none 0 "no relay service"

# a live process whose argv[0] names nri-qos stands for the service (status checks /proc/PID/cmdline)
bash -c 'exec -a nri-qos-relay-standin sleep 60' &
holder=$!
sleep 0.2
now=$(date +%s)
printf '{"pid":%d,"started":%d,"relay_pid":%d,"connected":true,"registered":true,"runtime":"containerd","runtime_version":"2.1.4","nri_version":"v0.10.0","reconnects":0,"connected_since":%d,"last_sync":%d,"socket":"/var/run/nri/nri.sock"}\n' \
  "$holder" "$now" "$holder" "$now" "$now" > "$TMP/state/relay.json"
run relay; expect npd-relay-registered 0 "relay: up .*registered with containerd"
sed -i 's/"registered":true/"registered":false/' "$TMP/state/relay.json"
run relay; expect npd-relay-unregistered 1 "relay: up"
kill $holder; wait $holder 2>/dev/null; holder=
run relay; expect npd-relay-down 1 "relay: DOWN"

run policy; expect npd-policy-valid 0 "is valid"
printf 'version = 1\n[classes.X.container]\ncpu_shares = "lots"\n' > "$TMP/policy.toml"
run policy; expect npd-policy-rejected 1 "policy rejected: .*cpu_shares"
cp conf/nri.d/nri-qos.toml "$TMP/policy.toml"

run annotations; expect npd-annotations-passed 0 "passes every annotation"
printf '#!/bin/sh\necho "3 recorded, 0 knob(s) drifted"\necho "annotations: containerd does not pass volcano.sh/qos-level to the hook"\n' > "$TMP/fake"
chmod +x "$TMP/fake"
run annotations NRI_QOS="$TMP/fake"; expect npd-annotations 1 "does not pass volcano.sh/qos-level"

run relay NRI_QOS=/nonexistent/nri-qos; expect npd-unknown-no-binary 2 "no executable"
run bogus; expect npd-unknown-check 2 "usage"

[ "$FAILS" = 0 ]

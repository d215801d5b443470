# Helpers for the shell-level suites (source it). Each suite prints PASS/FAIL/SKIP lines and
# exits non-zero when anything failed.
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${NRI_QOS_BIN:-$TOP/build/nri-qos}
# The mechanics suites run on a fixture policy whose classes write on every event (its header
# says why); the bundled policy is tested by tests/conformance and tests/facts.sh.
POLICY=$TOP/tests/fixtures/policy/classic.toml
BUNDLED=$TOP/conf/nri.d/nri-qos.toml
FIX=$TOP/tests/fixtures
FAILED=0
CLEANUP=()
# QEMU_USER, DEADLINE_MS: is the binary under test emulated, and its default deadline
. "$TOP/tests/emulation.sh"

pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILED=1; }
skip() { echo "SKIP $*"; }
on_exit() { # run cleanups in reverse order of registration
  local i
  for ((i=${#CLEANUP[@]}-1; i>=0; i--)); do eval "${CLEANUP[$i]}" 2>/dev/null || true; done
}
trap on_exit EXIT
finish() { exit "$FAILED"; }

# check NAME ACTUAL EXPECTED
check() {
  if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi
}
# check_contains NAME HAYSTACK NEEDLE
check_contains() {
  case "$2" in *"$3"*) pass "$1" ;; *) fail "$1: '$3' not in '${2:0:400}'" ;; esac
}

# jq_get JSON FILTER
jq_get() { printf '%s' "$1" | jq -r "$2"; }

# A scratch cgroup v1 tree mirroring the real layout (cpu, memory, pids, blkio, cpuset) with the
# files nri-qos writes, for cgroup dir $2 (relative) under root $1.
mk_v1_dir() {
  local root=$1 rel=$2 c
  for c in cpu memory pids blkio cpuset; do mkdir -p "$root/$c/$rel"; done
  for f in cpu.shares cpu.cfs_quota_us cpu.cfs_period_us cpu.cfs_burst_us cpu.idle; do : > "$root/cpu/$rel/$f"; done
  for f in memory.limit_in_bytes memory.soft_limit_in_bytes; do : > "$root/memory/$rel/$f"; done
  : > "$root/pids/$rel/pids.max"; : > "$root/blkio/$rel/blkio.weight"
  : > "$root/cpuset/$rel/cpuset.cpus"; : > "$root/cpuset/$rel/cpuset.mems"
}
mk_v2_dir() {
  local root=$1 rel=$2
  mkdir -p "$root/$rel"
  for f in cpu.weight cpu.max cpu.max.burst cpu.idle memory.max memory.high memory.low memory.min memory.swap.max pids.max io.weight cpuset.cpus cpuset.mems; do
    : > "$root/$rel/$f"
  done
  echo "max 100000" > "$root/$rel/cpu.max"
}

# nodefault CMD...: run CMD with no file at the default policy path /etc/nri/nri-qos.toml (the
# built-in policy applies): /etc/nri is hidden behind an empty tmpfs in a private mount
# namespace when the machine has one. can_hide_default_policy: whether that is possible here.
nodefault() {
  if [ -e /etc/nri ]; then
    unshare -m --propagation private sh -c 'mount -t tmpfs nri-qos-test /etc/nri && exec "$@"' sh "$@"
  else
    "$@"
  fi
}
can_hide_default_policy() { [ ! -e /etc/nri ] || unshare -m --propagation private true 2>/dev/null; }

# scratch: print a fresh temp dir, removed at exit. Suites call it as R=$(scratch), in a
# subshell, where an addition to CLEANUP is lost: every scratch dir is made inside one directory
# per suite, created and registered here, in the suite's own shell (tests/hygiene.sh checks).
SCRATCH_ROOT=$(mktemp -d /tmp/nri-qos-test.XXXXXX)
CLEANUP+=("rm -rf '$SCRATCH_ROOT'")
scratch() { mktemp -d "$SCRATCH_ROOT/s.XXXXXX"; }

# valid_result NAME OUTPUT: one JSON object with plugin/version/error/metadata, metadata all strings
valid_result() {
  if printf '%s' "$2" | jq -e 'type=="object" and (.plugin|type=="string") and (.version|type=="string") and (.error|type=="string") and (.metadata|type=="object") and ([.metadata[]|type=="string"]|all)' >/dev/null 2>&1; then
    pass "$1: valid Result"
  else
    fail "$1: not a valid Result: ${2:0:300}"
  fi
}

# discover_node: the scratch node of tests/discover.sh and tests/unseen.sh, from the captured CRI
# listing of containerd 1.6.20 (DOC): a v1 cgroup tree (R) with the pod, its sandbox (SB, shares 2)
# and its container (CT, CRI's shares 512), /proc entries of both pids, and the paths ST (state
# dir), LOG (event log) and PROM (metrics) under the scratch directory S.
discover_node() {
  DOC=$FIX/cri/containerd-1.6.20-discover.json
  S=$(scratch); R=$S/cg; ST=$S/state; LOG=$S/events.log; PROM=$S/m.prom
  SB=$(jq -r '.sandboxes[0].id' "$DOC"); CT=$(jq -r '.containers[0].id' "$DOC")
  POD_REL=$(jq -r '.sandboxes[0].info.info.config.linux.cgroup_parent' "$DOC" | sed 's|^/||')
  mk_v1_dir "$R" "$POD_REL"; mk_v1_dir "$R" "$POD_REL/$SB"; mk_v1_dir "$R" "$POD_REL/$CT"
  echo 2 > "$R/cpu/$POD_REL/$SB/cpu.shares"; echo 512 > "$R/cpu/$POD_REL/$CT/cpu.shares"
  mkdir -p "$S/proc/4300" "$S/proc/4242"; echo 0 > "$S/proc/4300/oom_score_adj"; echo -998 > "$S/proc/4242/oom_score_adj"
}

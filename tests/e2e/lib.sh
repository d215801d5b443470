#!/bin/bash
# Helpers for the real-containerd end-to-end suites (containerd16.sh, containerd17.sh).
# Source, don't run. Every suite:
#   - prints ONLY result lines on stdout: `PASS name`, `FAIL name (why)`, `SKIP name (why)`;
#     diagnostics go to stderr;
#   - runs one isolated containerd (own root/state/sockets under $D) started with setsid;
#   - on exit (trap, also on failure or signal) stops everything it started BY PID, unmounts,
#     removes its cgroups and restores /etc/nri, /opt/nri and /run/nri-qos from a backup.
# Global paths containerd hard-codes (/etc/nri/conf.json, /opt/nri/bin, /opt/nri/plugins,
# /etc/nri/conf.d) are shared by all suites: a flock serialises them (run one suite at a time).

E2E_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E_HERE/../.." && pwd)
PY=/usr/bin/python3                       # Debian python: has python3-grpcio/grpc-tools
E2E_CACHE=${E2E_CACHE:-/var/cache/nri-qos-e2e}
E2E_WORK=${E2E_WORK:-/var/lib/nri-qos-e2e} # per-suite state dirs + the /etc/nri backup
NRI_QOS_BIN=${NRI_QOS_BIN:-$REPO/build/nri-qos}
BUNDLED_POLICY=${E2E_POLICY:-$REPO/conf/nri.d/nri-qos.toml}
IMAGE=localhost/e2e/busybox:1             # workload image (mkimage.py, busybox-static)
PAUSE=localhost/e2e/pause:1               # CRI sandbox_image (same image)
UIDP=0e2e0000                             # every test pod uid starts with this (cleanup key)
BACKUP=$E2E_WORK/nri-backup               # copy of /etc/nri, /opt/nri, /run/nri-qos before a suite
BACKUP_PATHS=(/etc/nri /opt/nri /run/nri-qos)
APT_PKGS=(containerd runc python3-grpcio python3-grpc-tools busybox-static jq debian-archive-keyring)
export CRI_PYGEN_DIR=$E2E_CACHE/cri-pygen  # generated python gRPC stubs

NPASS=0; NFAIL=0; NSKIP=0

log() { echo "[$(date +%T)] $*" >&2; }
pass() { echo "PASS $1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL $1${2:+ ($2)}"; NFAIL=$((NFAIL + 1)); log "FAIL $1: ${2:-}"; }
skip() { echo "SKIP $1${2:+ ($2)}"; NSKIP=$((NSKIP + 1)); }

# check NAME "what went wrong" COMMAND...: PASS when COMMAND succeeds, else FAIL with the message.
check() {
  local name=$1 why=$2; shift 2
  if "$@"; then pass "$name"; else fail "$name" "$why"; fi
}

# ---------------------------------------------------------------------------------------------
# Preconditions. preflight prints the reason the machine cannot run the e2e (empty = it can).
# ---------------------------------------------------------------------------------------------
cgroup_layout() { # v1 (cpu controller mounted at /sys/fs/cgroup/cpu) | v2 | none
  if [ -f /sys/fs/cgroup/cpu/cpu.shares ]; then echo v1
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then echo v2
  else echo none; fi
}

apt_missing() {
  local p miss=()
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || miss+=("$p")
  done
  echo "${miss[*]}"
}

# Install missing Debian packages (waits for another apt/dpkg to finish). Non-zero on failure.
apt_ensure() {
  local miss; miss=$(apt_missing)
  [ -z "$miss" ] && return 0
  command -v apt-get >/dev/null || return 1
  log "apt-get install $miss"
  for _ in 1 2 3 4 5 6; do   # apt-get update has no lock timeout of its own: retry
    apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null >&2 && break
    sleep 10
  done
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends $miss </dev/null >&2 || return 1
  [ -z "$(apt_missing)" ]
}

preflight() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return; }
  [ "$(cgroup_layout)" != none ] || { echo "no cgroup v1 cpu controller or cgroup v2 mount under /sys/fs/cgroup"; return; }
  command -v dpkg-query >/dev/null || { echo "not a Debian system (no dpkg)"; return; }
  if [ -n "$(apt_missing)" ] && ! apt_ensure; then
    echo "apt unavailable: cannot install $(apt_missing)"; return
  fi
  local p
  for p in $(pgrep -x containerd 2>/dev/null; pgrep -x dockerd 2>/dev/null); do
    grep -qs -- "$E2E_WORK/" "/proc/$p/cmdline" && continue
    echo "a containerd/dockerd (pid $p) already runs on this host: refusing to touch /etc/nri and /opt/nri"
    return
  done
}

# Serialise suites (global /etc/nri, /opt/nri paths). fd 9 stays open for the suite's lifetime.
take_lock() {
  mkdir -p "$E2E_WORK"
  exec 9>"$E2E_WORK/lock"
  flock -w 120 9 || { log "another e2e run holds $E2E_WORK/lock"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# /etc/nri, /opt/nri, /run/nri-qos: exact backup before, exact restore after (also after a
# previous run was killed: a complete backup left behind is restored first).
# ---------------------------------------------------------------------------------------------
nri_backup() {
  nri_restore
  rm -rf "$BACKUP"; mkdir -p "$BACKUP"
  local p n
  for p in "${BACKUP_PATHS[@]}"; do
    n=$(echo "$p" | tr / _)
    if [ -e "$p" ]; then cp -a "$p" "$BACKUP/$n"; else touch "$BACKUP/$n.absent"; fi
  done
  # kubepods cgroup dirs that exist already are not ours to remove
  for p in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods/burstable /sys/fs/cgroup/*/kubepods/besteffort; do
    [ -d "$p" ] && echo "$p"
  done > "$BACKUP/preexisting-cgroups" || true
  touch "$BACKUP/.complete"
}

nri_restore() {
  [ -e "$BACKUP/.complete" ] || { rm -rf "$BACKUP"; return 0; }
  local p n
  for p in "${BACKUP_PATHS[@]}"; do
    n=$(echo "$p" | tr / _)
    rm -rf "$p"
    [ -e "$BACKUP/$n" ] && cp -a "$BACKUP/$n" "$p"
  done
  rm -rf "$BACKUP"
}

# ---------------------------------------------------------------------------------------------
# containerd lifecycle. Suites set: D (state dir), CONTAINERD, CTR, SHIM_PATH (dir with
# containerd-shim-runc-v2, first in PATH), and write $D/config.toml with write_config_common.
# ---------------------------------------------------------------------------------------------
SOCK() { echo "$D/containerd.sock"; }
cri() { "$PY" "$E2E_HERE/cri/criclient.py" -s "$D/containerd.sock" "$@"; }

# write_config_common NRI_BLOCK: containerd config v2 with everything private under $D.
# pod_annotations: CRI copies only allow-listed pod annotations into the OCI spec (and so into
# v0.1 requests); containerd matches them with Go's filepath.Match, where "*" does not match "/",
# so "*" alone would not pass "openfuyao.com/qos-level": "*/*" does; runc Root under $D; restrict_oom_score_adj because root here may lack
# CAP_SYS_RESOURCE (pause's -998 would make runc fail).
write_config_common() {
  rm -rf "$D/logs"
  mkdir -p "$D"/{root,state,runc,cni/net.d,cni/bin,opt,logs}
  cat > "$D/config.toml" <<TOML
version = 2
root = "$D/root"
state = "$D/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$D/containerd.sock"
[ttrpc]
  address = "$D/containerd.sock.ttrpc"
[debug]
  address = "$D/debug.sock"
  level = "info"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/opt"
$1
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$D/cni/bin"
    conf_dir = "$D/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["*", "*/*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/bin/runc"
        Root = "$D/runc"
        SystemdCgroup = false
TOML
}

containerd_pid() { [ -f "$D/containerd.pid" ] && cat "$D/containerd.pid"; }
containerd_alive() { local p; p=$(containerd_pid) && kill -0 "$p" 2>/dev/null; }

start_containerd() {
  containerd_alive && return 0
  rm -f "$D/containerd.sock"
  log "starting $CONTAINERD ($("$CONTAINERD" --version | awk '{print $3}'))"
  # setsid: own session; PATH decides which containerd-shim-runc-v2 is used
  PATH="${SHIM_PATH:+$SHIM_PATH:}/usr/sbin:/usr/bin:/sbin:/bin" setsid "$CONTAINERD" \
    --config "$D/config.toml" </dev/null >>"$D/logs/containerd.log" 2>&1 9>&- &
  echo $! > "$D/containerd.pid"
  local _; for _ in $(seq 1 150); do
    [ -S "$D/containerd.sock" ] && cri version >/dev/null 2>&1 && return 0
    containerd_alive || { tail -20 "$D/logs/containerd.log" >&2; log "containerd exited"; return 1; }
    sleep 0.2
  done
  tail -20 "$D/logs/containerd.log" >&2; log "containerd did not come up"; return 1
}

stop_containerd() { # TERM, KILL after 5 s; by PID
  local pid; pid=$(containerd_pid) || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    local _; for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$D/containerd.pid"
}

import_image() {
  [ -f "$E2E_CACHE/image.tar" ] || "$PY" "$E2E_HERE/mkimage.py" "$E2E_CACHE/image.tar" "$IMAGE" "$PAUSE" >/dev/null
  "$CTR" -a "$D/containerd.sock" -n k8s.io images import "$E2E_CACHE/image.tar" >/dev/null
}

# pids of processes with an argument containing $1 (fixed string). One grep over all cmdlines
# (no fork per process); grep's own pid may be listed, it is gone when kill_pids looks at it.
pids_with_arg() {
  grep -laF -- "$1" /proc/[0-9]*/cmdline 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/cmdline$|\1|p'
  return 0
}

kill_pids() { # kill -9 the given pids (logged)
  local p
  for p in "$@"; do
    kill -0 "$p" 2>/dev/null || continue
    log "killing leftover pid $p: $(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | cut -c1-100)"
    kill -9 "$p" 2>/dev/null || true
  done
}

# Stop everything this suite started, by PID. Idempotent; never fails.
teardown_all() {
  set +e
  if containerd_alive && [ -S "$D/containerd.sock" ]; then
    local c
    for c in $("$CTR" -a "$D/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      "$CTR" -a "$D/containerd.sock" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1
    done
    sleep 0.3
    for c in $("$CTR" -a "$D/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
      "$CTR" -a "$D/containerd.sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1
      "$CTR" -a "$D/containerd.sock" -n k8s.io containers delete "$c" >/dev/null 2>&1
    done
  fi
  stop_containerd
  # shims carry "-address $D/containerd.sock"; NRI plugins we installed are named below
  # shellcheck disable=SC2046  # pid lists: word splitting wanted
  kill_pids $(pids_with_arg "$D/containerd.sock")
  # shellcheck disable=SC2046
  kill_pids $(pids_with_arg /opt/nri/plugins/10-nri-qos) $(pids_with_arg /opt/nri/plugins/00-v010-adapter)
  # container processes still in our pod cgroups (the shim was gone before it could kill them)
  local h d
  find /sys/fs/cgroup/*/ -maxdepth 4 -type d -name "pod$UIDP*" 2>/dev/null | while read -r d; do
    # shellcheck disable=SC2046
    kill_pids $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done
  # mounts under our state dir (overlay rootfs, sandbox shm), deepest first
  { grep -o " $D/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m"; done
  # our cgroups: pod<UIDP>* and below, then kubepods levels we created (only if empty)
  for h in /sys/fs/cgroup/*; do
    # shellcheck disable=SC2156  # the pod dir is passed as $1, not injected
    find "$h" -maxdepth 4 -depth -type d -name "pod$UIDP*" \
      -exec sh -c 'find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null' _ {} \; 2>/dev/null
    for d in "$h/kubepods/burstable" "$h/kubepods/besteffort" "$h/kubepods"; do
      [ -d "$d" ] || continue
      grep -qxF "$d" "$BACKUP/preexisting-cgroups" 2>/dev/null && continue
      rmdir "$d" 2>/dev/null
    done
  done
  nri_restore
  rm -rf "$D/root" "$D/state" "$D/runc" "$D/opt" "$D/cni" "$D"/*.sock* "$D/tmp"
  return 0
}

# ---------------------------------------------------------------------------------------------
# Pods. run_pod OUT NAME CGROUP_PARENT_TEMPLATE [criclient up-pod options]: RunPodSandbox,
# CreateContainer, StartContainer; JSON summary in $D/logs/OUT.json. Returns criclient's status.
# ---------------------------------------------------------------------------------------------
run_pod() {
  local out=$1 name=$2 cgp=$3; shift 3
  local rc=0
  cri up-pod --name "$name" --uid-prefix "$UIDP" --cgroup-parent "$cgp" --image "$IMAGE" "$@" \
    > "$D/logs/$out.json" 2>"$D/logs/$out.err" || rc=$?
  log "$out: $(jq -c '{ok, steps: (.steps|map_values(if .ok then .seconds else .error end))}' "$D/logs/$out.json" 2>/dev/null || cat "$D/logs/$out.err")"
  return $rc
}
j() { jq -r "$2" "$D/logs/$1.json" 2>/dev/null; }   # j OUT FILTER
stop_pod() { local p; p=$(j "$1" '.pod_id // empty'); [ -n "$p" ] && { cri down-pod "$p" >&2 || true; }; return 0; }

# cgroup directory (cpu controller) of the container / pod of OUT
cg_ctr() { echo "$(cg_root cpu)$(j "$1" .cgroup_parent)/$(j "$1" .ctr_id)"; }
cg_pod() { echo "$(cg_root cpu)$(j "$1" .cgroup_parent)"; }
cg_root() { # controller -> hierarchy root
  if [ "$(cgroup_layout)" = v1 ]; then echo "/sys/fs/cgroup/$1"; else echo /sys/fs/cgroup; fi
}
# read a knob by its v1 name from cgroup dir $1 (controller dir for v1; cgroup2 dir otherwise),
# mapping to the cgroup v2 file when the host is pure v2 (kernel cgroup-v2.rst):
#   cpu.shares -> cpu.weight (runc: 1 + ((shares-2)*9999)/262142), cpu.cfs_burst_us -> cpu.max.burst,
#   memory.limit_in_bytes -> memory.max, cpu.idle -> cpu.idle.
read_knob() { # read_knob KIND(ctr|pod) OUT KNOB
  local dir
  if [ "$1" = ctr ]; then dir=$(cg_ctr "$2"); else dir=$(cg_pod "$2"); fi
  local knob=$3
  if [ "$(cgroup_layout)" = v1 ]; then
    case $knob in memory.*) dir=${dir/\/sys\/fs\/cgroup\/cpu\//\/sys\/fs\/cgroup\/memory\/} ;; esac
    cat "$dir/$knob" 2>/dev/null || echo "<missing $dir/$knob>"
  else
    case $knob in
      cpu.shares) cat "$dir/cpu.weight" ;;
      cpu.cfs_burst_us) cat "$dir/cpu.max.burst" ;;
      memory.limit_in_bytes) cat "$dir/memory.max" ;;
      *) cat "$dir/$knob" ;;
    esac 2>/dev/null || echo "<missing $dir/$knob>"
  fi
}
# expected value of a v1 knob as the host would show it (v2: converted)
want_knob() { # KNOB VALUE
  if [ "$(cgroup_layout)" = v1 ]; then echo "$2"; return; fi
  case $1 in
    cpu.shares) echo $((1 + (($2 - 2) * 9999) / 262142)) ;;
    *) echo "$2" ;;
  esac
}
# pid of the container's process (first pid in its cgroup.procs)
ctr_pid() { head -1 "$(cg_ctr "$1")/cgroup.procs" 2>/dev/null; }

# expect NAME OUT KIND KNOB VALUE: compares the kernel file with the expected value.
# Collects mismatches into $MISMATCH (caller reports one PASS/FAIL line per scenario).
expect_knob() {
  local out=$1 kind=$2 knob=$3 want got
  want=$(want_knob "$knob" "$4"); got=$(read_knob "$kind" "$out" "$knob")
  if [ "$got" != "$want" ]; then MISMATCH="${MISMATCH:+$MISMATCH; }$kind $knob=$got want $want"; fi
  log "  $out: $kind $knob = $got (want $want)"
}
expect_oom() { # OUT VALUE
  local pid got; pid=$(ctr_pid "$1")
  got=$(cat "/proc/$pid/oom_score_adj" 2>/dev/null || echo "<no pid>")
  [ "$got" = "$2" ] || MISMATCH="${MISMATCH:+$MISMATCH; }oom_score_adj(pid $pid)=$got want $2"
  log "  $1: /proc/$pid/oom_score_adj = $got (want $2)"
}

# ---------------------------------------------------------------------------------------------
# Policies used by the scenarios.
# ---------------------------------------------------------------------------------------------
# The bundled policy, copied so the test never depends on /etc/nri/nri-qos.toml.
install_test_policy() { # DEST
  [ -f "$BUNDLED_POLICY" ] || { log "bundled policy $BUNDLED_POLICY missing"; return 1; }
  install -D -m 0644 "$BUNDLED_POLICY" "$1"
}
# A fail-closed policy: every container is class FC (fail = "closed") whose only knob is a raw
# file write the kernel rejects (cpu.cfs_period_us must be >= 1000 us: EINVAL); sandboxes get a
# class without knobs, so RunPodSandbox succeeds. Schema: man/nri-qos.toml.5 (version 1).
FAIL_KNOB_FILE=cpu.cfs_period_us
write_fail_closed_policy() { # DEST
  if [ -n "${E2E_FAIL_POLICY:-}" ]; then install -D -m 0644 "$E2E_FAIL_POLICY" "$1"; return; fi
  mkdir -p "$(dirname "$1")"
  cat > "$1" <<'TOML'
# e2e (tests/e2e/lib.sh): containers fail closed on a knob the kernel rejects
version = 1

[settings]
default_class = "none"

[classes.none]
description = "sandboxes: nothing to set"

[classes.FC]
description = "fail-closed class with a broken raw knob"
fail = "closed"

[[classes.FC.container.raw]]
file = "cpu.cfs_period_us"
value = "1"

[[rules]]
name = "containers-fail-closed"
class = "FC"
match = { kind = "container" }
TOML
}

# v0.1: list /opt/nri/bin/nri-qos in /etc/nri/conf.json with conf.policy = $1
# (containerd 1.6 and the adapter re-read it on every event: no restart needed).
set_v01_conf() {
  mkdir -p /etc/nri
  printf '{"version": "0.1", "plugins": [{"type": "nri-qos", "conf": {"policy": "%s"}}]}\n' "$1" > /etc/nri/conf.json
}

# ---------------------------------------------------------------------------------------------
# Scenarios. Each prints one PASS/FAIL line, named by its first argument; OUT names the pod's
# JSON record in $D/logs. OCI_CHECKS=1 additionally reads the runc bundle's config.json
# (function expect_oci, defined by containerd17.sh).
# Expected values are the spec of the bundled policy (conf/nri.d/nri-qos.toml):
#   BE: container cpu.shares 2, cpu.cfs_burst_us 0, oom_score_adj 1000; pod cgroup cpu.idle 0
#   (the bundled policy leaves cpu_idle off: kubelet writes cpu.shares to the pod cgroup)
#   LS: cpu.cfs_burst_us = 100 % of the CFS quota; cpu.shares and memory limit as CRI asked
# The containers ask for cpu_shares 512, CFS quota 50000/period 100000 and 64 MiB, so that a
# hook that did nothing (or classified wrongly) fails every check.
# ---------------------------------------------------------------------------------------------
RES=(--cpu-shares 512 --cpu-quota 50000 --cpu-period 100000 --memory 67108864)

# sc_be NAME OUT [criclient options selecting BE]: a burstable pod (kube QoS) that the policy
# must demote to BE.
sc_be() {
  local name=$1 out=$2; shift 2
  if ! run_pod "$out" "$out" "/kubepods/burstable/pod{uid}" "${RES[@]}" "$@"; then
    fail "$name" "CRI: $(j "$out" '[.steps[]|select(.ok|not)|.error][0]')"; stop_pod "$out"; return
  fi
  MISMATCH=""
  expect_knob "$out" ctr cpu.shares 2
  expect_knob "$out" ctr cpu.cfs_burst_us 0
  expect_oom "$out" 1000
  expect_knob "$out" pod cpu.idle 0
  if [ -n "${OCI_CHECKS:-}" ]; then
    # (oom_score_adj is checked in /proc only: NRI v0.6.1, i.e. containerd 1.7, ignores the
    # adjustment's oom_score_adj field, so a plugin must write /proc/<pid>/oom_score_adj itself)
    expect_oci "$out" .linux.resources.cpu.shares 2
  fi
  stop_pod "$out"
  if [ -z "$MISMATCH" ]; then pass "$name"; else fail "$name" "$MISMATCH"; fi
}

# sc_ls NAME OUT: burstable pod without any class label/annotation -> LS.
sc_ls() {
  local name=$1 out=$2
  if ! run_pod "$out" "$out" "/kubepods/burstable/pod{uid}" "${RES[@]}"; then
    fail "$name" "CRI: $(j "$out" '[.steps[]|select(.ok|not)|.error][0]')"; stop_pod "$out"; return
  fi
  MISMATCH=""
  expect_knob "$out" ctr cpu.cfs_burst_us 50000
  expect_knob "$out" ctr cpu.shares 512
  expect_knob "$out" ctr memory.limit_in_bytes 67108864
  expect_knob "$out" ctr cpu.cfs_quota_us 50000
  if [ -n "${OCI_CHECKS:-}" ]; then
    expect_oci "$out" .linux.resources.cpu.shares 512
    expect_oci "$out" .linux.resources.cpu.quota 50000
    expect_oci "$out" .linux.resources.memory.limit 67108864
  fi
  stop_pod "$out"
  if [ -z "$MISMATCH" ]; then pass "$name"; else fail "$name" "$MISMATCH"; fi
}

# sc_fail_closed NAME POLICY: with the fail-closed policy active, CreateContainer or
# StartContainer must fail with nri-qos's message naming the broken knob's file.
sc_fail_closed() {
  local name=$1 pol=$2 msg
  if ! msg=$("$NRI_QOS_BIN" check "$pol" --cache-dir "$D/tmp/check-cache" 2>&1); then
    fail "$name" "test policy rejected by 'nri-qos check': $(echo "$msg" | head -1)"; return
  fi
  if run_pod fail-closed fail-closed "/kubepods/burstable/pod{uid}" "${RES[@]}"; then
    fail "$name" "container started although the fail-closed class's knob cannot be applied"
    stop_pod fail-closed; return
  fi
  msg=$(j fail-closed '[.steps | to_entries[] | select(.value.ok|not) | "\(.key): \(.value.error)"][0]')
  stop_pod fail-closed
  log "  fail-closed: $msg"
  case $msg in
    CreateContainer:*|StartContainer:*) ;;
    *) fail "$name" "wrong step failed: $msg"; return ;;
  esac
  if [[ $msg == *nri-qos* && $msg == *"$FAIL_KNOB_FILE"* ]]; then pass "$name"
  else fail "$name" "error does not name nri-qos and $FAIL_KNOB_FILE: $msg"; fi
}

# Leftovers of any earlier run that was killed before its trap ran (all suites share the global
# NRI paths and the pod uid prefix): stop/unmount/remove what each suite dir still holds.
cleanup_stale() {
  local self=$D d
  for d in "$E2E_WORK"/containerd*/; do
    [ -d "$d" ] || continue
    D=${d%/}
    if [ "$D" = "$self" ] || [ -f "$D/containerd.pid" ] || [ -d "$D/root" ]; then teardown_all; fi
  done
  D=$self
  teardown_all
}

#!/bin/bash
# nri-qos against the REAL kernel cgroup hierarchies of this machine:
#  * cgroup v1 (hybrid layout, detected with statfs): real cgroups mirroring a captured
#    request's cgroupsPath under a unique top-level name, a real process standing in for the
#    container's init; values read back from the kernel. runc's write orders and retries
#    (memory+swap, CFS period/quota/burst) where the kernel really refuses the wrong order.
#  * cgroup2 (the unified mount; only hugetlb is available there on these machines): v2 path
#    resolution and layout detection, a v2 file written and read back, systemd-driver paths.
# Everything created is removed again. Needs root; SKIPs otherwise.
. "$(dirname "$0")/lib.sh"

CG=/sys/fs/cgroup
if [ "$(id -u)" != 0 ] || [ ! -w $CG/cpu ] || [ ! -f $CG/cpu/cpu.shares ]; then
  skip "real cgroup v1: needs root and cgroup v1 controllers under $CG"; finish
fi
command -v jq >/dev/null || { fail "jq missing"; finish; }

N=nri-qos-test-$$-$RANDOM
UID_=$(cat /proc/sys/kernel/random/uuid)
SID=$(printf '%064x' $RANDOM$$); CID=$(printf 'c%063x' $RANDOM$$)
D=$FIX/requests/containerd-1.6.20
POD=/$N/kubepods/burstable/pod$UID_
STATE=$(scratch)

rm_tree() { # remove a cgroup directory tree, deepest first
  [ -d "$1" ] || return 0
  find "$1" -depth -type d -exec rmdir {} + 2>/dev/null
}
CTRLS="cpu memory pids blkio cpuset"
for c in $CTRLS; do CLEANUP+=("rm_tree $CG/$c/$N"); done
for c in $CTRLS; do mkdir -p "$CG/$c$POD/$SID" "$CG/$c$POD/$CID" "$CG/$c$POD/${CID}q"; done
# a stand-in for the container's init process, in its cgroups (as runc puts it at create)
sleep 300 & PID=$!
CLEANUP+=("kill $PID; wait $PID")
for c in cpu memory pids; do echo $PID > "$CG/$c$POD/$CID/cgroup.procs"; done

req() { # req TEMPLATE ID PID LABEL → request JSON with our cgroupsPath
  jq -c --arg p "$POD/$2" --arg id "$2" --arg sid "$SID" --argjson pid "$3" --arg cls "$4" \
    '.id=$id | .sandboxID=$sid | .pid=$pid | .spec.cgroupsPath=$p | (if $cls != "" then .labels["koordinator.sh/qosClass"]=$cls else . end)' "$D/$1"
}
layout=$("$BIN" explain --format json --policy "$POLICY" --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID BE) | jq -r .layout)
check "v1: layout detected with statfs" "$layout" hybrid

OUT=$("$BIN" invoke --policy "$POLICY" --state-dir "$STATE" --cache-dir "" < <(req sandbox-create.json "$SID" $PID BE))
valid_result "v1 sandbox" "$OUT"
check "v1 BE sandbox: kernel pod cpu.idle stays 0 (bundled policy)" "$(cat $CG/cpu$POD/cpu.idle)" 0
OUT=$("$BIN" invoke --policy "$POLICY" --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID BE))
check "v1 BE container: error empty" "$(jq -r .error <<<"$OUT")" ""
check "v1 BE container: kernel cpu.shares" "$(cat $CG/cpu$POD/$CID/cpu.shares)" 2
check "v1 BE container: kernel cpu.cfs_burst_us" "$(cat $CG/cpu$POD/$CID/cpu.cfs_burst_us)" 0
check "v1 BE container: kernel oom_score_adj of the process" "$(cat /proc/$PID/oom_score_adj)" 1000
check_contains "v1 BE container: openEuler files reported absent" "$(jq -r .metadata.skipped <<<"$OUT")" "cpu.qos_level=-1 (kernel does not provide this file)"

# LS container with a CFS quota (set by "runc" first): burst = 100 % of the quota
echo 50000 > $CG/cpu$POD/${CID}q/cpu.cfs_quota_us
OUT=$("$BIN" invoke --policy "$POLICY" --state-dir "$STATE" --cache-dir "" < <(req container-create.json "${CID}q" 0 "" | jq -c '.spec.resources.cpu.quota=50000 | .spec.resources.cpu.period=100000 | del(.pid)'))
check "v1 LS container: kernel cpu.cfs_burst_us" "$(cat $CG/cpu$POD/${CID}q/cpu.cfs_burst_us)" 50000
check "v1 LS container: kernel cpu.shares untouched" "$(cat $CG/cpu$POD/${CID}q/cpu.shares)" 1024

# A value the kernel rejects: reported as failed, fail-open
P=$(scratch)/p.toml
printf 'version = 1\n[settings]\ndefault_class = "X"\n[classes.X.container]\ncpu_period_us = 100000\nraw = [{ file = "cpu.cfs_quota_us", value = "500" }]\n' > "$P"
OUT=$("$BIN" invoke --policy "$P" --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID "") 2>/dev/null)
check_contains "v1: kernel EINVAL reported" "$(jq -r .metadata.failed <<<"$OUT")" "cpu.cfs_quota_us=500 (Invalid argument)"
check "v1: kernel EINVAL is fail-open" "$(jq -r .error <<<"$OUT")" ""

# ---- issue 9: runc's write orders and retries, against the real kernel's rules --------------
# Fresh cgroups below $N; every value is read back from the kernel. A one-class policy:
pol() { printf 'version = 1\n[settings]\ndefault_class = "X"\n[classes.X]\n%b[classes.X.container]\n%b' "${3:-}" "$2" > "$1"; }
P=$(scratch)/order.toml
ctr_req() { # ctr_req CGROUPS-PATH [jq filter]: a container create for that cgroup, without a pid
  jq -c --arg p "$1" --arg sid "$SID" ".sandboxID=\$sid | .spec.cgroupsPath=\$p | del(.pid) | ${2:-.}" "$D/container-create.json"
}
hook() { "$BIN" invoke --policy "$P" --state-dir "$STATE" --cache-dir "" 2>/dev/null; }

if [ -f $CG/memory/memory.memsw.limit_in_bytes ]; then
  # memory + swap raised from 64 Mi / 64 Mi to 128 Mi / 256 Mi: memsw must go first
  M=$CG/memory/$N/mem; mkdir -p $M
  echo 67108864 > $M/memory.limit_in_bytes; echo 67108864 > $M/memory.memsw.limit_in_bytes
  if echo 134217728 > $M/memory.limit_in_bytes 2>/dev/null; then fail "kernel: a limit above memsw was accepted (the test cannot fail)"
  else pass "kernel: memory.limit_in_bytes above memsw is EINVAL (the order matters)"; fi
  pol "$P" 'memory_limit = "128Mi"\nmemory_swap = "256Mi"\n'
  OUT=$(ctr_req "/$N/mem" | hook)
  check "v1 memory raise: kernel memory.limit_in_bytes" "$(cat $M/memory.limit_in_bytes)" 134217728
  check "v1 memory raise: kernel memory.memsw.limit_in_bytes" "$(cat $M/memory.memsw.limit_in_bytes)" 268435456
  check "v1 memory raise: nothing failed" "$(jq -r '.metadata.failed // "none"' <<<"$OUT")" none
  # and back down: the limit first
  pol "$P" 'memory_limit = "32Mi"\nmemory_swap = "48Mi"\n'
  OUT=$(ctr_req "/$N/mem" | hook)
  check "v1 memory lower: kernel values" "$(cat $M/memory.limit_in_bytes) $(cat $M/memory.memsw.limit_in_bytes)" "33554432 50331648"
  # memory_limit = max alone: memsw unlimited too, first (runc)
  pol "$P" 'memory_limit = "max"\n'
  OUT=$(ctr_req "/$N/mem" | hook)
  MAXB=$(cat $CG/memory/memory.limit_in_bytes)
  check "v1 memory max: kernel limit and memsw unlimited" "$(cat $M/memory.limit_in_bytes) $(cat $M/memory.memsw.limit_in_bytes)" "$MAXB $MAXB"
  check "v1 memory max: nothing failed" "$(jq -r '.metadata.failed // "none"' <<<"$OUT")" none
  # memory_swap = 0 is "unset" (runc): nothing written (writing 0 is EINVAL)
  echo 67108864 > $M/memory.limit_in_bytes; echo 67108864 > $M/memory.memsw.limit_in_bytes
  pol "$P" 'memory_swap = 0\n'
  OUT=$(ctr_req "/$N/mem" | hook)
  check "v1 memory_swap = 0: kernel memsw unchanged" "$(cat $M/memory.memsw.limit_in_bytes)" 67108864
  check "v1 memory_swap = 0: nothing failed" "$(jq -r '.metadata.failed // "none"' <<<"$OUT")" none
else
  skip "real v1 memory+swap order: no swap accounting (memory.memsw.limit_in_bytes absent)"
fi

# CFS: a 2-CPU parent, the container at 2 CPUs; the class asks 10000/20000 (still 2 CPUs).
# The period alone first (200000/10000 = 20 CPUs) is EINVAL: retried after the quota (runc).
C=$CG/cpu/$N/cfs; mkdir -p $C/c $C/probe
echo 200000 > $C/cpu.cfs_quota_us; echo 200000 > $C/c/cpu.cfs_quota_us; echo 200000 > $C/probe/cpu.cfs_quota_us
if echo 10000 > $C/probe/cpu.cfs_period_us 2>/dev/null; then fail "kernel: a period beyond the parent's bandwidth was accepted (the test cannot fail)"
else pass "kernel: cpu.cfs_period_us beyond the parent's bandwidth is EINVAL (the order matters)"; fi
pol "$P" 'cpu_period_us = 10000\ncpu_quota_us = 20000\n'
OUT=$(ctr_req "/$N/cfs/c" | hook)
check "v1 CFS: kernel cpu.cfs_quota_us" "$(cat $C/c/cpu.cfs_quota_us)" 20000
check "v1 CFS: kernel cpu.cfs_period_us (2 CPUs, not 20 % of one)" "$(cat $C/c/cpu.cfs_period_us)" 10000
check_contains "v1 CFS: the Result says the period was retried" "$(jq -r '.writes[]|select(.file|endswith("cpu.cfs_period_us"))|.note' <<<"$OUT")" "EINVAL at first; applied after cpu.cfs_quota_us"
# burst = 100 % of the class's quota, lowering from 100000/100000 to 50000/50000
if [ -f $C/c/cpu.cfs_burst_us ]; then
  echo 100000 > $C/c/cpu.cfs_period_us; echo 100000 > $C/c/cpu.cfs_quota_us; echo 100000 > $C/c/cpu.cfs_burst_us
  pol "$P" 'cpu_quota_us = 50000\ncpu_burst_us = "100%"\n'
  OUT=$(ctr_req "/$N/cfs/c" '.spec.resources.cpu.quota=100000 | .spec.resources.cpu.period=100000' | hook)
  check "v1 CFS burst of the class quota: kernel quota and burst" "$(cat $C/c/cpu.cfs_quota_us) $(cat $C/c/cpu.cfs_burst_us)" "50000 50000"
  check "v1 CFS burst of the class quota: nothing failed" "$(jq -r '.metadata.failed // "none"' <<<"$OUT")" none
  # Native NRI UpdateContainer lowering the quota below the burst (an in-place resize down,
  # 80000 -> 30000 with burst = 100 %): runc writes the new quota without any burst, which the
  # kernel refuses while the old burst is in force; nri-qos lowers the burst while it handles
  # UpdateContainer (before its reply lets the runtime write). "runc" is the echo afterwards.
  echo 80000 > $C/c/cpu.cfs_quota_us; echo 80000 > $C/c/cpu.cfs_burst_us
  if echo 30000 > $C/c/cpu.cfs_quota_us 2>/dev/null; then fail "kernel: a quota below the burst was accepted (the test cannot fail)"
  else pass "kernel: cpu.cfs_quota_us below cpu.cfs_burst_us is EINVAL (the order matters)"; fi
  pol "$P" 'cpu_burst_us = "100%"\n'
  EVLOG=$(dirname "$P")/events.log
  OUT=$(jq -nc --arg sid "$SID" --arg cid "$CID" --arg pod "/$N/cfs" --arg ctr "/$N/cfs/c" '{
      event: "UpdateContainer", runtime: {name: "containerd", version: "1.7.24"},
      pod: {id: $sid, name: "p", uid: "u", namespace: "default", linux: {cgroups_path: $pod}},
      container: {id: $cid, pod_sandbox_id: $sid, name: "app", linux: {cgroups_path: $ctr,
        resources: {cpu: {quota: {value: 80000}, period: {value: 100000}}}}},
      linux_resources: {cpu: {quota: {value: 30000}, period: {value: 100000}}}}' |
    "$BIN" nri-eval --policy "$P" --state-dir "$STATE" --cache-dir "" --event-log "$EVLOG" --metrics-file "" 2>/dev/null)
  check "v1 NRI update down: kernel burst lowered by the UpdateContainer evaluation" "$(cat $C/c/cpu.cfs_burst_us)" 30000
  check_contains "v1 NRI update down: the Result lists the write" "$(jq -r .metadata.applied <<<"$OUT")" "cpu.cfs_burst_us=30000"
  check_contains "v1 NRI update down: the event record lists the write" \
    "$(jq -r 'select(.event == "UpdateContainer") | .applied' "$EVLOG" 2>/dev/null)" "cpu.cfs_burst_us=30000"
  if echo 30000 > $C/c/cpu.cfs_quota_us 2>/dev/null; then r=accepted; else r=refused; fi
  check "v1 NRI update down: the runtime's quota write is then accepted" "$r" accepted
else
  skip "real v1 CFS burst: no cpu.cfs_burst_us"
fi

# ---- issue 19: reconcile writes through the hook's ordered writer ----------------------------
# The runtime puts the spec's values back (v0.1: a CRI UpdateContainerResources re-applies them
# through runc without calling the hook); reconcile restores the class's values in runc's order,
# with the EINVAL retries, as the hook wrote them. Each case has its own state dir.
reconcile_() { "$BIN" reconcile --state-dir "$1" --policy "$P" --cache-dir "" --metrics-file "$1/prom" --event-log "$1/log" 2>/dev/null; }
if [ -f $CG/memory/memory.memsw.limit_in_bytes ]; then
  RS=$(scratch); RM=/$N/rec/mem; mkdir -p $CG/cpu$RM $CG/memory$RM
  echo 67108864 > $CG/memory$RM/memory.limit_in_bytes; echo 67108864 > $CG/memory$RM/memory.memsw.limit_in_bytes
  pol "$P" 'memory_limit = "128Mi"\nmemory_swap = "256Mi"\n'
  ctr_req "$RM" '.id="'$CID'm"' | "$BIN" invoke --policy "$P" --state-dir "$RS" --cache-dir "" >/dev/null 2>&1
  check "reconcile memory: the hook raised limit and memsw" "$(cat $CG/memory$RM/memory.limit_in_bytes) $(cat $CG/memory$RM/memory.memsw.limit_in_bytes)" "134217728 268435456"
  echo 67108864 > $CG/memory$RM/memory.limit_in_bytes; echo 67108864 > $CG/memory$RM/memory.memsw.limit_in_bytes  # "runc update"
  REC=$(reconcile_ "$RS")
  check "reconcile memory raise: kernel limit and memsw both restored (memsw first, runc)" \
    "$(cat $CG/memory$RM/memory.limit_in_bytes) $(cat $CG/memory$RM/memory.memsw.limit_in_bytes)" "134217728 268435456"
  check_contains "reconcile memory raise: reports both" "$REC" "memory.limit_in_bytes 67108864->134217728"
  check "reconcile memory raise: nothing failed" "$(grep -c '^failed' <<<"$REC")" 0
else
  skip "reconcile memory+swap order: no swap accounting (memory.memsw.limit_in_bytes absent)"
fi
# CFS on a 2-CPU parent: the class's 10000/20000 (2 CPUs) put back over the spec's 100000/200000.
# The period alone first (200000/10000 = 20 CPUs) is EINVAL; without the retry the quota alone
# leaves the container at 20000/100000 = 0.2 CPU.
RS=$(scratch); RC_=/$N/rec/cfs; mkdir -p $CG/cpu$RC_/c $CG/memory$RC_/c
echo 200000 > $CG/cpu$RC_/cpu.cfs_quota_us; echo 200000 > $CG/cpu$RC_/c/cpu.cfs_quota_us
pol "$P" 'cpu_period_us = 10000\ncpu_quota_us = 20000\n'
ctr_req "$RC_/c" '.id="'$CID'c"' | "$BIN" invoke --policy "$P" --state-dir "$RS" --cache-dir "" >/dev/null 2>&1
check "reconcile CFS: the hook wrote 20000/10000" "$(cat $CG/cpu$RC_/c/cpu.cfs_quota_us) $(cat $CG/cpu$RC_/c/cpu.cfs_period_us)" "20000 10000"
echo 100000 > $CG/cpu$RC_/c/cpu.cfs_period_us; echo 200000 > $CG/cpu$RC_/c/cpu.cfs_quota_us  # "runc update"
REC=$(reconcile_ "$RS")
check "reconcile CFS: kernel quota and period restored (2 CPUs, not 20 % of one)" \
  "$(cat $CG/cpu$RC_/c/cpu.cfs_quota_us) $(cat $CG/cpu$RC_/c/cpu.cfs_period_us)" "20000 10000"
check "reconcile CFS: nothing failed" "$(grep -c '^failed' <<<"$REC")" 0
check_contains "reconcile CFS: the event record says the period was retried" \
  "$(jq -r 'select(.source == "reconcile") | .drift' "$RS/log" 2>/dev/null)" "cpu.cfs_period_us 100000->10000"

# cpu_idle on a pod cgroup: the kernel then refuses cpu.shares there (kubelet writes it on an
# in-place resize and in ReduceCPULimits) — why the bundled policy leaves cpu_idle off
I=$CG/cpu/$N/podidle; mkdir -p $I/$SID  # a pod<uid> cgroup: pod knobs go only there
printf 'version = 1\n[settings]\ndefault_class = "X"\n[classes.X.pod]\ncpu_idle = 1\n' > "$P"
OUT=$(jq -c --arg p "/$N/podidle/$SID" '.spec.cgroupsPath=$p | del(.pid)' "$D/sandbox-create.json" | hook)
check "cpu_idle = 1 on a pod: kernel cpu.idle" "$(cat $I/cpu.idle)" 1
if echo 1024 > $I/cpu.shares 2>/dev/null; then r=accepted; else r=refused; fi
check "cpu_idle = 1 on a pod: a kubelet-like cpu.shares write is refused" "$r" refused
check "cpu_idle = 1 on a pod: cpu.shares reads back 3" "$(cat $I/cpu.shares)" 3
if echo 512 > $CG/cpu$POD/cpu.shares 2>/dev/null; then r=accepted; else r=refused; fi
check "bundled BE pod: a kubelet-like cpu.shares write still succeeds" "$r" accepted

# fail-closed: a container cgroup that does not exist fails the container; nothing is created
pol "$P" 'cpu_shares = 2\n' 'fail = "closed"\n'
OUT=$(ctr_req "/$N/never-created/c" | hook); RC=$?
check "v1 missing cgroup, fail-closed: exit 1" "$RC" 1
check_contains "v1 missing cgroup, fail-closed: error" "$(jq -r .error <<<"$OUT")" "cpu.shares=2 (cgroup cpu/$N/never-created/c does not exist)"
check "v1 missing cgroup: nothing created" "$(ls -d $CG/cpu/$N/never-created 2>/dev/null)" ""

# ---- cgroup2 (unified mount) ----------------------------------------------------------------
U=$CG/unified
if ! grep -qw hugetlb $U/cgroup.controllers 2>/dev/null; then
  skip "real cgroup2: no cgroup2 mount with hugetlb at $U"; finish
fi
HP=$(ls /sys/kernel/mm/hugepages | sed -n 's/hugepages-2048kB/2MB/p')
[ -n "$HP" ] || { skip "real cgroup2: no 2 MB huge pages"; finish; }
if ! grep -qw hugetlb $U/cgroup.subtree_control; then
  echo +hugetlb > $U/cgroup.subtree_control && CLEANUP+=("echo -hugetlb > $U/cgroup.subtree_control")
fi
CLEANUP+=("rm_tree $U/$N")
mkdir -p "$U$POD/$CID"
for d in "$U/$N" "$U/$N/kubepods" "$U/$N/kubepods/burstable" "$U$POD"; do echo +hugetlb > "$d/cgroup.subtree_control"; done
P2=$(scratch)/p2.toml
cat > "$P2" <<EOF
version = 1
[settings]
default_class = "X"
[classes.X.container]
cpu_shares = 2
raw = [{ file = "hugetlb.2MB.max", controller = "hugetlb", value = "4194304" }]
EOF
EXP=$("$BIN" explain --format json --policy "$P2" --cgroup-root $U --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID ""))
check "v2: layout of the cgroup2 mount detected" "$(jq -r .layout <<<"$EXP")" v2
check "v2: cpu.shares converted to cpu.weight" "$(jq -r '.writes[0].file + " = " + .writes[0].value' <<<"$EXP")" "${POD#/}/$CID/cpu.weight = 1"
OUT=$("$BIN" invoke --policy "$P2" --cgroup-root $U --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID ""))
check "v2: kernel hugetlb.2MB.max" "$(cat "$U$POD/$CID/hugetlb.2MB.max")" 4194304
check_contains "v2: cpu.weight absent without the cpu controller (skipped)" "$(jq -r .metadata.skipped <<<"$OUT")" "cpu.weight=1 (kernel does not provide this file)"

# systemd driver form on the real cgroup2 hierarchy: runc's slice expansion
SUID=$(tr - _ <<<"$UID_")
SLICE=kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod$SUID.slice
[ -d $U/kubepods.slice ] || CLEANUP+=("rm_tree $U/kubepods.slice")
[ -d $U/kubepods.slice/kubepods-besteffort.slice ] || CLEANUP+=("rm_tree $U/kubepods.slice/kubepods-besteffort.slice")
CLEANUP+=("rm_tree $U/$SLICE")
mkdir -p "$U/$SLICE/cri-containerd-$CID.scope"
for d in $U/kubepods.slice $U/kubepods.slice/kubepods-besteffort.slice $U/$SLICE; do echo +hugetlb > "$d/cgroup.subtree_control"; done
OUT=$("$BIN" invoke --policy "$P2" --cgroup-root $U --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID "" | jq -c --arg p "kubepods-besteffort-pod$SUID.slice:cri-containerd:$CID" '.spec.cgroupsPath=$p'))
check "v2 systemd: kube QoS from the slice" "$(jq -r .metadata.kube_qos <<<"$OUT")" besteffort
check "v2 systemd: kernel file in the expanded scope" "$(cat "$U/$SLICE/cri-containerd-$CID.scope/hugetlb.2MB.max")" 4194304

finish

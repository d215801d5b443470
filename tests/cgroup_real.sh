#!/bin/bash
# nri-qos against the REAL kernel cgroup hierarchies of this machine:
#  * cgroup v1 (hybrid layout, detected with statfs): real cgroups mirroring a captured
#    request's cgroupsPath under a unique top-level name, a real process standing in for the
#    container's init; values read back from the kernel.
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
check "v1 BE sandbox: kernel pod cpu.idle" "$(cat $CG/cpu$POD/cpu.idle)" 1
OUT=$("$BIN" invoke --policy "$POLICY" --state-dir "$STATE" --cache-dir "" < <(req container-create.json "$CID" $PID BE))
check "v1 BE container: error empty" "$(jq -r .error <<<"$OUT")" ""
check "v1 BE container: kernel cpu.shares" "$(cat $CG/cpu$POD/$CID/cpu.shares)" 2
check "v1 BE container: kernel cpu.cfs_burst_us" "$(cat $CG/cpu$POD/$CID/cpu.cfs_burst_us)" 0
check "v1 BE container: kernel oom_score_adj of the process" "$(cat /proc/$PID/oom_score_adj)" 1000
check_contains "v1 BE container: openEuler files reported absent" "$(jq -r .metadata.skipped <<<"$OUT")" "cpu.qos_level=-1 (not present)"

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
check_contains "v2: cpu.weight absent without the cpu controller (skipped)" "$(jq -r .metadata.skipped <<<"$OUT")" "cpu.weight=1 (not present)"

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

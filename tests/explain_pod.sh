#!/bin/bash
# `nri-qos explain --pod` end to end (issue #21 §5; rubik ioLimit, §3): the manifests of tests/fixtures/pods (shaped
# like the seed systems' published examples; README there cites each), read as YAML, JSON and
# from stdin, laid out by kubelet's rules, run through the bundled policy (with the seed systems'
# annotations declared, as an operator whose admission policies own them does) against a scratch
# node (cgroup v1 and v2 trees, sysfs), and the END state of the pod and container cgroups.
# Also: the preview writes nothing outside its own scratch directory, and bad manifests get one line.
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || { fail "jq missing (scripts/deps.sh test)"; finish; }
PODS=$FIX/pods

# The bundled policy with the seed systems' annotations declared (tests/facts.sh does the same).
TRUSTED=$(scratch)/trusted.toml
sed -E 's/^# ("(node\.koordinator\.sh\/|scheduling\.koordinator\.sh\/|katalyst\.kubewharf\.io\/|volcano\.sh\/enable-quota-burst|volcano\.sh\/quota-burst-time)[^"]*" = )/\1/' \
  "$BUNDLED" > "$TRUSTED"

# A node to mirror: kubepods cgroups with the knob files of a 5.15+ kernel (burst included),
# cgroup v1 (cgroupfs driver) and v2 (systemd driver); sysfs with two 4-CPU NUMA nodes.
N=$(scratch)
for c in cpu memory cpuset pids blkio; do mkdir -p "$N/v1/$c/kubepods"; done
touch "$N"/v1/cpu/kubepods/cpu.{shares,cfs_quota_us,cfs_period_us,cfs_burst_us} \
      "$N"/v1/memory/kubepods/memory.{limit_in_bytes,memsw.limit_in_bytes,soft_limit_in_bytes} \
      "$N"/v1/cpuset/kubepods/cpuset.{cpus,mems} "$N/v1/pids/kubepods/pids.max" "$N/v1/blkio/kubepods/blkio.weight"
mkdir -p "$N/v2/kubepods.slice"
touch "$N"/v2/kubepods.slice/{cpu.weight,cpu.max,cpu.max.burst,cpu.idle,memory.max,memory.high,memory.low,memory.min,memory.swap.max,cpuset.cpus,cpuset.mems,pids.max,io.weight}
S=$N/sys
mkdir -p "$S/devices/system/cpu" "$S/devices/system/node/node0" "$S/devices/system/node/node1"
echo 0-7 > "$S/devices/system/cpu/online"; echo 0-1 > "$S/devices/system/node/online"
echo 0-3 > "$S/devices/system/node/node0/cpulist"; echo 4-7 > "$S/devices/system/node/node1/cpulist"
mkdir -p "$N/proc"; echo "MemTotal:       16777216 kB" > "$N/proc/meminfo"

TMPD=$(scratch)  # the preview's own scratch directories go here (TMPDIR)
preview() { # preview LAYOUT MANIFEST [args]: explain --pod against the scratch node (policy $POL, else $TRUSTED)
  local lay=$1 m=$2; shift 2
  TMPDIR=$TMPD "$BIN" explain --pod "$m" --policy "${POL:-$TRUSTED}" --cgroup-root "$N/$lay" --cgroup-layout "$lay" \
    --sysfs-root "$S" --proc-root "$N/proc" --resctrl-root "$N/none" --kubelet-cpu-state "" --cache-dir "" "$@"
}
# end_value JSON CGROUP-PREFIX FILE: "value | set_by" of a file in the end state
end_value() { jq -r --arg c "$2" --arg f "$3" '[.end_state[] | select(.cgroup | startswith($c)) | .files[] | select(.file == $f) | "\(.value) | \(.set_by)"] | first // "none"' <<<"$1"; }

# --- Volcano CPU burst, two containers: the pod's burst ends as the sum ----------------------------
for lay in v1 v2; do
  burst=cpu.cfs_burst_us; [ $lay = v2 ] && burst=cpu.max.burst
  OUT=$(preview $lay "$PODS/volcano-burst-two-containers.yaml" --format json); rc=$?
  check "volcano $lay: exit 0" "$rc" 0
  check "volcano $lay: Burstable, cgroupfs/systemd by the node's kubepods" "$(jq -r '.pod.kube_qos + " " + .pod.cgroup_driver' <<<"$OUT")" \
    "burstable $([ $lay = v1 ] && echo cgroupfs || echo systemd)"
  check "volcano $lay: the made-up uid is said" "$(jq -r .pod.uid_made_up <<<"$OUT")" true
  check "volcano $lay: pod burst = Σ container bursts at the end (200000 + 200000)" "$(end_value "$OUT" "pod " $burst)" \
    "400000 | nri-qos StartContainer (class DEFAULT)"
  # v1: written at StartContainer; v2: cpu.max.burst goes to the runtime in the adjustment (unified)
  by="nri-qos StartContainer (class DEFAULT)"; [ $lay = v2 ] && by="runc, from nri-qos's CreateContainer adjustment"
  check "volcano $lay: container-2 burst = its quota" "$(end_value "$OUT" "container container-2" $burst)" "200000 | $by"
  if [ $lay = v1 ]; then
    check "volcano v1: kubelet's pod quota (ResourceConfigForPod)" "$(end_value "$OUT" "pod " cpu.cfs_quota_us)" "400000 | kubelet (ResourceConfigForPod)"
    check "volcano v1: kubelet's pod shares" "$(end_value "$OUT" "pod " cpu.shares)" "2048 | kubelet (ResourceConfigForPod)"
    check "volcano v1: runc's container shares from the request" "$(end_value "$OUT" "container container-1" cpu.shares)" "1024 | runc (kubelet's OCI shares)"
  else
    check "volcano v2: kubelet's pod cpu.max" "$(end_value "$OUT" "pod " cpu.max)" "400000 100000 | kubelet (ResourceConfigForPod)"
  fi
  # the per-event view still shows the running sum at the first container
  check "volcano $lay: first container event saw 200000 so far" \
    "$(jq -r --arg f $burst '[.events[] | select(.event == "StartContainer")][0].writes[] | select(.scope == "pod") | .value' <<<"$OUT")" 200000
done
TEXT=$(preview v1 - < "$PODS/volcano-burst-two-containers.yaml")
check_contains "volcano text (stdin): END STATE section" "$TEXT" "== END STATE (after all events)"
check_contains "volcano text: the made-up uid line" "$TEXT" "(made up: the manifest has no metadata.uid; stable for this namespace/name)"
check_contains "volcano text: kubelet's pod values" "$TEXT" "kubelet:  pod cgroup: cpu.shares 2048, quota 400000 / period 100000 (ResourceConfigForPod)"

# --- Koordinator BE (kubectl get pod -o yaml shape) --------------------------------------------------
OUT=$(preview v1 "$PODS/koordinator-be-demo.yaml" --format json)
check "koordinator: BestEffort, uid from the manifest" "$(jq -r '.pod.kube_qos + " " + .pod.uid + " " + (.pod.uid_made_up|tostring)' <<<"$OUT")" \
  "besteffort 7b6a1c52-4f0e-4a51-9c1d-2f5b8e3a9d10 false"
check "koordinator: cgroup parent" "$(jq -r .pod.cgroup_parent <<<"$OUT")" "/kubepods/besteffort/pod7b6a1c52-4f0e-4a51-9c1d-2f5b8e3a9d10"
check "koordinator: class KOORD-BE at every event" "$(jq -r '[.events[].class] | unique | join(",")' <<<"$OUT")" KOORD-BE
check "koordinator: batch quota = batch-cpu limit 50 × 100" "$(end_value "$OUT" "container pause" cpu.cfs_quota_us)" \
  "5000 | runc, from nri-qos's CreateContainer adjustment"
check "koordinator: batch memory limit 128Mi" "$(end_value "$OUT" "container pause" memory.limit_in_bytes)" \
  "134217728 | runc, from nri-qos's CreateContainer adjustment"
check "koordinator: oom_score_adj of a BestEffort container (kubelet)" "$(end_value "$OUT" "container pause" oom_score_adj)" "1000 | kubelet (GetContainerOOMScoreAdjust)"

# --- Katalyst dedicated_cores + numa_binding (JSON, about to be applied) -----------------------------
OUT=$(preview v1 "$PODS/katalyst-dedicated-numa.json" --format json)
check "katalyst: Guaranteed, Guaranteed parent" "$(jq -r '.pod.kube_qos + " " + (.pod.cgroup_parent | startswith("/kubepods/pod") | tostring)' <<<"$OUT")" "guaranteed true"
check "katalyst: the whole NUMA node 0 (numa_exclusive)" "$(end_value "$OUT" "container stress" cpuset.cpus)" "0-3 | runc, from nri-qos's CreateContainer adjustment"
check "katalyst: mems of node 0" "$(end_value "$OUT" "container stress" cpuset.mems)" "0 | runc, from nri-qos's CreateContainer adjustment"
# Katalyst's reserved CPUs: never handed out, not disqualifying
RES=$(scratch)/reserved.toml
sed 's/^\[settings\]$/[settings]\nkatalyst_reserved_cpus = "0-1"/' "$TRUSTED" > "$RES"
OUT=$(POL=$RES preview v1 "$PODS/katalyst-dedicated-numa.json" --format json)
check "katalyst reserved 0-1: node 0 without its reserved CPUs" "$(end_value "$OUT" "container stress" cpuset.cpus)" "2-3 | runc, from nri-qos's CreateContainer adjustment"

# --- rubik ioLimit, two devices in one list: the blk-throttle files end as the kernel shows them ------
# (one line per device, sorted; the preview's plain files would keep only the last write)
for d in 8:0 8:16; do mkdir -p "$S/dev/block/$d"; done
touch "$N/v2/kubepods.slice/io.max"
for f in read_bps write_bps read_iops write_iops; do touch "$N/v1/blkio/kubepods/blkio.throttle.${f}_device"; done
IOM=$(scratch)/iolimit.yaml
cat > "$IOM" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: iolimit
  annotations:
    volcano.sh/blkio-limit: '{"device_read_bps":[{"device":"8:16","value":"2097152"},{"device":"8:0","value":"1048576"}],"device_write_iops":[{"device":"8:0","value":"300"}]}'
spec:
  containers:
  - name: app
    image: nginx
EOF
OUT=$(preview v2 "$IOM" --format json)
check "ioLimit v2: io.max of both devices, all keys" "$(end_value "$OUT" "container app" io.max)" \
  "$(printf '8:0 rbps=1048576 wbps=max riops=max wiops=300\n8:16 rbps=2097152 wbps=max riops=max wiops=max') | nri-qos StartContainer (class DEFAULT)"
OUT=$(preview v1 "$IOM" --format json)
check "ioLimit v1: read_bps of both devices" "$(end_value "$OUT" "container app" blkio.throttle.read_bps_device)" \
  "$(printf '8:0 1048576\n8:16 2097152') | nri-qos StartContainer (class DEFAULT)"

# --- writes nothing outside its scratch directory, which it removes ----------------------------------
check "nothing left in TMPDIR" "$(ls -A "$TMPD")" ""
check "the node tree is untouched (no pod cgroup made)" "$(find "$N/v1" -mindepth 3 -type d | wc -l)" 0

# --- bad manifests: one line, exit 2 -------------------------------------------------------------------
B=$(scratch)
printf 'kind: Deployment\n' > "$B/deploy.yaml"
ERR=$(preview v1 "$B/deploy.yaml" 2>&1 >/dev/null); rc=$?
check "bad kind: exit 2" "$rc" 2
check "bad kind: one line" "$ERR" 'nri-qos: explain --pod: kind: "Deployment": not a Pod (give the pod itself, e.g. kubectl get pod NAME -o yaml)'
printf 'kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: 2x}}}]}\n' > "$B/q.yaml"
ERR=$(preview v1 "$B/q.yaml" 2>&1 >/dev/null)
check_contains "bad quantity: the field and the reason" "$ERR" "spec.containers[0].resources.limits.cpu: quantity \"2x\": unknown suffix \"x\""
check "bad quantity: one line" "$(printf '%s\n' "$ERR" | wc -l)" 1
ERR=$(preview v1 "$B/missing.yaml" 2>&1 >/dev/null); rc=$?
check "missing file: exit 2, one line" "$rc $(printf '%s\n' "$ERR" | wc -l)" "2 1"
ERR=$(preview v1 "$B" 2>&1 >/dev/null)
check "a directory: not a regular file" "$ERR" "nri-qos: explain --pod: cannot read $B: not a regular file"
ERR=$(head -c 5000000 /dev/zero | tr '\0' ' ' | preview v1 - 2>&1 >/dev/null)
check_contains "huge manifest: refused by size" "$ERR" "larger than 4194304 bytes"
ERR=$(TMPDIR=$TMPD "$BIN" explain --pod "$PODS/katalyst-dedicated-numa.json" --container x 2>&1); rc=$?
check "--pod with --container: refused" "$rc $ERR" "2 nri-qos: explain: --pod and --container exclude each other"
check "still nothing left in TMPDIR" "$(ls -A "$TMPD")" ""
finish

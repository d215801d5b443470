#!/usr/bin/env python3
"""Conformance runner: does nri-qos end with the cgroup values the seed systems' node agents
(plus kubelet) end with, for pods built from those systems' published manifests?

For every case under cases/<system>/<case>/ (case.json + generated kubelet.json + requests/),
for cgroup v1 and v2 scratch trees, and for both wire paths:

  invoke   NRI v0.1: kubelet/runc values are in place (runc created the cgroups before the
           v0.1 create event); `nri-qos invoke` gets the sandbox create, then each container's.
  nri      native NRI: `nri-qos nri-eval` gets RunPodSandbox; then per container
           CreateContainer, whose adjustment is merged into kubelet's OCI resources and
           applied as runc would (opencontainers/cgroups fs and fs2 rules, log-quadratic
           shares->weight of runc >= 1.3.2), then StartContainer.

Then every knob file of the pod cgroup and of each container cgroup (and the container's
/proc/PID/oom_score_adj) is compared with: kernel default, overlaid with what kubelet/runc
wrote, overlaid with case.json's "expect" (what the seed system's node agent writes, each value
with the function that computes it). Files a case does not list must stay as kubelet left them
(behaviour "nothing else changed").

Output: PASS/FAIL/SKIP lines (tests/lib.sh style), one per case x layout x path x behaviour;
SKIP = an explained difference (differences.json, with its reason) or a value that depends on
node-agent state nri-qos cannot see ("unknowable" in case.json); then the table
system x behaviour. Exit 1 on any unexplained difference.

The scratch tree accepts any value (no kernel validation: tests/cgroup_real.sh covers the real
kernel). Environment: NRI_QOS_BIN (default build/nri-qos), NRI_QOS_POLICY (default the bundled
conf/nri.d/nri-qos.toml). Options: see --help.
"""
import argparse
import copy
import fnmatch
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
CASES = os.path.join(HERE, "cases")

UNL = "9223372036854771712"  # what cgroup v1 shows for an unlimited memory limit (PAGE_COUNTER_MAX pages)
SYSFS_OPT = "--sysfs-root"   # the root option of the NUMA placement work (issue #10 §2)
KCPU_OPT = "--kubelet-cpu-state"   # kubelet's CPU manager checkpoint (issue #19 §1): none on the scratch node
DEV_OPT = "--dev-root"             # device nodes of blkio limits (issue #21): the scratch node's /dev

# Kernel defaults of a fresh cgroup. Superset kernel: mainline files plus openEuler's
# cpu.qos_level / memory.qos_level (and memory.high on v1) and Anolis's group identity
# cpu.bvt_warp_ns (v1 and v2: koordlet's CPUBVTWarpNs / CPUBVTWarpNsV2), so a write nobody
# expects shows.
V1_DEFAULTS = {
    "cpu.shares": "1024", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1",
    "cpu.cfs_burst_us": "0", "cpu.idle": "0", "cpu.qos_level": "0", "cpu.bvt_warp_ns": "0",
    "memory.limit_in_bytes": UNL, "memory.soft_limit_in_bytes": UNL, "memory.memsw.limit_in_bytes": UNL,
    "memory.high": "max", "memory.qos_level": "0",
    "pids.max": "max", "blkio.weight": "100",
    "blkio.throttle.read_bps_device": "", "blkio.throttle.write_bps_device": "",
    "blkio.throttle.read_iops_device": "", "blkio.throttle.write_iops_device": "",
    "cpuset.cpus": None, "cpuset.mems": None,   # filled from the node
}
V2_DEFAULTS = {
    "cpu.weight": "100", "cpu.max": "max 100000", "cpu.max.burst": "0", "cpu.idle": "0", "cpu.qos_level": "0",
    "cpu.bvt_warp_ns": "0", "memory.max": "max", "memory.high": "max", "memory.low": "0", "memory.min": "0", "memory.swap.max": "max",
    "memory.qos_level": "0", "pids.max": "max", "io.weight": "default 100", "io.max": "",
    "cpuset.cpus": "", "cpuset.mems": "",
}


def cpulist(ids):
    """[0, 1, 2, 5] -> "0-2,5" (the kernel's list format)."""
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else "%d-%d" % (ids[i], ids[j]))
        i = j + 1
    return ",".join(out)


def v1_ctrl(f):
    return f.split(".", 1)[0]


# Files grouped by what they control (same group name on v1 and v2), for "kept: <group>" rows.
GROUPS = {
    "cpu.shares": "cpu weight", "cpu.weight": "cpu weight",
    "cpu.cfs_quota_us": "cfs quota", "cpu.cfs_period_us": "cfs quota", "cpu.max": "cfs quota",
    "cpu.cfs_burst_us": "cpu burst", "cpu.max.burst": "cpu burst",
    "memory.limit_in_bytes": "memory limit", "memory.max": "memory limit",
    "memory.memsw.limit_in_bytes": "memory swap", "memory.swap.max": "memory swap",
    "memory.low": "memory protection", "memory.min": "memory protection", "memory.soft_limit_in_bytes": "memory protection",
    "blkio.weight": "io weight", "io.weight": "io weight",
    "blkio.throttle.read_bps_device": "io limit", "blkio.throttle.write_bps_device": "io limit",
    "blkio.throttle.read_iops_device": "io limit", "blkio.throttle.write_iops_device": "io limit", "io.max": "io limit",
    "cpuset.cpus": "cpuset", "cpuset.mems": "cpuset",
}


def is_throttle_file(f):
    return f.endswith("/io.max") or ("/blkio.throttle." in f and f.endswith("_device"))


def merge_throttle(f, current, written):
    """What a blk-throttle file shows after a one-device write (src/model/knobs.hpp merge_throttle_file):
    one line per device, sorted by device here; v1 "MAJ:MIN RATE" (0 removes the device), v2 io.max
    "MAJ:MIN rbps=.. wbps=.. riops=.. wiops=.." with "max" for unset keys."""
    v2 = f.endswith("io.max")
    keys = ["rbps", "wbps", "riops", "wiops"]
    dev = {}
    for line in (current + "\n" + written).split("\n"):
        tok = line.split()
        if len(tok) < 2 or ":" not in tok[0]:
            continue
        d = tuple(int(x) for x in tok[0].split(":"))
        if not v2:
            dev[d] = tok[1]
            continue
        cur = dev.setdefault(d, {k: "max" for k in keys})
        for t in tok[1:]:
            k, _, v = t.partition("=")
            if k in cur:
                cur[k] = v
    out = []
    for d in sorted(dev):
        mm = "%d:%d" % d
        if not v2:
            if dev[d] != "0":
                out.append("%s %s" % (mm, dev[d]))
        elif any(v != "max" for v in dev[d].values()):
            out.append(mm + " " + " ".join("%s=%s" % (k, dev[d][k]) for k in keys))
    return "\n".join(out)


def shares_to_weight(s):
    """opencontainers/cgroups utils.go ConvertCPUSharesToCgroupV2Value (v0.0.3+, runc >= 1.3.2)."""
    if s == 0:
        return 0
    if s <= 2:
        return 1
    if s >= 262144:
        return 10000
    l = math.log2(s)
    return int(math.ceil(math.pow(10, (l * l + 125 * l) / 612.0 - 7.0 / 34.0)))


def expand_slice(s):
    if s == "-.slice":
        return ""
    base = s[: -len(".slice")]
    out, pre = [], ""
    for comp in base.split("-"):
        pre = comp if not pre else pre + "-" + comp
        out.append(pre + ".slice")
    return "/".join(out)


def rel_of(cgroups_path):
    """OCI cgroupsPath -> directory below the hierarchy root (runc rules, as src/model/model.cpp)."""
    if not cgroups_path.startswith("/") and ":" in cgroups_path:
        slc, prefix, name = cgroups_path.split(":")
        unit = name if name.endswith(".slice") else (prefix + "-" if prefix else "") + name + ".scope"
        return expand_slice(slc or "system.slice") + "/" + unit
    return cgroups_path.strip("/")


class Tree:
    """A scratch cgroup tree (v1 per-controller or v2 unified) plus /proc and sysfs."""

    def __init__(self, root, layout, node):
        self.root, self.layout = root, layout
        self.cg = os.path.join(root, "cg")
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")
        self.node = node
        for d in (self.cg, self.proc, self.sys, os.path.join(root, "resctrl"), os.path.join(root, "state")):
            os.makedirs(d, exist_ok=True)

    def defaults(self):
        if self.layout == "v2":
            return dict(V2_DEFAULTS)
        d = dict(V1_DEFAULTS)
        d["cpuset.cpus"] = self.node["cpus"]
        d["cpuset.mems"] = cpulist(sorted(int(i) for i in self.node.get("numa", {"0": ""})))
        return d

    def path(self, rel, f):
        if self.layout == "v2":
            return os.path.join(self.cg, rel, f)
        return os.path.join(self.cg, v1_ctrl(f), rel, f)

    def mkdir(self, rel, values=None):
        vals = self.defaults()
        vals.update(values or {})
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):  # ancestors get default files too
            sub = "/".join(parts[:i])
            for f, v in (vals if i == len(parts) else self.defaults()).items():
                p = self.path(sub, f)
                if i < len(parts) and os.path.exists(p):
                    continue
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as fh:
                    fh.write(v)

    def effective_cpus(self, rel):
        """The pod cgroup's effective cpuset (all the node's CPUs), which an annotation cpuset is
        checked against (v1 cpuset.effective_cpus, v2 cpuset.cpus.effective). Only on the pod:
        a container's effective set would follow its cpuset.cpus in a real kernel."""
        f = "cpuset.cpus.effective" if self.layout == "v2" else "cpuset.effective_cpus"
        p = os.path.join(self.cg, rel, f) if self.layout == "v2" else os.path.join(self.cg, "cpuset", rel, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(self.node["cpus"] + "\n")

    def read(self, rel, f):
        try:
            with open(self.path(rel, f)) as fh:
                return fh.read().strip()
        except OSError:
            return None

    def write(self, rel, f, v):
        p = self.path(rel, f)
        if not os.path.exists(p):
            raise FileNotFoundError(p)
        with open(p, "w") as fh:
            fh.write(str(v))

    def files(self):
        return list(self.defaults())

    def proc_file(self, pid):
        return os.path.join(self.proc, str(pid), "oom_score_adj")

    def set_oom(self, pid, v):
        p = self.proc_file(pid)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(str(v))

    def oom(self, pid):
        try:
            with open(self.proc_file(pid)) as fh:
                return fh.read().strip()
        except OSError:
            return None

    def make_sysfs(self):
        nd = os.path.join(self.sys, "devices", "system", "node")
        os.makedirs(nd, exist_ok=True)
        ids = sorted(self.node.get("numa", {"0": self.node["cpus"]}), key=int)
        for i in ids:
            os.makedirs(os.path.join(nd, "node" + i), exist_ok=True)
            with open(os.path.join(nd, "node" + i, "cpulist"), "w") as fh:
                fh.write(self.node.get("numa", {}).get(i, self.node["cpus"]) + "\n")
        for name in ("online", "possible", "has_cpu", "has_memory"):
            with open(os.path.join(nd, name), "w") as fh:
                fh.write(cpulist([int(i) for i in ids]) + "\n")
        cd = os.path.join(self.sys, "devices", "system", "cpu")
        os.makedirs(cd, exist_ok=True)
        for name in ("online", "possible", "present"):
            with open(os.path.join(cd, name), "w") as fh:
                fh.write(self.node["cpus"] + "\n")
        # case.json node.threads: the thread siblings of each core ("0,8"), as the kernel lists
        # them in cpu<N>/topology/thread_siblings_list (none: no such files, one CPU per core)
        for core in self.node.get("threads", []):
            ids = []
            for part in core.split(","):
                lo, _, hi = part.partition("-")
                ids += range(int(lo), int(hi or lo) + 1)
            for c in ids:
                td = os.path.join(cd, "cpu%d" % c, "topology")
                os.makedirs(td, exist_ok=True)
                with open(os.path.join(td, "thread_siblings_list"), "w") as fh:
                    fh.write(core + "\n")
        # case.json node.block: {"MAJ:MIN": "disk" | "partition"}: <sysfs>/dev/block/MAJ:MIN as the
        # kernel shows block devices (a partition has a "partition" file)
        for mm, kind in self.node.get("block", {}).items():
            d = os.path.join(self.sys, "dev", "block", mm)
            os.makedirs(d, exist_ok=True)
            if kind == "partition":
                with open(os.path.join(d, "partition"), "w") as fh:
                    fh.write("1\n")

    def make_dev(self):
        """case.json node.dev: {"sda": "8:0"}: block device nodes below the scratch /dev
        (mknod: needs CAP_MKNOD). Returns "" or why they could not be made."""
        d = os.path.join(self.root, "dev")
        os.makedirs(d, exist_ok=True)
        for name, mm in self.node.get("dev", {}).items():
            ma, mi = (int(x) for x in mm.split(":"))
            p = os.path.join(d, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            try:
                os.mknod(p, 0o600 | __import__("stat").S_IFBLK, os.makedev(ma, mi))
            except OSError as e:
                return "mknod %s: %s (block device nodes need root)" % (name, e.strerror)
        return ""

    def snapshot_cpu_max(self):
        out = {}
        if self.layout != "v2":
            return out
        for dp, _, fs in os.walk(self.cg):
            if "cpu.max" in fs:
                with open(os.path.join(dp, "cpu.max")) as fh:
                    out[dp] = fh.read().strip()
        return out

    def kernel_fixups(self, before):
        """What the kernel shows after a write the scratch file stores verbatim: v2 cpu.max
        written as "QUOTA" keeps the period; v1 memory limits written as -1 read back as
        PAGE_COUNTER_MAX."""
        if self.layout == "v2":
            for dp, old in before.items():
                p = os.path.join(dp, "cpu.max")
                with open(p) as fh:
                    cur = fh.read().strip()
                if cur != old and len(cur.split()) == 1 and len(old.split()) == 2:
                    with open(p, "w") as fh:
                        fh.write(cur + " " + old.split()[1])
            return
        for dp, _, fs in os.walk(os.path.join(self.cg, "memory")):
            for f in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.soft_limit_in_bytes"):
                if f in fs:
                    p = os.path.join(dp, f)
                    with open(p) as fh:
                        if fh.read().strip() == "-1":
                            with open(p, "w") as w:
                                w.write(UNL)


def runc_values(layout, oci):
    """File values runc (opencontainers/cgroups fs, fs2) writes for OCI LinuxResources."""
    out, errs = {}, []
    cpu, mem = oci.get("cpu", {}), oci.get("memory", {})
    if layout == "v1":
        if cpu.get("shares"):
            out["cpu.shares"] = str(cpu["shares"])
        if cpu.get("period"):
            out["cpu.cfs_period_us"] = str(cpu["period"])
        if cpu.get("quota"):
            out["cpu.cfs_quota_us"] = str(cpu["quota"])
        if mem.get("limit"):
            out["memory.limit_in_bytes"] = UNL if mem["limit"] == -1 else str(mem["limit"])
        if mem.get("swap"):
            out["memory.memsw.limit_in_bytes"] = UNL if mem["swap"] == -1 else str(mem["swap"])
        if oci.get("unified"):
            errs.append("runc: invalid configuration: cannot use unified on cgroup v1")
    else:
        if cpu.get("shares"):
            out["cpu.weight"] = str(shares_to_weight(cpu["shares"]))
        if cpu.get("quota") or cpu.get("period"):
            q = cpu.get("quota", 0)
            out["cpu.max"] = ("max" if q <= 0 else str(q)) + " " + str(cpu.get("period") or 100000)
        if mem.get("limit"):
            out["memory.max"] = "max" if mem["limit"] == -1 else str(mem["limit"])
        if mem.get("swap") and mem.get("limit"):
            if mem["swap"] == -1:
                out["memory.swap.max"] = "max"
            elif mem["limit"] > 0:
                out["memory.swap.max"] = str(mem["swap"] - mem["limit"])
        for k, v in (oci.get("unified") or {}).items():
            out[k] = v
    if cpu.get("cpus"):
        out["cpuset.cpus"] = cpu["cpus"]
    if cpu.get("mems"):
        out["cpuset.mems"] = cpu["mems"]
    return out, errs


def kubelet_pod_values(layout, pc):
    """kubelet's pod cgroup (pkg/kubelet/cm ResourceConfigForPod via the cgroup manager)."""
    out = {}
    if layout == "v1":
        out["cpu.shares"] = str(pc["cpu_shares"])
        if "cpu_quota" in pc:
            out["cpu.cfs_period_us"] = str(pc["cpu_period"])
            out["cpu.cfs_quota_us"] = str(pc["cpu_quota"])
        if "memory_limit" in pc:
            out["memory.limit_in_bytes"] = str(pc["memory_limit"])
    else:
        out["cpu.weight"] = str(shares_to_weight(pc["cpu_shares"]))
        if "cpu_quota" in pc:
            q = pc["cpu_quota"]
            out["cpu.max"] = ("max" if q <= 0 else str(q)) + " " + str(pc["cpu_period"])
        if "memory_limit" in pc:
            out["memory.max"] = str(pc["memory_limit"])
    return out


def merge_adjustment(oci, oom, adj):
    """containerd's NRI adjustment of the OCI spec: fields present in the adjustment win."""
    oci = copy.deepcopy(oci)
    lin = (adj or {}).get("linux") or {}
    res = lin.get("resources") or {}
    cpu = res.get("cpu") or {}
    for k in ("shares", "quota", "period"):
        if k in cpu:
            oci.setdefault("cpu", {})[k] = int((cpu[k] or {}).get("value", 0))
    for k in ("cpus", "mems"):
        if cpu.get(k):
            oci.setdefault("cpu", {})[k] = cpu[k]
    m = res.get("memory") or {}
    for k in ("limit", "swap"):
        if k in m:
            oci.setdefault("memory", {})[k] = int((m[k] or {}).get("value", 0))
    if res.get("unified"):
        oci.setdefault("unified", {}).update(res["unified"])
    if "oom_score_adj" in lin:
        oom = int((lin["oom_score_adj"] or {}).get("value", 0))
    return oci, oom


# The annotations the seed systems' own controllers write, declared in [guarded.annotations] for
# the trusted run (the bundled policy's commented lines; nri-qos.toml(5) FACTS, Trust): their
# facts then get the node agents' full behaviour. The untrusted column runs the policy as given.
SEED_KEYS = {
    "node.koordinator.sh/extended-resource-spec": "koord-manager webhook (conformance: trusted run)",
    "scheduling.koordinator.sh/resource-status": "koord-scheduler (conformance: trusted run)",
    "volcano.sh/enable-quota-burst": "VAP volcano-burst (conformance: trusted run)",
    "volcano.sh/quota-burst-time": "VAP volcano-burst (conformance: trusted run)",
    "katalyst.kubewharf.io/qos_level": "katalyst webhook (conformance: trusted run)",
    "katalyst.kubewharf.io/memory_enhancement": "katalyst webhook (conformance: trusted run)",
    "katalyst.kubewharf.io/cpu_enhancement": "katalyst webhook (conformance: trusted run)",
    "volcano.sh/colocation-config": "Volcano controller (conformance: trusted run)",
    "koordinator.sh/oom-score-adj": "VAP (conformance: trusted run)",
    "koordinator.sh/oom-score-adj-spec": "VAP (conformance: trusted run)",
}


# Inputs the seed agents use that no NRI request (v0.1 or native) carries: listed at the top of
# docs/conformance.md's "Explained differences" (issue #32 §8).
NOT_CARRIED = [
    "the container's **memory request**: kubelet hands the runtime the limit only (CRI LinuxContainerResources; "
    "memory.min with its alpha MemoryQoS gate). The Volcano agent's memory QoS v2 takes memory.low/memory.min from it "
    "(volcano-sh/volcano@ed72c7c815a9fd547a787134676f73d42e9d049c pkg/agent/events/handlers/memoryqosv2/memoryqosv2_linux.go Handle): "
    "volcano.memory_low/min are computed for Guaranteed (request = limit) and BestEffort (0) pods and where the ratio is 0, absent with the reason otherwise",
    "a pod's **extended resources** (kubernetes.io/batch-cpu, batch-memory in pod.spec): Koordinator copies them into "
    "node.koordinator.sh/extended-resource-spec, Volcano into nothing (volcano.memory_* of levels other than LC/HLS, batch cpu.shares)",
    "the **init-container flag**: an NRI container is not marked init or regular; the Volcano agent's memoryqosv2 loops over "
    "pod.Spec.Containers only, koordlet's OOMScoreAdj over init and regular containers; nri-qos applies a class to every container it is asked about",
    "**NodeSLO** and the agents' configuration (koordlet's cpuQOS/memoryQOS/resctrlQOS strategies, the Volcano agent's "
    "ColocationConfiguration selector, feature gates such as OOMScoreAdj and MemoryQoSV2): node state; the bundled policy "
    "follows their defaults and has a commented line per opt-in (a case's policy_enable)",
    "an **annotation added to (or changed on) a running pod**: koordlet's reconcilers (every 10 s: OOMScoreAdj, batch "
    "resources) and the Volcano agent's pod handler react to a pod update; the runtime holds the annotations kubelet gave "
    "at RunPodSandbox and kubelet never hands it a later change, so every NRI event (and `reconcile`) carries the "
    "creation-time values: a later annotation takes effect when the pod is recreated",
]


class Run:
    def __init__(self, opts, case, layout, wire):
        self.o, self.case, self.layout, self.wire = opts, case, layout, wire
        self.k = case["kubelet"]
        self.node = dict({"cpus": "0-7", "numa": {"0": "0-3", "1": "4-7"}}, **case.get("node", {}))
        self.errors = []    # (behaviour, reason)
        self.log = []
        self.throttle = {}  # blk-throttle file (below the cgroup root) -> what the kernel shows

    def policy_file(self):
        """The policy under test, or a copy with the keys the case says the operator declared
        guarded (case.json "policy_guarded": {"labels"|"annotations": {key: note}}): the entries
        go below the policy's own [guarded.labels] / [guarded.annotations] table (appended when
        it has none). Shows a promotion an operator admits (nri-qos.toml(5), trust model)."""
        g = {k: dict(v) for k, v in self.case.get("policy_guarded", {}).items()}
        if self.o.trust == "seed":
            g.setdefault("annotations", {}).update(SEED_KEYS)
        enable = self.case.get("policy_enable", [])
        settings = self.case.get("policy_settings", {})
        if not g and not enable and not settings:
            return self.o.policy
        path = os.path.join(self.root, "policy.toml")
        if not os.path.exists(path):
            with open(self.o.policy) as fh:
                lines = fh.read().split("\n")
            # case.json "policy_enable": commented lines of the policy the operator turns on
            # (the bundled resctrl_group lines: koordlet's resctrlQOS, rubik's dynCache), every
            # line that starts so: an agent's feature is node-wide, the policy says it per class
            # (koordlet's OOMScoreAdj, the Volcano agent's MemoryQoSV2)
            for want in enable:
                at = [i for i, l in enumerate(lines) if l.lstrip().startswith("# " + want)]
                if not at:
                    self.errors.append(("policy", "policy_enable: no commented line %r in %s" % (want, self.o.policy)))
                    continue
                for i in at:
                    lines[i] = want
            # case.json "policy_settings": {key: TOML value} — the agent started with a non-default
            # option (koordlet --disable-unset-cpu-quota: koordinator_quota_lift = "never"); the
            # [settings] line of that key is replaced (added below [settings] when absent)
            for key, val in sorted(settings.items()):
                line = "%s = %s" % (key, val)
                top = [i for i, l in enumerate(lines) if l.strip() == "[settings]"]
                if not top:
                    self.errors.append(("policy", "policy_settings: no [settings] table in %s" % self.o.policy))
                    continue
                end = next((i for i in range(top[0] + 1, len(lines)) if lines[i].startswith("[")), len(lines))
                at = [i for i in range(top[0] + 1, end) if lines[i].split("=")[0].strip() == key]
                if at:
                    lines[at[0]] = line
                else:
                    lines.insert(top[0] + 1, line)
            declared = {l.split("=")[0].strip() for l in lines if l.startswith('"')}
            for kind in ("labels", "annotations"):
                entries = ["%s = %s" % (json.dumps(k), json.dumps(v)) for k, v in sorted(g.get(kind, {}).items())
                           if json.dumps(k) not in declared]
                if not entries:
                    continue
                head = "[guarded.%s]" % kind
                at = [i for i, l in enumerate(lines) if l.strip() == head]
                if at:
                    lines[at[0] + 1:at[0] + 1] = entries
                else:
                    lines += ["", head] + entries
            with open(path, "w") as fh:
                fh.write("\n".join(lines))
        return path

    def hook(self, mode, reqfile):
        t = self.tree
        args = [self.o.bin, mode, "--policy", self.policy_file(), "--cgroup-root", t.cg, "--cgroup-layout", self.layout,
                "--proc-root", t.proc, "--resctrl-root", os.path.join(t.root, "resctrl"),
                "--state-dir", os.path.join(t.root, "state"), "--cache-dir", ""]
        if self.o.sysfs_ok:
            args += [SYSFS_OPT, t.sys]
        if getattr(self.o, "kcpu_ok", False):
            args += [KCPU_OPT, os.path.join(t.root, "cpu_manager_state")]
        if getattr(self.o, "dev_ok", False):
            args += [DEV_OPT, os.path.join(t.root, "dev")]
        with open(reqfile, "rb") as fh:
            data = fh.read()
        before = t.snapshot_cpu_max()
        try:
            p = subprocess.run(args, input=data, capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            self.errors.append(("hook runs cleanly", "%s %s: timed out" % (mode, os.path.basename(reqfile))))
            return None
        t.kernel_fixups(before)
        name = "%s %s" % (mode, os.path.basename(reqfile))
        self.log.append("$ %s < %s -> exit %d\n%s%s" % (" ".join(args[:2]), reqfile, p.returncode,
                                                     p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")))
        try:
            out = json.loads(p.stdout.decode())
        except ValueError:
            self.errors.append(("hook runs cleanly", "%s: exit %d, stdout not JSON: %s" % (name, p.returncode, p.stderr.decode(errors="replace")[:200])))
            return None
        if p.returncode != 0 or out.get("error"):
            self.errors.append(("hook runs cleanly", "%s: exit %d, error %r" % (name, p.returncode, out.get("error"))))
        # blk-throttle files keep one line per device; the scratch file holds the last write only
        for w in out.get("writes") or []:
            f = w.get("file", "")
            if w.get("status") == "applied" and is_throttle_file("/" + f) and ".." not in f:
                self.throttle[f] = merge_throttle(f, self.throttle.get(f, ""), w.get("value", ""))
                with open(os.path.join(t.cg, f), "w") as fh:
                    fh.write(self.throttle[f])
        return out

    def execute(self):
        case, k, lay = self.case, self.k, self.layout
        root = tempfile.mkdtemp(prefix="nri-qos-conf.")
        self.root = root
        try:
            t = self.tree = Tree(root, lay, self.node)
            t.make_sysfs()
            why = t.make_dev()
            if why:
                return [{"behaviour": "block device nodes", "scope": "", "file": "", "want": None, "got": None,
                         "status": "unknowable", "why": why}]
            self.make_resctrl(os.path.join(root, "resctrl"))
            sb_rel = rel_of(k["paths"]["sandbox"])
            self.pod_rel = pod_rel = os.path.dirname(sb_rel)
            self.ctr_rel = {n: rel_of(p) for n, p in k["paths"]["containers"].items()}
            # the node: siblings already bound to CPUs
            # and kubelet's static CPU manager holds them (its checkpoint lists them: only
            # exclusively held CPUs count against a NUMA placement, not every cgroup's cpuset)
            held = {}
            for s in self.node.get("siblings", []):
                t.mkdir(s["rel"], {"cpuset.cpus": s["cpuset.cpus"]})
                pod, ctr = s["rel"].split("/")[-2:]
                held.setdefault(pod[3:] if pod.startswith("pod") else pod, {})[ctr] = s["cpuset.cpus"]
            if held:
                with open(os.path.join(root, "cpu_manager_state"), "w") as fh:
                    json.dump({"policyName": "static", "defaultCpuSet": self.node["cpus"], "entries": held, "checksum": 0}, fh)
            # expected baseline = kernel default + kubelet/runc
            base = {}
            pod_vals = kubelet_pod_values(lay, k["pod"])
            t.mkdir(pod_rel, pod_vals)
            t.effective_cpus(pod_rel)
            base["pod"] = dict(t.defaults(), **pod_vals)
            sb_vals, _ = runc_values(lay, k["sandbox"])
            t.mkdir(sb_rel, sb_vals)
            self.sb_rel = sb_rel
            base["sandbox"] = dict(t.defaults(), **sb_vals)
            names = [c["name"] for c in case["pod"]["containers"]]
            for n in names:
                kc = k["containers"][n]
                vals, _ = runc_values(lay, kc["oci"])
                base[n] = dict(t.defaults(), **vals)
                base[n]["oom_score_adj"] = str(kc["oom_score_adj"])
            req = os.path.join(case["dir"], "requests")
            if self.wire == "invoke":
                for n in names:
                    kc = k["containers"][n]
                    t.mkdir(self.ctr_rel[n], runc_values(lay, kc["oci"])[0])
                    t.set_oom(kc["pid"], kc["oom_score_adj"])
                self.hook("invoke", os.path.join(req, "v01", "sandbox-create.json"))
                for n in names:
                    self.hook("invoke", os.path.join(req, "v01", n + "-create.json"))
            else:
                self.hook("nri-eval", os.path.join(req, "nri", "RunPodSandbox.json"))
                for n in names:
                    kc = k["containers"][n]
                    out = self.hook("nri-eval", os.path.join(req, "nri", n + "-CreateContainer.json"))
                    adj = (out or {}).get("adjustment")
                    oci, oom = merge_adjustment(kc["oci"], kc["oom_score_adj"], adj)
                    t.mkdir(self.ctr_rel[n])          # runc creates the cgroup ...
                    vals, errs = runc_values(lay, oci)
                    for f, v in vals.items():         # ... and writes the resources
                        try:
                            t.write(self.ctr_rel[n], f, v)
                        except FileNotFoundError:
                            errs.append("runc: %s: no such file (the container would fail to start)" % f)
                    for e in errs:
                        self.errors.append(("runtime accepts the adjustment", "%s: %s" % (n, e)))
                    t.set_oom(kc["pid"], oom)
                    rdt = (((adj or {}).get("linux") or {}).get("resources") or {}).get("rdt_class")
                    if rdt:                           # runc intelrdt Apply: the pid into the group's tasks
                        tasks = os.path.join(root, "resctrl", rdt["value"], "tasks")
                        if os.path.isfile(tasks):
                            with open(tasks, "a") as fh:
                                fh.write("%d\n" % kc["pid"])
                        else:
                            self.errors.append(("runtime accepts the adjustment", "%s: rdt_class %s: no such resctrl group (the container would fail to start)" % (n, rdt["value"])))
                    self.hook("nri-eval", os.path.join(req, "nri", n + "-StartContainer.json"))
            results = self.compare(base, names)
            if self.wire == "nri" and getattr(self.o, "explain_pod", True):
                results += self.explain_pod(names)
            return results
        finally:
            if self.o.keep:
                print("# kept scratch tree %s" % root, file=sys.stderr)
            else:
                shutil.rmtree(root, ignore_errors=True)

    def explain_pod(self, names):
        """`nri-qos explain --pod manifest.json` (the case's pod as a Pod manifest, gen.py) against
        the same scratch node, policy and roots (issue #21): its END state must equal the tree this
        nri run ended with — explain --pod replays the native events (RunPodSandbox, then
        CreateContainer and StartContainer per container) from the manifest alone, computing
        kubelet's values itself. Checked here rather than in tests/explain_pod.sh because the
        runner owns the cases' scratch nodes and end states; one preview per case and layout (the
        nri run). Every file the preview shows is compared, and every file the case expects (a
        file it does not show is at its kernel default: the run must have left it at its own).
        Cases whose values need node-agent state a manifest does not carry are SKIPped with the
        reason (case.json "explain_pod_skip"). Resctrl groups are not compared (the preview's
        resctrl tree is its own copy)."""
        B = "explain --pod end state"
        skip = self.case.get("explain_pod_skip")
        if skip:
            return [{"behaviour": B, "scope": "", "file": "", "want": None, "got": None, "status": "unknowable", "why": skip}]
        t = self.tree
        man = os.path.join(self.case["dir"], "manifest.json")
        os.makedirs(os.path.join(self.root, "explain-tmp"), exist_ok=True)
        with open(os.path.join(t.proc, "meminfo"), "w") as fh:   # gen.py: the node's 16 GiB (oom_score_adj)
            fh.write("MemTotal:       16777216 kB\n")
        args = [self.o.bin, "explain", "--pod", man, "--format", "json", "--policy", self.policy_file(), "--cgroup-root", t.cg,
                "--cgroup-layout", self.layout, "--proc-root", t.proc, "--resctrl-root", os.path.join(self.root, "resctrl"),
                "--cache-dir", "", SYSFS_OPT, t.sys,
                KCPU_OPT, os.path.join(self.root, "cpu_manager_state")]
        if getattr(self.o, "dev_ok", False):
            args += [DEV_OPT, os.path.join(self.root, "dev")]
        env = dict(os.environ, TMPDIR=os.path.join(self.root, "explain-tmp"))
        try:
            p = subprocess.run(args, capture_output=True, timeout=30, env=env)
            out = json.loads(p.stdout.decode())
        except (subprocess.TimeoutExpired, ValueError) as e:
            return [{"behaviour": B, "scope": "", "file": "", "want": None, "got": None, "status": "diff", "error": True,
                     "why": "explain --pod %s: %s %s" % (man, e, p.stderr.decode(errors="replace")[:200] if "p" in dir() else "")}]
        self.log.append("$ %s\n%s" % (" ".join(args[:4]), p.stderr.decode(errors="replace")))
        shown = {}
        for e in out.get("end_state", []):
            lab = e.get("cgroup", "")
            scope = "pod" if lab.startswith("pod ") else lab[len("container "):] if lab.startswith("container ") else None
            if scope is None:
                continue
            shown[scope] = {f["file"]: f for f in e.get("files", []) if f.get("file") != "resctrl group"}
        exp = self.case["expect"].get(self.layout, {})
        results = []
        for scope, rel in [("pod", self.pod_rel)] + [(n, self.ctr_rel[n]) for n in names]:
            files = dict(shown.get(scope, {}))
            spec = exp.get("pod", {}) if scope == "pod" else exp.get("containers", {}).get(scope, {})
            label = "pod" if scope == "pod" else "container " + scope
            for f in sorted(set(files) | set(spec)):
                if f not in t.files() and f != "oom_score_adj":
                    continue
                got_run = t.read(rel, f) if f != "oom_score_adj" else t.oom(self.k["containers"][scope]["pid"]) if scope != "pod" else None
                if f in files:
                    want, why = files[f]["value"], "explain --pod shows %s (set by %s)" % (files[f]["value"], files[f]["set_by"])
                    # the preview's scratch files hold what was written; the kernel read-back rules
                    # of kernel_fixups (v2 cpu.max "QUOTA" keeps the period, v1 -1 limits)
                    if f == "cpu.max" and len(want.split()) == 1 and got_run and len(got_run.split()) == 2:
                        want += " " + got_run.split()[1]
                    if self.layout == "v1" and f.startswith("memory.") and f.endswith("limit_in_bytes") and want == "-1":
                        want = UNL
                    ok = got_run == want
                else:   # not shown: at the preview's kernel default; the run must have left it too
                    want, why = "(kernel default)", "explain --pod does not show it: untouched"
                    base = t.defaults().get(f) if f != "oom_score_adj" else None
                    ok = got_run == base or (got_run == "" and base is None)
                results.append({"behaviour": B, "scope": label, "file": f, "want": want, "got": got_run,
                                "status": "ok" if ok else "diff", "why": why})
        if not out.get("end_state"):
            results.append({"behaviour": B, "scope": "", "file": "", "want": None, "got": None, "status": "diff", "error": True,
                            "why": "explain --pod %s: no end state (exit %d): %s" % (man, p.returncode, (out.get("error") or p.stderr.decode(errors="replace"))[:200])})
        return results

    def make_resctrl(self, d):
        """case.json node.resctrl {"cbm_mask", "num_closids", "l3_ids", "mb"}: a scratch tree shaped
        like the kernel's resctrl mount (Documentation/arch/x86/resctrl.rst: info/L3, info/MB, the
        default group's schemata and tasks); none: no resctrl on the node (an empty directory)."""
        os.makedirs(d, exist_ok=True)
        r = self.node.get("resctrl")
        if not r:
            return
        ids = r.get("l3_ids", ["0"])
        files = {"info/L3/cbm_mask": r["cbm_mask"], "info/L3/min_cbm_bits": "1", "info/L3/num_closids": str(r.get("num_closids", 16)),
                 "tasks": "", "schemata": "    L3:" + ";".join("%s=%s" % (i, r["cbm_mask"]) for i in ids) + "\n"}
        if r.get("mb", True):
            files.update({"info/MB/bandwidth_gran": "10", "info/MB/min_bandwidth": "10", "info/MB/num_closids": str(r.get("num_closids", 16))})
            files["schemata"] += "    MB:" + ";".join("%s=100" % i for i in ids) + "\n"
        for f, v in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, f)), exist_ok=True)
            with open(os.path.join(d, f), "w") as fh:
                fh.write(v + ("\n" if v and not v.endswith("\n") else ""))

    def compare(self, base, names):
        """-> list of dict(behaviour, scope, file, want, got, status, why)."""
        t, exp = self.tree, self.case["expect"].get(self.layout, {})
        results = []
        joint_files = set()
        for j in self.case.get("joint", []):
            for f in j["files"]:
                joint_files.add(tuple(f if f[0] == "pod" else f))
        scopes = [("pod", self.pod_rel, None)] + [(n, self.ctr_rel[n], n) for n in names]
        # The sandbox (pause) container's own cgroup: compared in the cases that state what the
        # node agent writes there (expect.<layout>.sandbox; issue #32 §1).
        if "sandbox" in exp:
            scopes.append(("sandbox", self.sb_rel, None))
        for scope, rel, ctr in scopes:
            spec = exp.get(scope, {}) if ctr is None else exp.get("containers", {}).get(ctr, {})
            files = t.files() + ([] if ctr is None else ["oom_score_adj"])
            for f in files:
                key = (scope, f) if ctr is None else ("containers", ctr, f)
                if key in joint_files:
                    continue
                got = t.read(rel, f) if f != "oom_score_adj" else t.oom(self.k["containers"][ctr]["pid"])
                label = scope if ctr is None else "container " + ctr
                e = spec.get(f)
                if e is None:
                    want = base[scope if ctr is None else ctr][f]
                    results.append({"behaviour": "nothing else changed" if got == want else "kept: " + GROUPS.get(f, f),
                                    "scope": label, "file": f, "want": want, "got": got, "status": "ok" if got == want else "diff",
                                    "why": "kubelet/runc value (or kernel default); the system's node agent leaves it"})
                elif "unknowable" in e:
                    results.append({"behaviour": e["behaviour"], "scope": label, "file": f, "want": None, "got": got,
                                    "status": "unknowable", "why": e["unknowable"]})
                else:
                    want = e["value"]
                    results.append({"behaviour": e["behaviour"], "scope": label, "file": f, "want": want, "got": got,
                                    "status": "ok" if got == want else "diff", "why": e["why"]})
        for j in self.case.get("joint", []):
            got = []
            for f in j["files"]:
                if f[0] == "pod":
                    got.append(t.read(self.pod_rel, f[1]))
                else:
                    got.append(t.read(self.ctr_rel[f[1]], f[2]))
            names_ = " + ".join(("pod " + f[1]) if f[0] == "pod" else ("container %s %s" % (f[1], f[2])) for f in j["files"])
            ok = got in [list(a) for a in j["allowed"]]
            results.append({"behaviour": j["behaviour"], "scope": names_, "file": "", "want": " or ".join("(" + ", ".join(a) + ")" for a in j["allowed"]),
                            "got": "(" + ", ".join(str(g) for g in got) + ")", "status": "ok" if ok else "diff", "why": j["why"]})
        for g, e in sorted(self.case["expect"].get("resctrl", {}).items()):
            # case.json expect.resctrl.<group>: the group's schemata and the containers in its tasks
            d = os.path.join(self.root, "resctrl", g)
            got = open(os.path.join(d, "schemata")).read().strip() if os.path.isfile(os.path.join(d, "schemata")) else None
            results.append({"behaviour": e["behaviour"], "scope": "resctrl " + g, "file": "schemata", "want": e["schemata"], "got": got,
                            "status": "ok" if got == e["schemata"] else "diff", "why": e["why"]})
            pids = open(os.path.join(d, "tasks")).read().split() if os.path.isfile(os.path.join(d, "tasks")) else None
            for n in e.get("tasks", []):
                pid = str(self.k["containers"][n]["pid"])
                ok = pids is not None and pid in pids
                results.append({"behaviour": e["behaviour"], "scope": "resctrl " + g, "file": "tasks", "want": "container %s (%s)" % (n, pid),
                                "got": " ".join(pids) if pids is not None else None, "status": "ok" if ok else "diff", "why": e["why"]})
        for b, reason in self.errors:
            results.append({"behaviour": b, "scope": "", "file": "", "want": None, "got": None, "status": "diff",
                            "why": reason, "error": True})
        if self.case.get("needs_sysfs") and not self.o.sysfs_ok:
            for r in results:
                if r["behaviour"] == "NUMA placement" and r["status"] == "diff":
                    r["why"] += "; nri-qos has no %s option (NUMA placement from kernel state not implemented)" % SYSFS_OPT
        return results


def describe(r):
    if r.get("error"):
        return r["why"]
    where = (r["scope"] + " " + r["file"]).strip()
    return "%s = %s, want %s" % (where, r["got"], r["want"])


def load_cases(pattern):
    out = []
    for system in sorted(os.listdir(CASES)):
        for name in sorted(os.listdir(os.path.join(CASES, system))):
            d = os.path.join(CASES, system, name)
            cf = os.path.join(d, "case.json")
            if not os.path.isfile(cf):
                continue
            cid = system + "/" + name
            if pattern and not fnmatch.fnmatch(cid, pattern):
                continue
            with open(cf) as fh:
                case = json.load(fh)
            with open(os.path.join(d, "kubelet.json")) as fh:
                case["kubelet"] = json.load(fh)
            case["id"], case["dir"] = cid, d
            out.append(case)
    return out


def explained(docs, case, layout, wire, r):
    for d in docs:
        if (fnmatch.fnmatch(case["system"], d.get("system", "*")) and fnmatch.fnmatch(case["id"].split("/", 1)[1], d.get("case", "*"))
                and fnmatch.fnmatch(layout, d.get("layout", "*")) and fnmatch.fnmatch(wire, d.get("path", "*"))
                and fnmatch.fnmatch(r["behaviour"], d.get("behaviour", "*")) and fnmatch.fnmatch(r["scope"], d.get("scope", "*"))
                and fnmatch.fnmatch(r["file"], d.get("file", "*")) and fnmatch.fnmatch(str(r["got"]), d.get("got", "*"))):
            d["_used"] = True
            return d["reason"]
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description="nri-qos conformance against the seed systems' node agents")
    ap.add_argument("--case", help="only cases matching this glob (system/case)")
    ap.add_argument("--layout", choices=["v1", "v2"], help="only this cgroup layout")
    ap.add_argument("--path", choices=["invoke", "nri"], help="only this wire path")
    ap.add_argument("--policy", default=os.environ.get("NRI_QOS_POLICY", os.path.join(TOP, "conf/nri.d/nri-qos.toml")))
    ap.add_argument("--bin", default=os.environ.get("NRI_QOS_BIN", os.path.join(TOP, "build/nri-qos")))
    ap.add_argument("--differences", default=os.path.join(HERE, "differences.json"))
    ap.add_argument("--trust", choices=["seed", "none"], default="seed",
                    help="seed (default): declare the seed systems' annotations in [guarded.annotations] (SEED_KEYS); "
                         "none: the policy as given. A run with seed also fills the untrusted column (v1/invoke, the policy as given)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch trees")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every compared file and the hook output of failing runs")
    ap.add_argument("--no-table", action="store_true")
    ap.add_argument("--markdown", metavar="FILE", help="write the table and the reasons as Markdown (docs/conformance.md)")
    ap.add_argument("--markdown-check", metavar="FILE",
                    help="compare FILE with the Markdown this run would write (PASS/FAIL line); full runs only")
    o = ap.parse_args(argv)
    if not os.access(o.bin, os.X_OK):
        print("FAIL conformance: binary %s missing (run make)" % o.bin)
        return 1
    try:
        h = subprocess.run([o.bin, "invoke", "--help"], capture_output=True, timeout=10)
        o.sysfs_ok = SYSFS_OPT in (h.stdout + h.stderr).decode(errors="replace")
        o.kcpu_ok = KCPU_OPT in (h.stdout + h.stderr).decode(errors="replace")
        o.dev_ok = DEV_OPT in (h.stdout + h.stderr).decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        o.sysfs_ok = o.kcpu_ok = o.dev_ok = False
    with open(o.differences) as fh:
        docs = json.load(fh)["differences"]

    failed = False
    table = {}   # (system, behaviour) -> {col: set(status)} , reasons
    percase = {}  # (system, case, behaviour) -> {"why": {seed function}, (layout, wire): status}
    reasons = {}
    cols = [("v1", "invoke"), ("v1", "nri"), ("v2", "invoke"), ("v2", "nri")]
    for case in load_cases(o.case):
        system = case["system"] + ("*" if case.get("proxy") else "")
        for layout in ("v1", "v2"):
            for wire in ("invoke", "nri"):
                if (o.layout and layout != o.layout) or (o.path and wire != o.path):
                    continue
                tag = "%s %s %s" % (case["id"], layout, wire)
                if layout not in case.get("layouts", ["v1", "v2"]):
                    if wire == "invoke":
                        print("SKIP conformance %s %s: n/a: the case runs on cgroup %s only" % (case["id"], layout, "+".join(case["layouts"])))
                    table.setdefault((system, "(cgroup %s)" % layout), {}).setdefault((layout, wire), set()).add("n/a")
                    continue
                run = Run(o, case, layout, wire)
                results = run.execute()
                by_b = {}
                for r in results:
                    by_b.setdefault(r["behaviour"], []).append(r)
                run_failed = False
                for b, rs in by_b.items():
                    diffs = [r for r in rs if r["status"] == "diff"]
                    unk = [r for r in rs if r["status"] == "unknowable"]
                    unexpl, expl = [], []
                    for r in diffs:
                        why = explained(docs, case, layout, wire, r)
                        (expl if why else unexpl).append((r, why))
                    cell = table.setdefault((system, b), {}).setdefault((layout, wire), set())
                    pc = percase.setdefault((system, case["id"].split("/", 1)[1], b), {"why": set()})
                    pc["why"].update(r["why"] for r in rs if not r.get("error"))
                    if unexpl:
                        failed = run_failed = True
                        cell.add("DIFF")
                        pc[(layout, wire)] = "DIFF"
                        msg = "; ".join(describe(r) for r, _ in unexpl[:4]) + (" (+%d more)" % (len(unexpl) - 4) if len(unexpl) > 4 else "")
                        print("FAIL conformance %s: %s: %s" % (tag, b, msg))
                        for r, _ in unexpl:
                            reasons.setdefault((system, b), {}).setdefault("differs: " + describe(r), set()).add(case["id"].split("/", 1)[1] + " " + layout + "/" + wire)
                    elif expl:
                        cell.add("expl")
                        pc[(layout, wire)] = "expl"
                        why = "; ".join(sorted({w for _, w in expl}))
                        print("SKIP conformance %s: %s: explained difference: %s" % (tag, b, why))
                        for r, w in expl:
                            reasons.setdefault((system, b), {}).setdefault("explained: " + w, set()).add(case["id"].split("/", 1)[1] + " " + layout + "/" + wire)
                    elif unk:
                        cell.add("n/r")
                        pc[(layout, wire)] = "n/r"
                        why = "; ".join(sorted({r["why"] for r in unk}))
                        print("SKIP conformance %s: %s: not reproducible from the request: %s" % (tag, b, why))
                        for r in unk:
                            reasons.setdefault((system, b), {}).setdefault("not reproducible: " + r["why"], set()).add(case["id"].split("/", 1)[1] + " " + layout + "/" + wire)
                    else:
                        cell.add("ok")
                        pc[(layout, wire)] = "ok"
                        print("PASS conformance %s: %s" % (tag, b))
                    if o.verbose:
                        for r in rs:
                            print("    %-4s %-28s %-22s got %-22s want %s" % (r["status"], r["scope"], r["file"], r["got"], r["want"]))
                if o.verbose and run_failed:
                    for line in run.log:
                        print("    | " + line.replace("\n", "\n    | "))
    # The untrusted column: v1/invoke with the policy as given (issue #19): "ok" where the node
    # agent's values come out anyway, "refused" where a raising fact from an undeclared annotation
    # was refused (the difference is the trust model's, never a failure of this suite).
    untrusted = {}
    if o.trust == "seed" and o.layout in (None, "v1") and o.path in (None, "invoke"):
        uo = argparse.Namespace(**vars(o))
        uo.trust = "none"
        for case in load_cases(o.case):
            if "v1" not in case.get("layouts", ["v1", "v2"]):
                continue
            system = case["system"] + ("*" if case.get("proxy") else "")
            by_b = {}
            for r in Run(uo, case, "v1", "invoke").execute():
                by_b.setdefault(r["behaviour"], []).append(r)
            for b, rs in by_b.items():
                st = untrusted.setdefault((system, b), set())
                diffs = [r for r in rs if r["status"] == "diff" and not explained(docs, case, "v1", "invoke", r)]
                if diffs:
                    st.add("refused")
                    print("NOTE conformance %s v1 invoke untrusted: %s: %s" % (case["id"], b, "; ".join(describe(r) for r in diffs[:2])))
                elif any(r["status"] == "diff" for r in rs):
                    st.add("expl")
                elif any(r["status"] == "unknowable" for r in rs):
                    st.add("n/r")
                else:
                    st.add("ok")
    o.untrusted = untrusted
    ran = {(c["system"], c["id"].split("/", 1)[1]) for c in load_cases(o.case)}
    for d in docs:
        if not d.get("_used") and any(fnmatch.fnmatch(s, d.get("system", "*")) and fnmatch.fnmatch(n, d.get("case", "*")) for s, n in ran):
            print("NOTE conformance: explained difference not observed in this run: %s/%s %s %s %s" % (
                d.get("system", "*"), d.get("case", "*"), d.get("layout", "*"), d.get("behaviour", "*"), d.get("file", "*")))
    if not o.no_table:
        print_table(table, reasons, cols, o)
    if o.markdown or o.markdown_check:
        md = markdown(table, reasons, cols, o, load_cases(o.case), docs, percase)
        if o.markdown:
            with open(o.markdown, "w") as fh:
                fh.write(md)
        if o.markdown_check:
            try:
                with open(o.markdown_check) as fh:
                    old = fh.read()
            except OSError:
                old = None
            rel = os.path.relpath(o.markdown_check, TOP)
            if old == md:
                print("PASS conformance: %s is up to date" % rel)
            else:
                failed = True
                print("FAIL conformance: %s is out of date: python3 tests/conformance/conformance.py --markdown %s" % (rel, rel))
    return 1 if failed else 0


OUTSIDE_REQUEST = [
    ("katalyst", "the agent's `--qos-enhancement-default-values numa_exclusive=true` (pkg/config/generic/qos.go "
     "QoSEnhancementDefaultValues), the AdminQoSConfiguration's `enableDedicatedCoresDefaultCPUBurst` / "
     "`--enable-default-dedicated-cores-cpu-burst` and `defaultCPUBurstPercent` (pkg/agent/qrm-plugins/cpu/util/util.go "
     "getOverriddenDedicatedCoresPodBurstPolicy, GetPodCPUBurstPercent) are node configuration, not in the request: "
     "settings `katalyst_default_numa_exclusive`, `katalyst_dedicated_default_burst`, `katalyst_default_burst_percent` "
     "(off by default, as in the agent; cases default-numa-exclusive, dedicated-default-burst)."),
    ("katalyst", "not reproduced: calculateHints' socket check (CheckNUMACrossSockets), `distribute_evenly_across_numa`, "
     "`full_pcpus_pairing` and `align_by_socket` (a warning says so), the sole-shared_cores-pod burst default (it needs "
     "the node's pod list), and a numa_exclusive hint of numa_number nodes that includes a node with allocated CPUs "
     "(Katalyst counts it as 0 available; nri-qos never puts an exclusive placement on such a node)."),
]


def markdown(table, reasons, cols, o, cases, docs, percase):
    """The published table (docs/conformance.md): deterministic, no timestamps, so that a stale
    copy is detected by --markdown-check."""
    def cell(st):
        if not st:
            return "–"
        for k in ("DIFF", "expl", "n/r", "n/a"):
            if k in st:
                return k if len(st) == 1 else k + "+"
        return "ok"
    pol = os.path.relpath(o.policy, TOP) if o.policy.startswith(TOP) else o.policy
    out = ["# Conformance: nri-qos against the seed systems' node agents", "",
           "<!-- generated by tests/conformance/conformance.py --markdown docs/conformance.md; do not edit -->", "",
           "What the cgroup files of a pod and its containers end up as when the pod comes from a",
           "colocation system's own published manifest, compared with what that system's node agent",
           "(plus kubelet and runc) writes. Policy: `%s`%s. Each case runs on scratch cgroup v1 and v2" % (
               pol, " with the seed systems' annotations declared in `[guarded.annotations]` (trusted: their facts get the node agents'"
               " full behaviour)" if o.trust == "seed" else ""),
           "trees through NRI v0.1 (`invoke`) and native NRI (`nri-eval`); `make check` runs it",
           "(`tests/conformance/run.sh`) and fails on any difference not explained below.",
           "The last column, **untrusted**, is v1/invoke with the policy as shipped (nothing declared):",
           "`refused` where a fact from an undeclared annotation would raise the pod above its Kubernetes spec and",
           "is refused (nri-qos.toml(5) FACTS, Trust; docs/bad-inputs.md), so kubelet's value stays.", "",
           "`ok` every case matches · `DIFF` differs, unexplained · `expl` differs for a reason listed below ·",
           "`n/r` not reproducible from the request (node-agent state) · `n/a` layout the system does not",
           "support · `X+` X in some cases, ok in the others · `*` proxy expectations (source not public).", "",
           "| system | behaviour | " + " | ".join("%s/%s" % c for c in cols) + " | untrusted |",
           "|---|---|" + "---|" * (len(cols) + 1)]
    unt = getattr(o, "untrusted", {})
    def ucell(st):
        if not st:
            return "–"
        for k in ("refused", "expl", "n/r"):
            if k in st:
                return k if len(st) == 1 else k + "+"
        return "ok"
    for (sy, b) in sorted(table):
        out.append("| %s | %s | %s | %s |" % (sy, b, " | ".join(cell(table[(sy, b)].get(c)) for c in cols), ucell(unt.get((sy, b)))))
    out += ["", "## Explained differences and what cannot be reproduced", ""]
    out += ["**What an NRI request does not carry** (issue #32 §8): the node agents read the pod from the API",
            "server and their node's state; nri-qos sees what the runtime hands it.", ""]
    out += ["- %s" % n for n in NOT_CARRIED]
    out.append("")
    for (sy, b) in sorted(reasons):
        items = [(t, w) for t, w in reasons[(sy, b)].items() if not t.startswith("differs: ")]
        if not items:
            continue
        out.append("**%s / %s**" % (sy, b))
        out.append("")
        for text, where in sorted(items):
            w = sorted({x.split(" ")[0] for x in where})
            out.append("- %s (cases: %s)" % (text, ", ".join(w)))
        out.append("")
    # Inputs an NRI request does not carry, by system (issue #32 §8): reproduced by a setting,
    # or not at all; the cases that need a setting name it in case.json "policy_settings".
    out += ["**Agent options and inputs outside the request**", ""]
    out += ["- %s: %s" % (sy, text) for sy, text in OUTSIDE_REQUEST]
    out += [""]
    out += ["## Per system: case, what the node agent does, our result", "",
            "Per case and behaviour: the seed system's function that computes the value (`why` in the",
            "case's case.json, `owner/repo@tag:path Function`) and nri-qos's result per cgroup layout and",
            "wire path (`expl`: a documented difference, listed in the section above).", ""]
    for sy in sorted({k[0] for k in percase}):
        out += ["### %s" % sy, "", "| case | behaviour | node agent (seed file / function) | " + " | ".join("%s/%s" % c for c in cols) + " |",
                "|---|---|---|" + "---|" * len(cols)]
        for (sy2, cn, b) in sorted(k for k in percase if k[0] == sy):
            pc = percase[(sy2, cn, b)]
            why = "; ".join(sorted(pc["why"])).replace("|", "\\|")
            out.append("| %s | %s | %s | %s |" % (cn, b, why, " | ".join(pc.get(c, "–") for c in cols)))
        out.append("")
    out += ["## Cases", "", "| case | sources |", "|---|---|"]
    for c in cases:
        src = "; ".join("%s `%s`" % (x.get("repo", ""), x.get("path", "")) for x in c.get("sources", []))
        out.append("| %s%s | %s |" % (c["id"], " *" if c.get("proxy") else "", src.replace("|", "\\|")))
    out.append("")
    return "\n".join(out)


def print_table(table, reasons, cols, o):
    def cell(s):
        if not s:
            return "-"
        for k in ("DIFF", "expl", "n/r", "n/a"):
            if k in s:
                return k if len(s) == 1 else k + "+"
        return "ok"
    print()
    print("Conformance: system x behaviour (policy %s)" % os.path.relpath(o.policy, TOP) if o.policy.startswith(TOP) else o.policy)
    print("  ok = every case matches; DIFF = differs, unexplained; expl = differs, explained (differences.json);")
    print("  n/r = not reproducible from the request (node-agent state); n/a = layout not supported by the system;")
    print("  X+ = X in some cases, ok in the others; * = proxy expectations (source not public)")
    w = max([len(s) for s, _ in table] + [8])
    wb = max([len(b) for _, b in table] + [9])
    print("  %-*s  %-*s  %s" % (w, "system", wb, "behaviour", "  ".join("%-9s" % (l + "/" + p) for l, p in cols)))
    for (s, b) in sorted(table):
        print("  %-*s  %-*s  %s" % (w, s, wb, b, "  ".join("%-9s" % cell(table[(s, b)].get(c)) for c in cols)))
    if reasons:
        print()
        print("Reasons (-v lists every example):")
        for (s, b) in sorted(reasons):
            items = sorted(reasons[(s, b)].items())
            print("  %s / %s:" % (s, b))
            for text, where in (items if o.verbose else items[:3]):
                w = sorted(where)
                print("    - %s   (%s%s)" % (text, ", ".join(w[:3]), ", +%d" % (len(w) - 3) if len(w) > 3 else ""))
            if not o.verbose and len(items) > 3:
                print("    - ... %d more" % (len(items) - 3))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Generate the conformance fixtures from tests/conformance/cases/*/*/case.json.

For every case (a pod paraphrased from a seed system's published manifest) this computes what
kubelet and containerd hand to the runtime and writes, next to case.json:

  kubelet.json                  kubelet's values: Kubernetes QoS class, pod cgroup values, per
                                container OCI LinuxResources and oom_score_adj, cgroup paths
  requests/v01/sandbox-create.json, requests/v01/<ctr>-create.json
                                NRI v0.1 `invoke` requests (shape of tests/fixtures/requests,
                                captured from containerd 1.6.20)
  requests/nri/RunPodSandbox.json, requests/nri/<ctr>-CreateContainer.json,
  requests/nri/<ctr>-StartContainer.json
                                native NRI events as the relay hands them to `nri-eval`
                                (NRI Go JSON, src/nri/nri_json.hpp)
  manifest.json                 the case's pod as a Kubernetes Pod manifest (v1 Pod, JSON is
                                YAML), with the uid kubelet.json uses: what `nri-qos explain
                                --pod` reads (the runner checks its end state, issue #21)

Kubelet rules reproduced here (read from kubernetes/kubernetes, 1.33+ forms):
  * pkg/apis/core/v1/helper/qos GetPodQOS: BestEffort without cpu/memory requests and limits,
    Guaranteed when every container has cpu and memory limits equal to its requests;
  * pkg/kubelet/cm/helpers_linux.go MilliCPUToShares (milli*1024/1000, min 2, max 262144),
    MilliCPUToQuota (milli*period/1000, min 1000, 0 = unset), ResourceConfigForPod (pod cgroup:
    Guaranteed shares+quota+memory, Burstable shares + quota/memory only when every container
    declares the limit, BestEffort shares 2);
  * pkg/kubelet/kuberuntime/kuberuntime_container_linux.go calculateLinuxResources (container:
    shares from the request, or from the limit when there is no request; quota from the limit;
    period 100000; memory limit) and DisableCPUQuotaWithExclusiveCPUs (1.33 beta, on: quota -1
    for containers with exclusive CPUs, and for the pod in pod_container_manager EnsureExists);
  * pkg/kubelet/qos/policy.go GetContainerOOMScoreAdjust (Guaranteed -997, BestEffort 1000,
    Burstable 1000 - 1000*memRequest/capacity clamped to [3, 999]; tie-break gate off);
  * API defaulting: a request left out defaults to the limit (pkg/apis/core/v1/defaults.go).
containerd (pkg/cri/opts/spec_linux_opts.go WithResources, v1.7.24): period/quota/shares/memory
limit only when non-zero; swap = memory limit when the swap controller exists.

Deterministic: ids, uids and pids derive from the case name. Run it after editing a case.json:
    python3 tests/conformance/gen.py            # all cases
    python3 tests/conformance/gen.py --check    # exit 1 when a generated file is out of date
"""
import hashlib
import json
import os
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")

MIN_SHARES, MAX_SHARES, SHARES_PER_CPU, QUOTA_PERIOD, MIN_QUOTA = 2, 262144, 1024, 100000, 1000
RUNTIME = {"name": "containerd", "version": "1.7.24"}

_SUFFIX = {"": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
           "Pi": 2**50, "Ei": 2**60}


def quantity(s):
    """Kubernetes resource.Quantity string -> exact Fraction (k8s.io/apimachinery resource)."""
    s = str(s).strip()
    for suf in sorted(_SUFFIX, key=len, reverse=True):
        if suf and s.endswith(suf):
            return Fraction(s[: -len(suf)]) * _SUFFIX[suf]
    if "e" in s or "E" in s:
        m, e = s.replace("E", "e").split("e")
        return Fraction(m) * Fraction(10) ** int(e)
    return Fraction(s)


def ceil_frac(f):
    return -((-f.numerator) // f.denominator)


def milli(q):   # Quantity.MilliValue(): rounded up
    return ceil_frac(q * 1000)


def value(q):   # Quantity.Value(): rounded up
    return ceil_frac(q)


def milli_to_shares(m):
    if m == 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, m * SHARES_PER_CPU // 1000))


def milli_to_quota(m, period=QUOTA_PERIOD):
    if m == 0:
        return 0
    return max(MIN_QUOTA, m * period // 1000)


def hexid(*parts):
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def uid_for(name):
    h = hexid("uid", name)
    return "%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def pid_for(*parts):
    return 10000 + int(hexid("pid", *parts)[:6], 16) % 900000


def effective(ctr):
    """(requests, limits) of cpu/memory after API defaulting (request defaults to the limit)."""
    res = ctr.get("resources", {})
    req = {k: quantity(v) for k, v in res.get("requests", {}).items()}
    lim = {k: quantity(v) for k, v in res.get("limits", {}).items()}
    for k, v in lim.items():
        req.setdefault(k, v)
    return req, lim


def pod_qos(pod):
    requests, limits, guaranteed = {}, {}, True
    for c in pod["containers"]:
        req, lim = effective(c)
        for r in ("cpu", "memory"):
            if r in req and req[r] != 0:
                requests[r] = requests.get(r, 0) + req[r]
        found = set()
        for r in ("cpu", "memory"):
            if r in lim and lim[r] != 0:
                found.add(r)
                limits[r] = limits.get(r, 0) + lim[r]
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "besteffort"
    if guaranteed and requests == limits:
        return "guaranteed"
    return "burstable"


def paths(case, qos, uid, sid, cids):
    driver = case.get("driver", "cgroupfs")
    if driver == "cgroupfs":
        parent = "/kubepods" + ("" if qos == "guaranteed" else "/" + qos) + "/pod" + uid
        sb = parent + "/" + sid
        ctrs = {n: parent + "/" + i for n, i in cids.items()}
    else:
        slc = "kubepods" + ("" if qos == "guaranteed" else "-" + qos) + "-pod" + uid.replace("-", "_") + ".slice"
        parent = slc
        sb = slc + ":cri-containerd:" + sid
        ctrs = {n: slc + ":cri-containerd:" + i for n, i in cids.items()}
    return {"driver": driver, "cgroup_parent": parent, "sandbox": sb, "containers": ctrs}


def kubelet(case):
    name = case["name"]
    pod = case["pod"]
    node = case.get("node", {})
    mem_cap = int(node.get("memory_bytes", 16 * 2**30))
    static = case.get("kubelet_static_cpus", {})
    qos = pod_qos(pod)
    uid = uid_for(name)
    sid = hexid("sandbox", name)
    cids = {c["name"]: hexid("container", name, c["name"]) for c in pod["containers"]}
    out = {"kube_qos": qos, "uid": uid, "sandbox_id": sid, "sandbox_pid": pid_for(name, "sandbox"),
           "paths": paths(case, qos, uid, sid, cids), "containers": {}}
    cpu_req_sum = cpu_lim_sum = mem_lim_sum = 0
    cpu_lim_all = mem_lim_all = True
    for c in pod["containers"]:
        req, lim = effective(c)
        cpu_req = milli(req["cpu"]) if "cpu" in req else None
        cpu_lim = milli(lim["cpu"]) if "cpu" in lim else 0
        mem_lim = value(lim["memory"]) if "memory" in lim else 0
        shares = milli_to_shares(cpu_lim if cpu_req is None else cpu_req)
        cpu = {"shares": shares, "period": QUOTA_PERIOD}
        quota = milli_to_quota(cpu_lim)
        if c["name"] in static:
            cpu["cpus"] = static[c["name"]]
            quota = -1
        if quota != 0:
            cpu["quota"] = quota
        oci = {"cpu": cpu}
        if mem_lim:
            oci["memory"] = {"limit": mem_lim, "swap": mem_lim}
        if qos == "guaranteed":
            oom = -997
        elif qos == "besteffort":
            oom = 1000
        else:
            mreq = value(req["memory"]) if "memory" in req else 0
            oom = 1000 - (1000 * mreq) // mem_cap
            oom = 3 if oom < 3 else (999 if oom == 1000 else oom)
        out["containers"][c["name"]] = {"id": cids[c["name"]], "pid": pid_for(name, c["name"]),
                                        "oci": oci, "oom_score_adj": oom}
        cpu_req_sum += cpu_req or 0
        cpu_lim_sum += cpu_lim
        mem_lim_sum += mem_lim
        cpu_lim_all &= cpu_lim != 0
        mem_lim_all &= mem_lim != 0
    pc = {"cpu_shares": MIN_SHARES if qos == "besteffort" else milli_to_shares(cpu_req_sum)}
    if qos == "guaranteed" or (qos == "burstable" and cpu_lim_all):
        q = milli_to_quota(cpu_lim_sum)
        pc["cpu_quota"] = -1 if static else q
        pc["cpu_period"] = QUOTA_PERIOD
    if qos == "guaranteed" or (qos == "burstable" and mem_lim_all):
        pc["memory_limit"] = mem_lim_sum
    out["pod"] = pc
    out["sandbox"] = {"cpu": {"shares": 2}}
    return out


def nri_resources(oci):
    r = {}
    cpu = oci.get("cpu", {})
    if cpu:
        c = {}
        for k in ("shares", "quota", "period"):
            if k in cpu:
                c[k] = {"value": cpu[k]}
        for k in ("cpus", "mems"):
            if k in cpu:
                c[k] = cpu[k]
        r["cpu"] = c
    if "memory" in oci:
        r["memory"] = {k: {"value": v} for k, v in oci["memory"].items()}
    return r


def build(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    case["name"] = os.path.relpath(case_dir, CASES)
    k = kubelet(case)
    pod = case["pod"]
    ns, pname, uid, sid = pod.get("namespace", "default"), pod["name"], k["uid"], k["sandbox_id"]
    labels = dict(pod.get("labels", {}))
    annotations = dict(pod.get("annotations", {}))
    # kubelet's sandbox labels (pkg/kubelet/kuberuntime/labels.go newPodLabels)
    sb_labels = dict(labels)
    sb_labels.update({"io.kubernetes.pod.name": pname, "io.kubernetes.pod.namespace": ns,
                      "io.kubernetes.pod.uid": uid})
    cri_sb = {"io.kubernetes.cri.sandbox-id": sid, "io.kubernetes.cri.sandbox-name": pname,
              "io.kubernetes.cri.sandbox-namespace": ns, "io.kubernetes.cri.sandbox-uid": uid}
    files = {}
    # ---- NRI v0.1 (containerd 1.6 in-process / 1.7 v010-adapter); annotations: the pod's,
    # as passed by the runtime's pod_annotations allow-list (README: assumptions).
    sb_ann = dict(annotations)
    sb_ann.update(cri_sb)
    sb_ann.update({"io.kubernetes.cri.container-type": "sandbox",
                   "io.kubernetes.cri.sandbox-log-directory": "/var/log/pods/%s_%s_%s" % (ns, pname, uid)})
    files["requests/v01/sandbox-create.json"] = {
        "conf": {}, "version": "0.1", "state": "create", "id": sid, "sandboxID": sid,
        "pid": k["sandbox_pid"],
        "spec": {"resources": {"devices": [{"allow": False, "access": "rwm"}], "cpu": {"shares": 2}},
                 "namespaces": {"ipc": "", "mount": "", "pid": ""},
                 "cgroupsPath": k["paths"]["sandbox"], "annotations": sb_ann},
        "labels": sb_labels}
    nri_pod_ann = dict(annotations)
    nri_pod_ann.update({"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-11-23T10:00:00Z"})
    nri_pod = {"id": sid, "name": pname, "uid": uid, "namespace": ns, "labels": sb_labels,
               "annotations": nri_pod_ann,
               "linux": {"cgroup_parent": k["paths"]["cgroup_parent"], "cgroups_path": k["paths"]["sandbox"],
                         "resources": nri_resources(k["sandbox"])},
               "pid": k["sandbox_pid"]}
    files["requests/nri/RunPodSandbox.json"] = {"event": "RunPodSandbox", "runtime": RUNTIME, "pod": nri_pod}
    for c in pod["containers"]:
        kc = k["containers"][c["name"]]
        cid = kc["id"]
        c_ann = dict(annotations)
        c_ann.update(cri_sb)
        c_ann.update({"io.kubernetes.cri.container-name": c["name"], "io.kubernetes.cri.container-type": "container",
                      "io.kubernetes.cri.image-name": c.get("image", "busybox:latest")})
        res = {"devices": [{"allow": False, "access": "rwm"}]}
        res.update(kc["oci"])
        files["requests/v01/%s-create.json" % c["name"]] = {
            "conf": {}, "version": "0.1", "state": "create", "id": cid, "sandboxID": sid, "pid": kc["pid"],
            "spec": {"resources": res,
                     "namespaces": {"ipc": "/proc/%d/ns/ipc" % k["sandbox_pid"], "mount": "",
                                    "network": "/proc/%d/ns/net" % k["sandbox_pid"], "pid": "",
                                    "uts": "/proc/%d/ns/uts" % k["sandbox_pid"]},
                     "cgroupsPath": k["paths"]["containers"][c["name"]], "annotations": c_ann},
            "labels": sb_labels}
        ctr_labels = {"io.kubernetes.container.name": c["name"], "io.kubernetes.pod.name": pname,
                      "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.uid": uid}
        nri_ctr = {"id": cid, "pod_sandbox_id": sid, "name": c["name"], "labels": ctr_labels,
                   "annotations": c_ann,
                   "linux": {"resources": nri_resources(kc["oci"]),
                             "oom_score_adj": {"value": kc["oom_score_adj"]},
                             "cgroups_path": k["paths"]["containers"][c["name"]]}}
        files["requests/nri/%s-CreateContainer.json" % c["name"]] = {
            "event": "CreateContainer", "runtime": RUNTIME, "pod": nri_pod, "container": nri_ctr}
        started = json.loads(json.dumps(nri_ctr))
        started["state"] = 1  # CONTAINER_CREATED: StartContainer runs before the task starts
        started["pid"] = kc["pid"]
        files["requests/nri/%s-StartContainer.json" % c["name"]] = {
            "event": "StartContainer", "runtime": RUNTIME, "pod": nri_pod, "container": started}
    files["kubelet.json"] = k
    meta = {"name": pname, "namespace": ns, "uid": uid}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    ctrs = []
    for c in pod["containers"]:
        mc = {"name": c["name"], "image": c.get("image", "busybox:latest")}
        if c.get("resources"):
            mc["resources"] = c["resources"]
        ctrs.append(mc)
    files["manifest.json"] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": ctrs}}
    return files


def main():
    check = "--check" in sys.argv[1:]
    stale = 0
    for system in sorted(os.listdir(CASES)):
        sdir = os.path.join(CASES, system)
        if not os.path.isdir(sdir):
            continue
        for cname in sorted(os.listdir(sdir)):
            cdir = os.path.join(sdir, cname)
            if not os.path.isfile(os.path.join(cdir, "case.json")):
                continue
            files = build(cdir)
            if not check:
                for sub in ("requests/v01", "requests/nri"):
                    d = os.path.join(cdir, sub)
                    if os.path.isdir(d):
                        for f in os.listdir(d):
                            os.unlink(os.path.join(d, f))
            for rel, obj in files.items():
                path = os.path.join(cdir, rel)
                text = json.dumps(obj, indent=1, sort_keys=True) + "\n"
                if check:
                    try:
                        with open(path) as f:
                            same = f.read() == text
                    except OSError:
                        same = False
                    if not same:
                        print("stale: %s" % os.path.relpath(path, HERE))
                        stale += 1
                    continue
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
    if check and stale:
        sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Minimal CRI v1 client for the nri-qos e2e suites (Debian python3-grpcio + python3-grpc-tools).

Python stubs are generated from cri_subset.proto on first use into $CRI_PYGEN_DIR
(default: <tmp>/cri-pygen-<hash>).

  criclient.py -s SOCK version
  criclient.py -s SOCK ps
  criclient.py -s SOCK up-pod --name N --image IMG [--uid-prefix P] [--cgroup-parent T]
        [--label k=v]... [--annotation k=v]... [--ctr-annotation k=v]...
        [--cpu-shares N] [--cpu-quota N] [--cpu-period N] [--memory BYTES] [--no-container]
      RunPodSandbox (host network, pod uid "<P>-..."; T may contain {uid}), CreateContainer
      (`sleep 1000000`), StartContainer. Prints one JSON object: ok, steps{name:{ok,seconds,error}},
      pod_uid, cgroup_parent, pod_id, ctr_id, ctr_state. Exit 0 when every step succeeded.
      Leaves the pod running (see down-pod).
  criclient.py -s SOCK down-pod POD_ID
      StopPodSandbox + RemovePodSandbox (also stops/removes its containers).
  criclient.py -s SOCK update CTR_ID [--cpuset-cpus LIST] [--cpu-shares N] [--cpu-quota N]
        [--cpu-period N] [--memory BYTES]
      UpdateContainerResources as the kubelet sends it: fields left out are 0/empty, which
      containerd leaves unchanged (the static CPU manager sends the cpuset alone; an in-place
      resize sends shares, quota, period and memory). Prints {"ok", "seconds", "error"}; exit 1
      when the runtime refused the update.
  criclient.py -s SOCK update-pod POD_ID [--cpu-shares N] [--cpu-quota N] [--cpu-period N]
        [--memory BYTES]
      UpdatePodSandboxResources as the kubelet sends it in an in-place resize, after it rewrote
      the pod cgroup and before it updates the containers (cri-api: "called _after_ the Kubelet
      reconfigures the pod-level cgroups"): `resources` = the pod's new totals, no overhead.
      Prints {"ok", "seconds", "error"}; exit 1 when the runtime refused it (containerd v2.2.7
      answers every such call UNIMPLEMENTED "not implemented").
  criclient.py --gen-only
      only generate the Python stubs (no socket needed).
"""
import argparse, hashlib, importlib, json, os, shutil, sys, tempfile, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "cri_subset.proto")


def load_stubs():
    with open(PROTO, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:12]
    base = os.environ.get("CRI_PYGEN_DIR") or os.path.join(tempfile.gettempdir(), "cri-pygen")
    out = os.path.join(base, h)
    if not os.path.exists(os.path.join(out, "cri_subset_pb2_grpc.py")):
        # generated into a private directory and renamed into place: several clients may start
        # at once (the host suites and the VM's staging), none may import a half-written file
        os.makedirs(base, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=h + ".", dir=base)
        from grpc_tools import protoc
        if protoc.main(["protoc", "-I" + HERE, "--python_out=" + tmp,
                        "--grpc_python_out=" + tmp, PROTO]) != 0:
            sys.exit("criclient: protoc failed")
        try:
            os.rename(tmp, out)
        except OSError:  # another client was first
            shutil.rmtree(tmp, ignore_errors=True)
    sys.path.insert(0, out)
    return importlib.import_module("cri_subset_pb2"), importlib.import_module("cri_subset_pb2_grpc")


pb, pbg = load_stubs()
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402


def kv(items):
    d = {}
    for it in items or []:
        k, _, v = it.partition("=")
        d[k] = v
    return d


def ns_opts():
    # host network: no CNI needed; no hostname (host UTS namespace, runc would refuse it)
    return pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)


def pod_config(name, uid, cgroup_parent, labels, annotations):
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default", attempt=0),
        labels=labels, annotations=annotations,
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent,
            security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns_opts())))


def up_pod(rt, a, T):
    res = {"steps": {}, "ok": False}

    def step(name, fn):
        t = time.time()
        try:
            r = fn()
            res["steps"][name] = {"ok": True, "seconds": round(time.time() - t, 3)}
            return r
        except grpc.RpcError as e:
            res["steps"][name] = {"ok": False, "seconds": round(time.time() - t, 3),
                                  "error": "%s: %s" % (e.code(), e.details())}
            raise

    uid = a.uid_prefix + "-" + str(uuid.uuid4())[len(a.uid_prefix) + 1:]
    res["pod_uid"] = uid
    # {uid}: as the kubelet's cgroupfs driver spells it; {uid_}: systemd slice names ("-" -> "_")
    res["cgroup_parent"] = a.cgroup_parent.format(uid=uid, uid_=uid.replace("-", "_"))
    pc = pod_config(a.name, uid, res["cgroup_parent"], kv(a.label), kv(a.annotation))
    rc = 1
    try:
        res["pod_id"] = step("RunPodSandbox", lambda: rt.RunPodSandbox(
            pb.RunPodSandboxRequest(config=pc, runtime_handler=a.handler), timeout=T).pod_sandbox_id)
        if a.no_container:
            rc = 0
            return rc
        cc = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=a.name + "-c", attempt=0),
            image=pb.ImageSpec(image=a.image), command=["sleep", "1000000"],
            annotations=kv(a.ctr_annotation),
            linux=pb.LinuxContainerConfig(
                resources=pb.LinuxContainerResources(
                    cpu_shares=a.cpu_shares, cpu_quota=a.cpu_quota, cpu_period=a.cpu_period,
                    memory_limit_in_bytes=a.memory),
                security_context=pb.LinuxContainerSecurityContext(namespace_options=ns_opts())))
        res["ctr_id"] = step("CreateContainer", lambda: rt.CreateContainer(
            pb.CreateContainerRequest(pod_sandbox_id=res["pod_id"], config=cc, sandbox_config=pc),
            timeout=T).container_id)
        if a.start_when:  # the test starts the container later: when this file exists
            end = time.time() + T
            while not os.path.exists(a.start_when) and time.time() < end:
                time.sleep(0.05)
        step("StartContainer", lambda: rt.StartContainer(
            pb.StartContainerRequest(container_id=res["ctr_id"]), timeout=T))
        rc = 0
    except grpc.RpcError:
        rc = 1
    finally:
        if res.get("ctr_id"):
            try:
                lst = rt.ListContainers(pb.ListContainersRequest(
                    filter=pb.ContainerFilter(id=res["ctr_id"])), timeout=T)
                res["ctr_state"] = [pb.ContainerState.Name(c.state) for c in lst.containers]
            except grpc.RpcError:
                pass
        res["ok"] = rc == 0
        print(json.dumps(res, indent=1))
    return rc


def update(rt, a, T):
    lr = pb.LinuxContainerResources(cpuset_cpus=a.cpuset_cpus, cpu_shares=a.cpu_shares,
                                    cpu_quota=a.cpu_quota, cpu_period=a.cpu_period,
                                    memory_limit_in_bytes=a.memory)
    t = time.time()
    res = {"ok": True}
    try:
        rt.UpdateContainerResources(pb.UpdateContainerResourcesRequest(container_id=a.id, linux=lr), timeout=T)
    except grpc.RpcError as e:
        res = {"ok": False, "error": "%s: %s" % (e.code(), e.details())}
    res["seconds"] = round(time.time() - t, 3)
    print(json.dumps(res))
    return 0 if res["ok"] else 1


def update_pod(rt, a, T):
    lr = pb.LinuxContainerResources(cpu_shares=a.cpu_shares, cpu_quota=a.cpu_quota,
                                    cpu_period=a.cpu_period, memory_limit_in_bytes=a.memory)
    t = time.time()
    res = {"ok": True}
    try:
        rt.UpdatePodSandboxResources(pb.UpdatePodSandboxResourcesRequest(pod_sandbox_id=a.id, resources=lr), timeout=T)
    except grpc.RpcError as e:
        res = {"ok": False, "error": "%s: %s" % (e.code(), e.details())}
    res["seconds"] = round(time.time() - t, 3)
    print(json.dumps(res))
    return 0 if res["ok"] else 1


def main():
    if sys.argv[1:] == ["--gen-only"]:
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("-s", "--socket", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("version"); sub.add_parser("ps")
    p = sub.add_parser("up-pod")
    p.add_argument("--name", required=True); p.add_argument("--image", required=True)
    p.add_argument("--uid-prefix", default="0e2e0000"); p.add_argument("--cgroup-parent", default="")
    p.add_argument("--handler", default="")
    p.add_argument("--label", action="append"); p.add_argument("--annotation", action="append")
    p.add_argument("--ctr-annotation", action="append")
    for f in ("--cpu-shares", "--cpu-quota", "--cpu-period", "--memory"):
        p.add_argument(f, type=int, default=0)
    p.add_argument("--no-container", action="store_true")
    p.add_argument("--start-when", default="", help="after CreateContainer, wait (up to --timeout) until this file exists")
    sub.add_parser("down-pod").add_argument("id")
    p = sub.add_parser("update"); p.add_argument("id"); p.add_argument("--cpuset-cpus", default="")
    for f in ("--cpu-shares", "--cpu-quota", "--cpu-period", "--memory"):
        p.add_argument(f, type=int, default=0)
    p = sub.add_parser("update-pod"); p.add_argument("id")
    for f in ("--cpu-shares", "--cpu-quota", "--cpu-period", "--memory"):
        p.add_argument(f, type=int, default=0)
    a = ap.parse_args()

    ch = grpc.insecure_channel("unix://" + os.path.abspath(a.socket))
    grpc.channel_ready_future(ch).result(timeout=10)
    rt, T = pbg.RuntimeServiceStub(ch), a.timeout
    if a.cmd == "version":
        print(json.dumps(json_format.MessageToDict(
            rt.Version(pb.VersionRequest(version="v1"), timeout=T), preserving_proto_field_name=True)))
    elif a.cmd == "ps":
        print(json.dumps(json_format.MessageToDict(
            rt.ListContainers(pb.ListContainersRequest(), timeout=T), preserving_proto_field_name=True), indent=1))
    elif a.cmd == "up-pod":
        sys.exit(up_pod(rt, a, T))
    elif a.cmd == "update":
        sys.exit(update(rt, a, T))
    elif a.cmd == "update-pod":
        sys.exit(update_pod(rt, a, T))
    elif a.cmd == "down-pod":
        rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=a.id), timeout=T)
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=a.id), timeout=T)


if __name__ == "__main__":
    main()

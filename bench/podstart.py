#!/usr/bin/python3
"""Pod start latency through CRI, several containerd instances interleaved (bench/podstart.sh).

For each round, for each configuration (rotating order, so no configuration always goes first):
RunPodSandbox + CreateContainer + StartContainer of a new pod (timed, per step and in total),
a check that the plugin did the bench policy's work (the container's cpu.shares read from its
cgroup, its process's /proc/PID/oom_score_adj; bench/native-policy.toml), then
StopPodSandbox + RemovePodSandbox (not timed). The CRI calls are those of the e2e client
(tests/e2e/cri/criclient.py: its generated stubs and its pod/container configuration).

  podstart.py --config LABEL=SOCKET[,expect_shares=N][,expect_oom=N] ... --pods N --warmup W
              --image IMG --uid-prefix P [--label k=v]... --baseline LABEL=BASELINE_LABEL ...
              [--compare LABEL=LABEL]... [--json FILE]

Prints a markdown table; for every configuration with a baseline, the median and p90 difference
to the baseline with a bootstrap 95% confidence interval (bench/stats.py diff_ci: 2000 resamples,
fixed seed); exit 1 if a CRI call failed or a check did not hold.
"""
import argparse, json, os, sys, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stats import RESAMPLES, diff_ci, pct  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e", "cri"))
import criclient as cc  # noqa: E402  (generates/loads the CRI stubs)
import grpc  # noqa: E402

pb, pbg = cc.pb, cc.pbg
STEPS = ("RunPodSandbox", "CreateContainer", "StartContainer")
CG = "/sys/fs/cgroup/cpu" if os.path.exists("/sys/fs/cgroup/cpu/cpu.shares") else "/sys/fs/cgroup"


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"


class Config:
    def __init__(self, spec):
        label, _, rest = spec.partition("=")
        parts = rest.split(",")
        self.label, self.sock = label, parts[0]
        self.expect = dict(p.split("=", 1) for p in parts[1:])
        ch = grpc.insecure_channel("unix://" + os.path.abspath(self.sock))
        grpc.channel_ready_future(ch).result(timeout=10)
        self.rt = pbg.RuntimeServiceStub(ch)
        self.total, self.steps, self.errors, self.bad = [], {s: [] for s in STEPS}, [], []
        self.version = self.rt.Version(pb.VersionRequest(version="v1"), timeout=10).runtime_version


def one_pod(c, a, n, measured):
    uid = a.uid_prefix + "-" + str(uuid.uuid4())[len(a.uid_prefix) + 1:]
    parent = "/kubepods/burstable/pod" + uid
    pc = cc.pod_config("bench-%d" % n, uid, parent, cc.kv(a.label), {})
    ctr = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="c", attempt=0), image=pb.ImageSpec(image=a.image),
        command=["sleep", "1000000"],
        linux=pb.LinuxContainerConfig(
            resources=pb.LinuxContainerResources(cpu_shares=512, cpu_quota=50000, cpu_period=100000,
                                                 memory_limit_in_bytes=64 << 20),
            security_context=pb.LinuxContainerSecurityContext(namespace_options=cc.ns_opts())))
    T, t, pod_id = 60, {}, None
    try:
        t0 = time.perf_counter()
        pod_id = c.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pc), timeout=T).pod_sandbox_id
        t1 = time.perf_counter()
        ctr_id = c.rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=pod_id, config=ctr,
                                                                sandbox_config=pc), timeout=T).container_id
        t2 = time.perf_counter()
        c.rt.StartContainer(pb.StartContainerRequest(container_id=ctr_id), timeout=T)
        t3 = time.perf_counter()
        t = {"RunPodSandbox": t1 - t0, "CreateContainer": t2 - t1, "StartContainer": t3 - t2}
        procs = read("%s%s/%s/cgroup.procs" % (CG, parent, ctr_id)).split()
        got = {"shares": read("%s%s/%s/cpu.shares" % (CG, parent, ctr_id)),
               "oom": read("/proc/%s/oom_score_adj" % procs[0]) if procs and procs[0] != "?" else "?"}
        for k in ("shares", "oom"):
            want = c.expect.get("expect_" + k)
            if want is not None and got[k] != want:
                c.bad.append("pod %d: %s %s want %s" % (n, k, got[k], want))
    except grpc.RpcError as e:
        c.errors.append("pod %d: %s: %s" % (n, e.code(), e.details()))
    finally:
        if pod_id:
            try:
                c.rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=T)
                c.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=T)
            except grpc.RpcError as e:
                c.errors.append("pod %d teardown: %s: %s" % (n, e.code(), e.details()))
    if measured and len(t) == 3:
        c.total.append(sum(t.values()))
        for s in STEPS:
            c.steps[s].append(t[s])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", action="append", required=True)
    ap.add_argument("--baseline", action="append", default=[], help="LABEL=BASELINE_LABEL")
    ap.add_argument("--pods", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--image", required=True)
    ap.add_argument("--uid-prefix", default="0e2e0000")
    ap.add_argument("--label", action="append", default=[])
    ap.add_argument("--compare", action="append", default=[], help="A=B: print A's added latency / B's")
    ap.add_argument("--json")
    a = ap.parse_args()
    cfgs = [Config(s) for s in a.config]
    base = dict(b.split("=", 1) for b in a.baseline)
    t0 = time.time()
    for r in range(a.warmup + a.pods):
        for j in range(len(cfgs)):
            one_pod(cfgs[(j + r) % len(cfgs)], a, r, r >= a.warmup)
    by = {c.label: c for c in cfgs}
    ms = lambda x: "%.1f" % (x * 1000)  # noqa: E731
    print("Pod start through CRI (RunPodSandbox + CreateContainer + StartContainer, one pod at a time), "
          "%d pods per configuration after %d warm-up pods, configurations interleaved pod by pod "
          "in rotating order; %.0f s.%s\n"
          % (a.pods, a.warmup, time.time() - t0,
             " With fewer than 100 pods, p99 is the slowest pod." if a.pods < 100 else ""))
    print("| containerd | configuration | pods | p50 ms | p90 ms | p99 ms | mean ms | added p50 ms (95% CI) "
          "| added p90 ms (95% CI) | added p99 ms | RunPodSandbox p50 | CreateContainer p50 | StartContainer p50 | checks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    added, vs = {}, {}
    ci = lambda d: "%+.1f [%+.1f, %+.1f]" % tuple(x * 1000 for x in d)  # noqa: E731
    for c in cfgs:
        b = by.get(base.get(c.label, ""))
        ap99 = pct(c.total, .99) - pct(b.total, .99) if b else float("nan")
        if b:
            vs[c.label] = {"baseline": b.label, "p50_ms": [x * 1000 for x in diff_ci(c.total, b.total, .5)],
                           "p90_ms": [x * 1000 for x in diff_ci(c.total, b.total, .9)]}
        added[c.label] = pct(c.total, .5) - pct(b.total, .5) if b else float("nan")
        checks = "%d errors, %d wrong" % (len(c.errors), len(c.bad)) if c.errors or c.bad else \
            ("ok" if c.expect else "-")
        print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c.version, c.label, len(c.total), ms(pct(c.total, .5)), ms(pct(c.total, .9)),
            ms(pct(c.total, .99)), ms(sum(c.total) / max(1, len(c.total))),
            ci([x / 1000 for x in vs[c.label]["p50_ms"]]) if b else "-",
            ci([x / 1000 for x in vs[c.label]["p90_ms"]]) if b else "-", ms(ap99) if b else "-",
            ms(pct(c.steps["RunPodSandbox"], .5)), ms(pct(c.steps["CreateContainer"], .5)),
            ms(pct(c.steps["StartContainer"], .5)), checks))
    if vs:
        print("\nAdded = the configuration's percentile minus its baseline's (no plugin, same containerd); "
              "95%% CI: percentile bootstrap, %d resamples of each configuration's pods, fixed seed "
              "(bench/stats.py). An interval that contains 0 is no measurable difference." % RESAMPLES)
    for cmp in a.compare:
        x, y = cmp.split("=", 1)
        if x in added and y in added:
            if added[x] > 0 and added[y] > 0:
                r = "%.2f" % (added[x] / added[y])
            else:
                r = "n/a (%s adds no measurable latency)" % (x if added[x] <= 0 else y)
            print("\nAdded p50 latency, %s / %s: %s ms / %s ms = %s" % (x, y, ms(added[x]), ms(added[y]), r))
    for c in cfgs:
        for m in (c.errors + c.bad)[:5]:
            print("\n%s: %s" % (c.label, m), file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({c.label: dict({"version": c.version, "total_s": c.total, "steps_s": c.steps,
                                      "errors": c.errors, "wrong": c.bad},
                                     **({"added": vs[c.label]} if c.label in vs else {})) for c in cfgs}, f, indent=1)
    print()
    return 1 if any(c.errors or c.bad for c in cfgs) else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Self-test of the conformance runner: a runner that cannot fail, or that fails for the wrong
reason, is worse than none. Runs conformance.py with small policies whose outcome is known:

  faithful-offline.toml            does exactly what rubik's preemption does and nothing else:
                                   the rubik offline cases and all kubelet cases must PASS
                                   (exit 0), on v1 and v2, invoke and nri-eval;
  missing-container-memory-level   the same without the container memory_qos_level: exactly the
                                   "memory.qos_level" behaviour must FAIL, naming the container
                                   file; cpu.qos_level still PASSes;
  (same, with an explaining entry) a differences file explaining that one file turns the FAIL
                                   into a SKIP with the reason, and the exit code into 0;
  stray-cpu-idle.toml              one pod-level write nobody makes: "kept: cpu.idle" must FAIL
                                   for the kubelet cases.
Prints PASS/FAIL lines; exits 1 when the runner misbehaves.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ST = os.path.join(HERE, "selftest")
FAILED = False


def run(policy, case, differences=None):
    args = [sys.executable, os.path.join(HERE, "conformance.py"), "--no-table", "--policy", os.path.join(ST, policy), "--case", case]
    if differences:
        args += ["--differences", differences]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout.splitlines()


def check(name, ok, detail=""):
    global FAILED
    if ok:
        print("PASS conformance-selftest %s" % name)
    else:
        FAILED = True
        print("FAIL conformance-selftest %s%s" % (name, ": " + detail if detail else ""))


def main():
    rc, out = run("faithful-offline.toml", "rubik/offline-*")
    fails = [l for l in out if l.startswith("FAIL")]
    passes = [l for l in out if l.startswith("PASS")]
    check("faithful policy passes the rubik offline cases", rc == 0 and not fails and len(passes) >= 12,
          "exit %d, %d FAIL, %d PASS: %s" % (rc, len(fails), len(passes), " | ".join(fails[:3])))
    rc, out = run("faithful-offline.toml", "kubelet/*")
    fails = [l for l in out if l.startswith("FAIL")]
    check("faithful policy passes the kubelet cases (v1, v2, invoke, nri-eval)", rc == 0 and not fails
          and sum(1 for l in out if l.startswith("PASS")) >= 20, "exit %d: %s" % (rc, " | ".join(fails[:3])))

    rc, out = run("missing-container-memory-level.toml", "rubik/offline-besteffort")
    fails = [l for l in out if l.startswith("FAIL")]
    only_mem = fails and all(": memory.qos_level: " in l for l in fails)
    names_file = all("container qos-demo-3-ctr memory.qos_level = 0, want -1" in l for l in fails)
    check("a missing container knob fails exactly memory.qos_level (v1 invoke + nri)",
          rc == 1 and len(fails) == 2 and only_mem and names_file, "exit %d: %s" % (rc, " | ".join(fails)))
    check("... while cpu.qos_level still passes",
          sum(1 for l in out if l.startswith("PASS") and l.endswith(": cpu.qos_level")) == 2)

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"differences": [{"system": "rubik", "case": "offline-besteffort", "behaviour": "memory.qos_level",
                                    "scope": "container qos-demo-3-ctr", "file": "memory.qos_level", "got": "0",
                                    "reason": "selftest explanation"}]}, fh)
        tmp = fh.name
    try:
        rc, out = run("missing-container-memory-level.toml", "rubik/offline-besteffort", tmp)
        skips = [l for l in out if l.startswith("SKIP") and "selftest explanation" in l]
        check("an explained difference is a SKIP with its reason and exit 0",
              rc == 0 and len(skips) == 2 and not any(l.startswith("FAIL") for l in out), "exit %d: %s" % (rc, out[-3:]))
    finally:
        os.unlink(tmp)

    rc, out = run("stray-cpu-idle.toml", "kubelet/guaranteed")
    fails = [l for l in out if l.startswith("FAIL")]
    check("a stray pod write fails 'kept: cpu.idle' on every layout and path",
          rc == 1 and len(fails) == 4 and all(": kept: cpu.idle: pod cpu.idle = 1, want 0" in l for l in fails),
          "exit %d: %s" % (rc, " | ".join(fails)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

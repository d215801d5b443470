#!/usr/bin/python3
"""Scrape an nri-qos /metrics endpoint and check it with a Prometheus text parser
(Debian's python3-prometheus-client, prometheus_client.parser.text_string_to_metric_families).

Usage: metrics_scrape.py URL [--relay] [--events N] [--out FILE]
  --relay     the relay service's liveness must be there: nri_qos_relay_up 1, connected 1
  --events N  wait (up to 10 s) until nri_qos_events_total sums to at least N
  --out FILE  write the last answer there
Checks, on every answer: status 200, Content-Type text/plain version 0.0.4, the text parses,
every family is nri_qos_*, nri_qos_build_info is there exactly once with version and
policy_sha256 labels and value 1, no family twice; /no-such-path answers 404.
Exit 0 when all hold, 1 with the reason on stderr otherwise.
"""
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def fetch(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")


def check(url, relay, events):
    status, ctype, text = fetch(url)
    assert status == 200, f"status {status}"
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, f"Content-Type {ctype!r}"
    fams = list(text_string_to_metric_families(text))
    names = [f.name for f in fams]
    assert len(names) == len(set(names)), f"a family twice: {sorted(n for n in names if names.count(n) > 1)}"
    assert all(n.startswith("nri_qos_") for n in names), f"not nri_qos_*: {[n for n in names if not n.startswith('nri_qos_')]}"
    by = {f.name: f for f in fams}
    bi = by.get("nri_qos_build_info")
    assert bi and len(bi.samples) == 1, "nri_qos_build_info missing or more than one series"
    s = bi.samples[0]
    assert s.value == 1 and s.labels.get("version") and "policy_sha256" in s.labels, f"nri_qos_build_info {s}"
    if relay:
        for n in ("nri_qos_relay_up", "nri_qos_relay_connected"):
            assert n in by and by[n].samples[0].value == 1, f"{n} is not 1: {by.get(n) and by[n].samples}"
        assert "nri_qos_relay_reconnects_total" in by or "nri_qos_relay_reconnects" in by, "no reconnects counter"
    else:
        assert "nri_qos_relay_up" not in by, "relay liveness where no relay service runs"
    total = 0
    ev = by.get("nri_qos_events")  # the parser names a counter family without _total
    if ev:
        total = sum(x.value for x in ev.samples if x.name == "nri_qos_events_total")
    return text, total


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    url, relay, events, out = argv[1], "--relay" in argv, 0, None
    if "--events" in argv:
        events = int(argv[argv.index("--events") + 1])
    if "--out" in argv:
        out = argv[argv.index("--out") + 1]
    deadline = time.monotonic() + 10
    try:
        while True:
            text, total = check(url, relay, events)
            if total >= events or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if out:
            with open(out, "w") as f:
                f.write(text)
        assert total >= events, f"nri_qos_events_total is {total}, want >= {events}"
        base = url.rsplit("/", 1)[0]
        try:
            fetch(base + "/no-such-path")
            raise AssertionError("/no-such-path answered")
        except urllib.error.HTTPError as e:
            assert e.code == 404, f"/no-such-path: {e.code}"
    except (AssertionError, OSError, ValueError) as e:
        print(f"metrics_scrape: {url}: {e}", file=sys.stderr)
        return 1
    print(f"metrics_scrape: {url}: ok, nri_qos_events_total {total:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""Check the queries of the nri-qos Grafana dashboard and alert rules against the metric names.

Usage: check_promql.py DOCS.md DASHBOARD.json RULES.yaml OUT_RULES.yaml
  DOCS.md       docs/operations.md: its metrics table ("| `nri_qos_...` | type | ...") is the
                list of series nri-qos publishes (a histogram's _bucket/_sum/_count included)
  DASHBOARD     deploy/helm/nri-qos/files/dashboard.json: every target's expr
  RULES         deploy/helm/nri-qos/files/prometheus-rules.yaml: every rule's expr
  OUT_RULES     written: one recording rule per dashboard query, for `promtool check rules`
                (which parses each PromQL expression)
Every nri_qos_* name a query uses must be a published series; the only other name allowed is
Prometheus' own `up`. The rule file's rules (its comment lines aside) must be the block
docs/operations.md shows ("```yaml\ngroups:\n- name: nri-qos"). Exit 0, or 1 with one line
per problem on stderr.
"""
import json
import re
import sys

import yaml

# PromQL words that look like names: functions, aggregations, keywords.
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def published(doc_text):
    names = set()
    for m in re.finditer(r"^\| `(nri_qos_[a-z0-9_]+)", doc_text, re.M):
        n = m.group(1)
        names.add(n)
        row = doc_text[m.start():doc_text.index("\n", m.start())]
        if "| histogram |" in row:
            names.update({n + "_bucket", n + "_sum", n + "_count"})
    return names


def metric_names(expr):
    # drop label matchers and strings: {…}, "…"
    bare = re.sub(r'"[^"]*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    return {n for n in NAME.findall(bare) if n.startswith("nri_qos_") or n == "up"}


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    doc = open(argv[1]).read()
    known = published(doc) | {"up"}
    dash = json.load(open(argv[2]))
    rules = yaml.safe_load(open(argv[3]))
    queries = [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]
    queries += [(r.get("alert") or r.get("record"), r["expr"]) for g in rules["groups"] for r in g["rules"]]
    bad = 0
    for where, expr in queries:
        used = metric_names(expr)
        if not used:
            print(f"{where}: no metric in {expr!r}", file=sys.stderr)
            bad += 1
        for n in sorted(used - known):
            print(f"{where}: {n} is no series nri-qos publishes (docs/operations.md)", file=sys.stderr)
            bad += 1
    i = doc.find("```yaml\ngroups:\n- name: nri-qos")
    rules_text = "".join(line for line in open(argv[3]).read().splitlines(True) if not line.startswith("#"))
    if i < 0 or doc[i + 8:doc.index("```\n", i + 8)] != rules_text:
        print(f"{argv[1]}: its alert rules are not those of {argv[3]}", file=sys.stderr)
        bad += 1
    out = {"groups": [{"name": "nri-qos-dashboard", "rules": [
        {"record": f"nri_qos_dashboard:q{i}", "expr": e} for i, (_, e) in enumerate(queries)]}]}
    with open(argv[4], "w") as f:
        yaml.safe_dump(out, f)
    print(f"check_promql: {len(queries)} queries, names known")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

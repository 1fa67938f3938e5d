#!/usr/bin/env python3
"""Lint monitoring/grafana/redis-ratelimit.json the way grafana/dashboard-linter's rules do,
and check every query is valid PromQL with promtool.

The rules checked (dashboard-linter's names): template-datasource-rule (one datasource variable
named `datasource`), template-job-rule and template-instance-rule (query variables `job` and
`instance` on `$datasource`, multi-select, include All with allValue `.+`),
template-on-time-change-reload-rule (refresh 2), template-uneditable-rule (editable false),
panel-datasource-rule (every panel on `${datasource}`), panel-title-description-rule,
panel-units-rule (a unit from Grafana's list), panel-no-targets-rule, target-job-rule and
target-instance-rule (every selector matches `job=~"$job"` and `instance=~"$instance"`),
target-rate-interval-rule (every range is `$__rate_interval`), target-counter-agg-rule (a
`_total` counter only inside rate() or increase()), target-promql-rule (every query parses:
`promtool check rules` on a rule file made of them, the variables replaced).

usage: check_dashboard.py DASHBOARD PROMTOOL [--queries OUT.json]
  --queries writes each panel's query, variables replaced, for the scrape test to run.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

# Units of Grafana's value formats used here and the common ones (categories.ts).
UNITS = {
    "short", "percent", "percentunit", "none", "s", "ms", "µs", "ns", "reqps", "ops", "rps",
    "wps", "rpm", "opm", "bytes", "decbytes", "bps", "Bps", "dtdurations", "dtdurationms",
}
# What the variables stand for when a query runs outside Grafana.
SUBST = {"$__rate_interval": "1m", "$job": ".+", "$instance": ".+"}


def selectors(expr):
    """Each `metric{...}` selector of `expr`: (metric, matchers)."""
    return re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", expr)


def check(path, promtool):
    errors = []
    queries = []
    d = json.load(open(path))
    err = lambda where, msg: errors.append(f"{where}: {msg}")
    if d.get("editable") is not False:
        err("dashboard", "editable must be false (template-uneditable-rule)")
    for key in ("title", "uid", "description"):
        if not d.get(key):
            err("dashboard", f"no {key}")
    tmpl = d.get("templating", {}).get("list", [])
    ds = [t for t in tmpl if t.get("type") == "datasource"]
    if len(ds) != 1 or ds[0].get("name") != "datasource" or ds[0].get("query") != "prometheus":
        err("templating", "exactly one prometheus datasource variable named datasource")
    for name in ("job", "instance"):
        v = [t for t in tmpl if t.get("name") == name]
        if len(v) != 1:
            err("templating", f"no variable {name}")
            continue
        v = v[0]
        want = {"type": "query", "label": name, "multi": True, "includeAll": True,
                "allValue": ".+", "refresh": 2}
        for k, w in want.items():
            if v.get(k) != w:
                err(f"variable {name}", f"{k} is {v.get(k)!r}, want {w!r}")
        if v.get("datasource", {}).get("uid") != "${datasource}":
            err(f"variable {name}", "datasource must be ${datasource}")
        q = v.get("query", {}).get("query", "")
        if not q.startswith("label_values("):
            err(f"variable {name}", "a label_values() query")
    ids = set()
    for p in d.get("panels", []):
        where = f"panel {p.get('id')} {p.get('title')!r}"
        if p.get("id") in ids:
            err(where, "id twice")
        ids.add(p.get("id"))
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            err(where, "datasource must be ${datasource} (panel-datasource-rule)")
        if not p.get("title") or not p.get("description"):
            err(where, "a title and a description (panel-title-description-rule)")
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if unit not in UNITS:
            err(where, f"unit {unit!r} (panel-units-rule)")
        targets = p.get("targets") or []
        if not targets:
            err(where, "no targets (panel-no-targets-rule)")
        for t in targets:
            expr = t.get("expr", "")
            tw = f"{where} {t.get('refId')}"
            if t.get("datasource", {}).get("uid") != "${datasource}":
                err(tw, "target datasource must be ${datasource}")
            sels = selectors(expr)
            if not sels:
                err(tw, "no selector")
            for metric, matchers in sels:
                if 'job=~"$job"' not in matchers:
                    err(tw, f'{metric}: no job=~"$job" (target-job-rule)')
                if 'instance=~"$instance"' not in matchers:
                    err(tw, f'{metric}: no instance=~"$instance" (target-instance-rule)')
            for rng in re.findall(r"\}\[([^\]]*)\]", expr):
                if rng != "$__rate_interval":
                    err(tw, f"range [{rng}] (target-rate-interval-rule)")
            for m in re.finditer(r"([a-z_:]+_total)\{", expr):
                before = expr[: m.start()]
                if not re.search(r"(rate|increase)\($", before):
                    err(tw, f"{m.group(1)} outside rate()/increase() (target-counter-agg-rule)")
            q = expr
            for k, v in SUBST.items():
                q = q.replace(k, v)
            if "$" in q:
                err(tw, "an unknown variable")
            queries.append({"panel": p.get("title"), "refId": t.get("refId"), "expr": q})
    # target-promql-rule: promtool parses each query as a recording rule's expression.
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, q in enumerate(queries):
            f.write(f"      - record: dashboard:query_{i}\n        expr: {json.dumps(q['expr'])}\n")
        for t in tmpl:
            if t.get("type") == "query":
                lv = re.fullmatch(r"label_values\((.*), *[a-z_]+\)", t["query"]["query"])
                sel = lv.group(1) if lv else "bad query("
                for k, v in SUBST.items():
                    sel = sel.replace(k, v)
                f.write(f"      - record: dashboard:variable_{t['name']}\n        expr: {json.dumps(sel)}\n")
        rules = f.name
    r = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
    os.unlink(rules)
    if r.returncode != 0:
        err("promql", (r.stdout + r.stderr).strip())
    return errors, queries


def main():
    args = sys.argv[1:]
    out = None
    if "--queries" in args:
        i = args.index("--queries")
        out = args[i + 1]
        del args[i : i + 2]
    path, promtool = args
    errors, queries = check(path, promtool)
    for e in errors:
        print(f"check_dashboard: {e}")
    if errors:
        sys.exit(1)
    if out:
        json.dump(queries, open(out, "w"), indent=1)
    print(f"check_dashboard: {path}: {len(queries)} queries, every rule passes")


if __name__ == "__main__":
    main()

"""What the deploy tests read out of PromQL: the metric names an expression selects, its label
matchers and `by (...)` labels, and every expression of the Grafana dashboard and the alert
rules. A small scanner, not a parser: enough for the expressions in deploy/, whose syntax
`promtool check rules` checks separately (test_dashboard.py)."""

import json
import os
import re

import yaml

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "tollgate.json")
ALERTS = os.path.join(REPO, "deploy", "prometheus", "alerts.yaml")

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_RANGE = re.compile(r"\[[^\]]*\]")
_MATCHERS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
# An identifier not inside a number (1e-05), a duration (1d) or a variable ($instance).
_IDENT = re.compile(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
             "unless", "bool", "offset", "inf", "nan"}
_SELECTOR = re.compile(r"(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)")

# Grafana's variables, replaced by what Prometheus would receive.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h",
                     "$instance": ".*", "$category": ".*"}


def metric_names(expr):
    """The metric names `expr` selects (`up` included; functions and keywords not)."""
    m = _LABEL_VALUES.match(expr.strip())
    if m:  # a Grafana variable query: label_values(metric{...}, label)
        return {m.group(1)}
    s = _STRING.sub('""', expr)
    s = _RANGE.sub("", s)
    s = _MATCHERS.sub("{}", s)
    s = _GROUPING.sub(" ", s)
    names = set()
    for m in _IDENT.finditer(s):
        if m.group(0) in _KEYWORDS or s[m.end():].lstrip().startswith("("):
            continue
        names.add(m.group(0))
    return names


def selectors(expr):
    """(metric, [(label, op, value)]) for each `metric{...}` of `expr`."""
    return [(m.group(1), _MATCHER.findall(m.group(2))) for m in _SELECTOR.finditer(expr)]


def grouping_labels(expr):
    """The labels named in `by (...)` and `without (...)` clauses of `expr`."""
    out = set()
    for m in _GROUPING.finditer(_STRING.sub('""', expr)):
        if m.group(1) in ("by", "without"):
            out |= {l.strip() for l in m.group(2).split(",") if l.strip()}
    return out


def base_family(name, families):
    """The family a sample name belongs to: histograms' _bucket, _sum and _count are their
    family's; None when there is no such family."""
    if name in families:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return None


def substitute(expr):
    """`expr` with Grafana's variables replaced, as Prometheus would receive it."""
    for var in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(var, GRAFANA_VARIABLES[var])
    return expr


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(d):
    """Every panel of the dashboard, those inside collapsed rows included."""
    for p in d.get("panels", []):
        yield p
        yield from p.get("panels", [])


def dashboard_expressions(d=None):
    """(where, expression) for every PromQL expression of the dashboard: panel targets,
    variable queries, annotations."""
    d = d or dashboard()
    for p in all_panels(d):
        for t in p.get("targets", []):
            if t.get("expr"):
                yield f'panel "{p.get("title")}" {t.get("refId")}', t["expr"]
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if v.get("type") == "query" and q:
            yield f'variable "{v["name"]}"', q
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr"):
            yield f'annotation "{a["name"]}"', a["expr"]


def alert_rules():
    with open(ALERTS) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


def alert_expressions():
    for r in alert_rules():
        yield f'alert {r.get("alert") or r.get("record")}', r["expr"]

"""deploy/grafana/tollgate.json without Grafana: its shape (schema, the datasource variable,
the instance and category variables, panels that do not overlap), the topics it must show,
every query filtered by the variables, and every PromQL expression (panels, variables,
annotations) parsed by `promtool check rules`.

    /usr/bin/python3 tests/deploy/test_dashboard.py
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promql  # noqa: E402

# What the dashboard must show (docs/design.md §14 and issue 12): a metric each topic is read from.
REQUIRED_METRICS = {
    "requests by decision and category": "tollgate_requests_total",
    "rejections by limit and tier": "tollgate_rate_limited_total",
    "PoW challenges": "tollgate_pow_challenges_total",
    "PoW verifications": "tollgate_pow_verifications_total",
    "bans imposed": "tollgate_bans_total",
    "bans in force": "tollgate_bans_active",
    "violations": "tollgate_violations_total",
    "limiter check latency": "tollgate_limiter_check_seconds_bucket",
    "upstream latency": "tollgate_upstream_duration_seconds_bucket",
    "upstream errors": "tollgate_upstream_errors_total",
    "endpoint health": "tollgate_upstream_endpoint_up",
    "client request duration": "tollgate_request_duration_seconds_bucket",
    "responses by code class": "tollgate_responses_total",
    "bytes in": "tollgate_received_bytes_total",
    "bytes out": "tollgate_sent_bytes_total",
    "open connections": "tollgate_connections_active",
    "refused connections": "tollgate_connections_refused_total",
    "tracked keys": "tollgate_tracked_keys",
    "table entries": "tollgate_table_entries",
    "table capacity": "tollgate_table_capacity",
    "table evictions": "tollgate_table_evictions_total",
    "reloads": "tollgate_config_reloads_total",
    "last reload successful": "tollgate_config_last_reload_successful",
    "store decisions": "tollgate_store_decisions_total",
    "store errors": "tollgate_store_errors_total",
    "store latency": "tollgate_store_latency_seconds_bucket",
    "store degraded": "tollgate_store_degraded",
    "WebSocket connections": "tollgate_websocket_connections",
    "WebSocket messages": "tollgate_websocket_messages_total",
    "process memory": "process_resident_memory_bytes",
    "process CPU": "process_cpu_seconds_total",
    "process file descriptors": "process_open_fds",
    "build info": "tollgate_build_info",
}


def panel_expressions(d):
    return [(w, e) for w, e in promql.dashboard_expressions(d) if w.startswith("panel")]


class Dashboard(unittest.TestCase):
    def setUp(self):
        self.d = promql.dashboard()

    def test_schema(self):
        self.assertEqual(self.d["uid"], "tollgate")
        self.assertIn(self.d["schemaVersion"], range(36, 40))
        self.assertTrue(self.d["title"])

    def test_datasource_is_a_variable(self):
        variables = {v["name"]: v for v in self.d["templating"]["list"]}
        ds = variables.get("datasource")
        self.assertIsNotNone(ds, "no datasource variable")
        self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"))
        # Every panel and every query goes through it: no datasource uid of one Grafana.
        for p in promql.all_panels(self.d):
            if p["type"] == "row":
                continue
            self.assertEqual(p.get("datasource"), {"type": "prometheus", "uid": "${datasource}"},
                             p["title"])
            for t in p.get("targets", []):
                self.assertEqual(t.get("datasource"), {"type": "prometheus", "uid": "${datasource}"},
                                 p["title"])
        for name in ("instance", "category"):
            self.assertEqual(variables[name]["datasource"]["uid"], "${datasource}")

    def test_instance_and_category_variables(self):
        variables = {v["name"]: v for v in self.d["templating"]["list"]}
        for name in ("instance", "category"):
            v = variables.get(name)
            self.assertIsNotNone(v, f"no {name} variable")
            self.assertEqual(v["type"], "query")
            self.assertRegex(v["query"]["query"], rf"^label_values\(tollgate_\w+.*, {name}\)$")
            self.assertTrue(v["includeAll"] and v["multi"])
            self.assertEqual(v["allValue"], ".*")

    def test_every_query_filters_on_the_instance_variable(self):
        for where, expr in panel_expressions(self.d):
            for metric, matchers in promql.selectors(expr):
                self.assertIn(("instance", "=~", "$instance"), matchers, f"{where}: {metric}")
            self.assertEqual(promql.metric_names(expr) - {m for m, _ in promql.selectors(expr)},
                             set(), f"{where}: a metric without matchers in {expr}")

    def test_panels_do_not_overlap(self):
        cells = {}
        ids = set()
        for p in self.d["panels"]:
            self.assertNotIn(p["id"], ids, f"id {p['id']} twice")
            ids.add(p["id"])
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f'{p["title"]} overlaps {cells.get((x, y))}')
                    cells[(x, y)] = p["title"]

    def test_every_topic_has_a_panel(self):
        referenced = set()
        for _, expr in panel_expressions(self.d):
            referenced |= promql.metric_names(expr)
        missing = {t: m for t, m in REQUIRED_METRICS.items() if m not in referenced}
        self.assertEqual(missing, {})

    def test_enforced_and_shadow_rejections_apart(self):
        modes = set()
        for _, expr in panel_expressions(self.d):
            for metric, matchers in promql.selectors(expr):
                if metric == "tollgate_rate_limited_total":
                    modes |= {v for l, op, v in matchers if l == "mode" and op == "="}
                    self.assertIn("level", promql.grouping_labels(expr))
                    self.assertIn("tier", promql.grouping_labels(expr))
        self.assertEqual(modes, {"enforce", "shadow"})

    def test_latencies_as_p50_and_p99(self):
        for histogram in ("tollgate_limiter_check_seconds", "tollgate_upstream_duration_seconds",
                          "tollgate_request_duration_seconds", "tollgate_store_latency_seconds"):
            quantiles = set()
            for _, expr in panel_expressions(self.d):
                if histogram + "_bucket" in promql.metric_names(expr):
                    self.assertIn("le", promql.grouping_labels(expr), expr)
                    quantiles |= set(re.findall(r"histogram_quantile\((0\.\d+)", expr))
            self.assertEqual(quantiles, {"0.5", "0.99"}, histogram)

    def test_promql_parses(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool not found: apt-get install prometheus")
        rules = []
        for i, (where, expr) in enumerate(promql.dashboard_expressions(self.d)):
            if expr.startswith("label_values("):
                # A Grafana function: its selector is what Prometheus receives.
                expr = expr[len("label_values("):].rsplit(",", 1)[0]
            rules.append({"record": f"dashboard:expression_{i}", "expr": promql.substitute(expr)})
        self.assertGreater(len(rules), 40)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "dashboard_rules.yaml")
            with open(path, "w") as f:
                yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
            r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True,
                               timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class Scanner(unittest.TestCase):
    """The scanner the deploy tests rely on, on expressions of the shapes deploy/ uses."""

    def test_names(self):
        self.assertEqual(promql.metric_names(
            'histogram_quantile(0.99, sum by (le, upstream) (rate(a_bucket{instance=~"$instance"}[$__rate_interval])))'),
            {"a_bucket"})
        self.assertEqual(promql.metric_names(
            'sum by (job) (increase(b_total{job="x"}[10m])) > 10 and sum(rate(b_total[1d] offset 1d)) > 5 * c'),
            {"b_total", "c"})
        self.assertEqual(promql.metric_names("up == 0 or absent(up{job=\"t\"})"), {"up"})
        self.assertEqual(promql.metric_names("x > 1e-05"), {"x"})
        self.assertEqual(promql.metric_names('label_values(m{instance=~"$instance"}, category)'), {"m"})
        self.assertEqual(promql.metric_names("time() - max by (instance) (ts{a=\"b\"})"), {"ts"})

    def test_selectors_and_grouping(self):
        expr = 'sum by (category, level) (rate(r_total{instance=~"$i", mode="enforce"}[1m])) / on(job) s'
        self.assertEqual(promql.selectors(expr),
                         [("r_total", [("instance", "=~", "$i"), ("mode", "=", "enforce")])])
        self.assertEqual(promql.grouping_labels(expr), {"category", "level"})


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""deploy/kubernetes/*.yaml and deploy/compose.yaml parsed and checked against what docs/design.md §14
and issue 12 ask, and against each other (ports, paths, names, secrets, the shutdown timing);
then the gateway files they carry checked by the gateway itself (`tollgate --check-config`).

    /usr/bin/python3 tests/deploy/test_manifests.py BUILD_DIR [Kubernetes Compose CheckConfig]
"""

import glob
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEPLOY = os.path.join(REPO, "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
BUILD_DIR = os.path.join(REPO, "build")

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def seconds(text):
    """'5s', '250ms', '1m30s' (compose) -> seconds."""
    total, rest = 0.0, str(text)
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", rest):
        total += float(number) * UNITS[unit]
    return total


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def shutdown_seconds(gateway):
    """shutdown.delay + shutdown.drain_timeout of a gateway file."""
    s = gateway["shutdown"]
    return seconds(s["delay"]) + seconds(s["drain_timeout"])


def cpu(quantity):
    q = str(quantity)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


class Kubernetes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objects = {}
        cls.files = {}
        for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            cls.files[os.path.basename(path)] = docs
            for d in docs:
                if "kind" in d and "metadata" in d:
                    cls.objects[(d["kind"], d["metadata"]["name"])] = d
        cls.deployment = cls.objects[("Deployment", "tollgate")]
        cls.pod = cls.deployment["spec"]["template"]["spec"]
        cls.containers = {c["name"]: c for c in cls.pod["containers"]}
        cls.gateway = cls.containers["tollgate"]
        configmap = cls.objects[("ConfigMap", "tollgate-config")]
        cls.config_data = configmap["data"]
        cls.config = yaml.safe_load(configmap["data"]["gateway.yaml"])

    def test_kustomization_lists_every_manifest(self):
        k = self.files["kustomization.yaml"][0]
        manifests = set(self.files) - {"kustomization.yaml", "secret.example.yaml"}
        self.assertEqual(set(k["resources"]), manifests)
        # Placeholder secrets must never be applied from git.
        self.assertNotIn("secret.example.yaml", k["resources"])
        # The manifests carry the part-of label themselves (kustomize v2 has no `labels:`).
        for name, docs in self.files.items():
            for d in docs:
                if d and name != "kustomization.yaml":
                    self.assertEqual(d["metadata"]["labels"].get("app.kubernetes.io/part-of"),
                                     "tollgate", f"{name}: {d['metadata']['name']}")

    def test_kustomize_builds(self):
        # Debian 12's kubernetes-client is kubectl 1.20 (kustomize v2): the manifests keep to
        # what it reads. scripts/deps.sh installs it when no kubectl is on PATH.
        kubectl = shutil.which("kubectl")
        self.assertIsNotNone(kubectl, "kubectl not found: apt-get install kubernetes-client")
        r = subprocess.run([kubectl, "kustomize", K8S], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        kinds = sorted(d["kind"] for d in yaml.safe_load_all(r.stdout) if d)
        self.assertEqual(kinds, ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service",
                                 "Service", "ServiceMonitor"])

    def test_ports_agree_with_the_gateway_file(self):
        ports = {p["name"]: p["containerPort"] for p in self.gateway["ports"]}
        public = [l for l in self.config["listeners"] if l["name"] == "public"][0]
        self.assertEqual(ports["http"], public["port"])
        self.assertEqual(ports["admin"], self.config["admin"]["port"])
        # Probes and Prometheus come from outside the pod.
        self.assertEqual(self.config["admin"]["address"], "0.0.0.0")
        self.assertEqual(public["address"], "0.0.0.0")

    def test_probes(self):
        live = self.gateway["livenessProbe"]["httpGet"]
        ready = self.gateway["readinessProbe"]["httpGet"]
        self.assertEqual((live["path"], live["port"]), ("/healthz", "admin"))
        self.assertEqual((ready["path"], ready["port"]), ("/readyz", "admin"))

    def test_every_container_has_requests_and_limits(self):
        for name, c in self.containers.items():
            for kind in ("requests", "limits"):
                self.assertEqual(set(c["resources"][kind]), {"cpu", "memory"}, f"{name} {kind}")

    def test_workers_match_the_cpu_limit(self):
        # workers: auto would count all of the node's CPUs on a cgroup v1 node.
        self.assertIsInstance(self.config["workers"], int)
        self.assertEqual(self.config["workers"], cpu(self.gateway["resources"]["limits"]["cpu"]))

    def test_non_root_read_only(self):
        pod = self.pod["securityContext"]
        self.assertIs(pod["runAsNonRoot"], True)
        self.assertEqual(pod["runAsUser"], 10001)
        for name, c in self.containers.items():
            sc = c["securityContext"]
            self.assertIs(sc["readOnlyRootFilesystem"], True, name)
            self.assertIs(sc["allowPrivilegeEscalation"], False, name)
            self.assertIs(sc["runAsNonRoot"], True, name)
            self.assertEqual(sc.get("runAsUser", 10001), 10001, name)
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], name)
            self.assertNotIn("add", sc["capabilities"], name)

    def test_secrets_come_from_the_secret(self):
        env = {e["name"]: e for e in self.gateway["env"]}
        secret = self.objects[("Secret", "tollgate-secrets")]
        self.assertNotIn("Secret", {k for k, _ in self.objects if k != "Secret"})
        for name in (self.config["pow"]["secret_env"], "TOLLGATE_ADMIN_TOKEN"):
            ref = env[name]["valueFrom"]["secretKeyRef"]
            self.assertEqual(ref["name"], "tollgate-secrets")
            self.assertIn(ref["key"], secret["stringData"])
            self.assertNotIn("value", env[name])
        self.assertIs(env["TOLLGATE_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["optional"], True)

    def test_config_from_the_configmap(self):
        self.assertEqual(self.gateway["args"], ["--config", "/etc/tollgate/gateway.yaml"])
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        mounts = {m["mountPath"]: m for m in self.gateway["volumeMounts"]}
        mount = mounts["/etc/tollgate"]
        self.assertNotIn("subPath", mount)   # a subPath mount is never updated
        cm = volumes[mount["name"]]["configMap"]
        self.assertEqual(cm["name"], "tollgate-config")
        paths = {i["key"]: i["path"] for i in cm["items"]}
        self.assertEqual(set(paths), set(self.config_data))
        self.assertEqual(paths["gateway.yaml"], "gateway.yaml")
        # The policy lands where gateway.yaml looks for it (relative to itself).
        self.assertEqual([posixpath.normpath(p) for p in self.config["policies"]],
                         [paths["default.yaml"]])

    def test_configmap_policy_is_the_default_policy(self):
        self.assertEqual(yaml.safe_load(self.config_data["default.yaml"]),
                         load(os.path.join(REPO, "policies", "default.yaml")))

    def test_grace_period_covers_delay_and_drain(self):
        self.assertGreater(self.pod["terminationGracePeriodSeconds"], shutdown_seconds(self.config))

    def test_reloader_sidecar(self):
        self.assertIs(self.pod["shareProcessNamespace"], True)
        reloader = self.containers["config-reloader"]
        env = {e["name"]: e["value"] for e in reloader["env"]}
        self.assertEqual(env["PROCESS_NAME"], "tollgate")   # the gateway's /proc/PID/comm
        mounts = {m["mountPath"]: m["name"] for m in reloader["volumeMounts"]}
        gateway_mounts = {m["mountPath"]: m["name"] for m in self.gateway["volumeMounts"]}
        self.assertEqual(mounts[env["CONFIG_DIR"]], gateway_mounts["/etc/tollgate"])
        # Same user as the gateway: allowed to signal it without a capability.
        self.assertEqual(reloader["securityContext"]["runAsUser"], self.pod["securityContext"]["runAsUser"])

    def test_pod_disruption_budget(self):
        pdb = self.objects[("PodDisruptionBudget", "tollgate")]
        labels = self.deployment["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(pdb["spec"]["selector"]["matchLabels"].items(), labels.items())
        self.assertGreaterEqual(self.deployment["spec"]["replicas"], 2)
        self.assertLess(pdb["spec"]["maxUnavailable"], self.deployment["spec"]["replicas"])
        self.assertEqual(self.deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0)

    def test_services(self):
        labels = self.deployment["spec"]["template"]["metadata"]["labels"]
        public = self.objects[("Service", "tollgate")]["spec"]
        admin = self.objects[("Service", "tollgate-admin")]["spec"]
        for spec in (public, admin):
            self.assertLessEqual(spec["selector"].items(), labels.items())
        self.assertEqual([p["targetPort"] for p in public["ports"]], ["http"])   # admin not public
        self.assertEqual([p["targetPort"] for p in admin["ports"]], ["admin"])

    def test_service_monitor(self):
        sm = self.objects[("ServiceMonitor", "tollgate")]
        self.assertEqual(sm["apiVersion"], "monitoring.coreos.com/v1")
        admin = self.objects[("Service", "tollgate-admin")]
        self.assertLessEqual(sm["spec"]["selector"]["matchLabels"].items(),
                             admin["metadata"]["labels"].items())
        self.assertNotIn(sm["spec"]["selector"]["matchLabels"].items(),
                         [self.objects[("Service", "tollgate")]["metadata"]["labels"].items()])
        (endpoint,) = sm["spec"]["endpoints"]
        self.assertEqual(endpoint["port"], admin["spec"]["ports"][0]["name"])
        self.assertEqual(endpoint["path"], "/metrics")
        # The job label the alert rules select.
        self.assertEqual(admin["metadata"]["labels"][sm["spec"]["jobLabel"]], "tollgate")
        with open(os.path.join(DEPLOY, "prometheus", "alerts.yaml")) as f:
            self.assertIn('job="tollgate"', f.read())


class Compose(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compose = load(os.path.join(DEPLOY, "compose.yaml"))
        cls.services = cls.compose["services"]
        cls.gateway_file = os.path.join(DEPLOY, "compose", "gateway.yaml")
        cls.config = load(cls.gateway_file)

    def mounts(self, service):
        """{container path: host path (absolute)} of a service's bind mounts."""
        out = {}
        for v in self.services[service].get("volumes", []):
            source, target = v.split(":")[:2]
            if source.startswith("."):
                out[target] = os.path.normpath(os.path.join(DEPLOY, source))
        return out

    def test_five_services(self):
        self.assertEqual(set(self.services), {"tollgate", "upstream", "redis", "prometheus", "grafana"})

    def test_every_mounted_file_exists(self):
        for name in self.services:
            for target, source in self.mounts(name).items():
                self.assertTrue(os.path.exists(source), f"{name}: {source} for {target}")

    def test_tollgate_service(self):
        t = self.services["tollgate"]
        self.assertEqual(t["image"], "tollgate:latest")
        self.assertEqual(os.path.normpath(os.path.join(DEPLOY, t["build"]["context"])), REPO)
        self.assertEqual(t["build"]["dockerfile"], "Dockerfile")
        mounts = self.mounts("tollgate")
        self.assertEqual(mounts["/etc/tollgate/gateway.yaml"], self.gateway_file)
        for policy in self.config["policies"]:
            target = posixpath.normpath(posixpath.join("/etc/tollgate", policy))
            self.assertEqual(mounts[target], os.path.join(REPO, "policies", "default.yaml"))
        self.assertIn(self.config["pow"]["secret_env"], t["environment"])
        self.assertIn("TOLLGATE_ADMIN_TOKEN", t["environment"])
        self.assertGreater(seconds(t["stop_grace_period"]), shutdown_seconds(self.config))
        public = [l for l in self.config["listeners"] if l["name"] == "public"][0]
        self.assertIn(f"{public['port']}:{public['port']}", t["ports"])
        admin = self.config["admin"]["port"]
        self.assertIn(f"127.0.0.1:{admin}:{admin}", t["ports"])   # admin on the host's loopback only
        self.assertEqual(self.config["admin"]["address"], "0.0.0.0")   # Prometheus's container

    def test_upstream_is_where_the_gateway_sends(self):
        (endpoint,) = self.config["upstreams"]["app"]["endpoints"]
        host, port = endpoint.rsplit(":", 1)
        self.assertEqual(host, "upstream")
        u = self.services["upstream"]
        self.assertEqual(u["image"], "tollgate:latest")
        self.assertEqual(u["entrypoint"], ["/usr/local/bin/tollgate-echo"])
        cmd = u["command"]
        self.assertEqual(cmd[cmd.index("--port") + 1], port)
        self.assertEqual(cmd[cmd.index("--address") + 1], "0.0.0.0")

    def test_store_is_the_redis_service(self):
        store = self.config["store"]
        self.assertEqual(store["type"], "redis")
        self.assertEqual(store["address"], "redis:6379")
        self.assertRegex(self.services["redis"]["image"], r"(^|/)redis:7")

    def test_prometheus_scrapes_tollgate_with_the_rules(self):
        mounts = self.mounts("prometheus")
        config_path = [c for c in self.services["prometheus"]["command"] if c.startswith("--config.file=")]
        target = config_path[0].split("=", 1)[1]
        self.assertEqual(mounts[target], os.path.join(DEPLOY, "prometheus", "prometheus.yml"))
        prom = load(mounts[target])
        for rule_file in prom["rule_files"]:
            in_container = posixpath.join(posixpath.dirname(target), rule_file)
            self.assertEqual(mounts[in_container], os.path.join(DEPLOY, "prometheus", "alerts.yaml"))
        jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
        targets = [t for sc in jobs["tollgate"]["static_configs"] for t in sc["targets"]]
        self.assertEqual(targets, [f"tollgate:{self.config['admin']['port']}"])

    def test_grafana_provisioning(self):
        mounts = self.mounts("grafana")
        provisioning = mounts["/etc/grafana/provisioning"]
        self.assertEqual(provisioning, os.path.join(DEPLOY, "grafana", "provisioning"))
        (ds,) = load(os.path.join(provisioning, "datasources", "prometheus.yaml"))["datasources"]
        self.assertEqual(ds["type"], "prometheus")
        self.assertEqual(ds["url"], "http://prometheus:9090")
        (provider,) = load(os.path.join(provisioning, "dashboards", "tollgate.yaml"))["providers"]
        dashboards = [t for t, s in mounts.items() if s == os.path.join(DEPLOY, "grafana", "tollgate.json")]
        self.assertEqual([posixpath.dirname(d) for d in dashboards], [provider["options"]["path"]])

    def test_published_ports_do_not_clash(self):
        host_ports = []
        for s in self.services.values():
            for p in s.get("ports", []):
                host_ports.append(p.rsplit(":", 1)[0].split(":")[-1])
        self.assertEqual(len(host_ports), len(set(host_ports)), host_ports)


class CheckConfig(unittest.TestCase):
    """The gateway files of deploy/ as the gateway reads them, each with the default policy
    where it expects it. Needs the logging.format, access and shutdown keys."""

    def check(self, gateway_text, policy_paths):
        tollgate = os.path.join(BUILD_DIR, "tollgate")
        self.assertTrue(os.access(tollgate, os.X_OK), f"{tollgate} is not built")
        with tempfile.TemporaryDirectory(prefix="tollgate-deploy-") as tmp:
            path = os.path.join(tmp, "gateway.yaml")
            with open(path, "w") as f:
                f.write(gateway_text)
            for p in policy_paths:
                target = os.path.join(tmp, p)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy(os.path.join(REPO, "policies", "default.yaml"), target)
            env = {k: v for k, v in os.environ.items() if not k.startswith("TOLLGATE_")}
            r = subprocess.run([tollgate, "--check-config", path], capture_output=True, text=True,
                               timeout=30, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok", r.stdout)

    def test_kubernetes_configmap(self):
        data = load(os.path.join(K8S, "configmap.yaml"))["data"]
        self.check(data["gateway.yaml"], yaml.safe_load(data["gateway.yaml"])["policies"])

    def test_compose_gateway(self):
        with open(os.path.join(DEPLOY, "compose", "gateway.yaml")) as f:
            text = f.read()
        self.check(text, yaml.safe_load(text)["policies"])


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and os.path.isdir(args[0]):
        BUILD_DIR = args.pop(0)
    BUILD_DIR = os.environ.get("TOLLGATE_BUILD_DIR", BUILD_DIR)
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)

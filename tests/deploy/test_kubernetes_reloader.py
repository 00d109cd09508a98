"""The config-reloader sidecar of deploy/kubernetes/deployment.yaml, its script run as written
there, against a real gateway (build/tollgate) reading a directory laid out as the kubelet
lays out a ConfigMap volume: the files are symlinks through `..data` to a timestamped
directory, and an update repoints `..data` at a new one in a single rename.

A changed ConfigMap must reach the gateway as one SIGHUP (the new policy in force, the process
the same), an invalid one must be refused by the gateway while the old one serves, and nothing
must be signalled while nothing changes.

    /usr/bin/python3 tests/deploy/test_kubernetes_reloader.py BUILD_DIR
"""

import os
import shutil
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "websocket"))
import harness as h  # noqa: E402  (tests/websocket: processes, HTTP, metrics parsing)

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DEPLOYMENT = os.path.join(REPO, "deploy", "kubernetes", "deployment.yaml")

GATEWAY = """
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
trusted_proxies: [127.0.0.1/32]
upstreams: { app: { endpoints: ["127.0.0.1:ECHO"] } }
default_route: { category: general, upstream: app }
policies: [policies/default.yaml]
"""

POLICY = "categories:\n  general:\n    limits:\n      ipv4_individual: {{ short: {{ rate: 1/h, burst: {burst} }} }}\n"


def reloader():
    """The config-reloader container of the Deployment: (script, env)."""
    with open(DEPLOYMENT) as f:
        d = yaml.safe_load(f)
    (c,) = [c for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "config-reloader"]
    assert c["command"] == ["/bin/sh", "-c"], c["command"]
    return c["args"][0], {e["name"]: e["value"] for e in c["env"]}


class ConfigMapVolume:
    """A directory as the kubelet keeps a ConfigMap volume with items gateway.yaml and
    policies/default.yaml."""

    def __init__(self, root):
        self.root = root
        self.version = 0
        os.makedirs(root)
        for name in ("gateway.yaml", "policies"):
            os.symlink(os.path.join("..data", name), os.path.join(root, name))

    def publish(self, gateway_yaml, policy_yaml):
        """Writes a new timestamped directory and repoints ..data at it in one rename."""
        self.version += 1
        version_dir = f"..2024_01_01_00_00_{self.version:02d}.{os.getpid()}"
        os.makedirs(os.path.join(self.root, version_dir, "policies"))
        with open(os.path.join(self.root, version_dir, "gateway.yaml"), "w") as f:
            f.write(gateway_yaml)
        with open(os.path.join(self.root, version_dir, "policies", "default.yaml"), "w") as f:
            f.write(policy_yaml)
        tmp_link = os.path.join(self.root, "..data_tmp")
        os.symlink(version_dir, tmp_link)
        os.replace(tmp_link, os.path.join(self.root, "..data"))


class Reloader(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-reloader-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.echo = h.Echo()
        self.addCleanup(self.echo.stop)
        self.gateway_yaml = GATEWAY.replace("ECHO", str(self.echo.port))
        self.volume = ConfigMapVolume(os.path.join(self.dir, "etc-tollgate"))
        self.volume.publish(self.gateway_yaml, POLICY.format(burst=100))
        # The script finds the gateway by /proc/PID/comm: a name of this test's own (at most
        # 15 characters), so that no other gateway on the machine is signalled.
        self.name = f"tgreload{os.getpid() % 10000000}"
        binary = os.path.join(self.dir, self.name)
        os.symlink(os.path.abspath(h.binary("tollgate")), binary)
        self.gw = h.Process([binary, "--config", os.path.join(self.volume.root, "gateway.yaml")])
        self.addCleanup(self.gw.stop)
        self.port = h._port_after(self.gw.wait_for_line("listening on public"))
        self.admin = h._port_after(self.gw.wait_for_line("admin listening on"))
        script, env = reloader()
        self.assertEqual(env["PROCESS_NAME"], "tollgate")
        self.sidecar = h.Process(["env", f"CONFIG_DIR={self.volume.root}", f"PROCESS_NAME={self.name}",
                                  "INTERVAL=0.2", "/bin/sh", "-c", script])
        self.addCleanup(self.sidecar.stop)
        self.sidecar.wait_for_line("config-reloader: watching")

    def metrics(self):
        status, _, body = h.http_request(self.admin, "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        self.assertEqual(status, 200)
        return h.Metrics(body)

    def reloads(self, result):
        return self.metrics().value("tollgate_config_reloads_total", result=result)

    def statuses(self, client, n):
        return [h.http_request(self.port, f"GET /x HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: {client}\r\n"
                                          "Connection: close\r\n\r\n")[0] for _ in range(n)]

    def test_a_changed_configmap_is_reloaded_once(self):
        self.assertEqual(self.statuses("10.7.0.1", 3), [200, 200, 200])
        self.volume.publish(self.gateway_yaml, POLICY.format(burst=1))
        self.assertTrue(h.eventually(lambda: self.reloads("success") == 1, 15), self.gw.output())
        self.sidecar.wait_for_line("SIGHUP to")
        self.assertIsNone(self.gw.p.poll(), "the gateway ended instead of reloading")
        # The new policy (burst 1) is in force for a client it has not seen.
        self.assertEqual(self.statuses("10.7.0.2", 2), [200, 429])

        # An invalid file: the gateway refuses it and goes on with the last good one.
        self.volume.publish("listeners: [\n", POLICY.format(burst=100))
        self.assertTrue(h.eventually(lambda: self.reloads("failure") == 1, 15), self.gw.output())
        self.assertEqual(self.statuses("10.7.0.3", 2), [200, 429])
        # One signal per change, none while nothing changed (many intervals have passed).
        self.assertEqual((self.reloads("success"), self.reloads("failure")), (1, 1))
        self.assertIsNone(self.gw.p.poll())

    def test_no_gateway_running_is_said(self):
        self.gw.stop()
        self.volume.publish(self.gateway_yaml, POLICY.format(burst=1))
        self.sidecar.wait_for_line(f"but no {self.name} process is running")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and os.path.isdir(args[0]):
        h.BUILD_DIR = args.pop(0)
    h.BUILD_DIR = os.environ.get("TOLLGATE_BUILD_DIR", h.BUILD_DIR)
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)

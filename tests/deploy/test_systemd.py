"""deploy/systemd/tollgate.service: the directives issue 12 asks for, sized against the
gateway files of the repository (LimitNOFILE for max_connections, TimeoutStopSec for the
shutdown delay and drain), then `systemd-analyze verify` and `systemd-analyze security` on a
copy whose ExecStart is the built binary (verify wants an executable there).

    /usr/bin/python3 tests/deploy/test_systemd.py BUILD_DIR          # the directives
    /usr/bin/python3 tests/deploy/test_systemd.py BUILD_DIR verify   # systemd-analyze (package systemd)
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
UNIT = os.path.join(REPO, "deploy", "systemd", "tollgate.service")
SERVICE_GATEWAY = os.path.join(REPO, "deploy", "systemd", "gateway.yaml")
BUILD_DIR = os.path.join(REPO, "build")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
# systemd-analyze security's exposure, in tenths (0 best, 100 worst): the unit scores 1.7.
MAX_EXPOSURE = 20


def unit():
    """{(section, key): [values]} of the unit (a key may repeat)."""
    out, section = {}, None
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            out.setdefault((section, key.strip()), []).append(value.strip())
    return out


def seconds(text):
    units = {"ms": 0.001, "s": 1, "min": 60, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h)", text))


def gateway_files():
    """The repository's gateway files: the default, the service's, compose's and the Kubernetes
    ConfigMap's."""
    with open(os.path.join(REPO, "config", "gateway.yaml")) as f:
        yield yaml.safe_load(f)
    with open(SERVICE_GATEWAY) as f:
        yield yaml.safe_load(f)
    with open(os.path.join(REPO, "deploy", "compose", "gateway.yaml")) as f:
        yield yaml.safe_load(f)
    with open(os.path.join(REPO, "deploy", "kubernetes", "configmap.yaml")) as f:
        yield yaml.safe_load(yaml.safe_load(f)["data"]["gateway.yaml"])


class Directives(unittest.TestCase):
    def setUp(self):
        self.u = unit()

    def one(self, key, section="Service"):
        values = self.u.get((section, key))
        self.assertIsNotNone(values, f"no {key}= in [{section}]")
        self.assertEqual(len(values), 1, key)
        return values[0]

    def test_start_and_reload(self):
        self.assertRegex(self.one("ExecStart"), r"^/usr/local/bin/tollgate --config /etc/tollgate/gateway.yaml$")
        self.assertEqual(self.one("ExecReload"), "/bin/kill -HUP $MAINPID")
        self.assertEqual(self.one("Restart"), "on-failure")
        # The gateway speaks sd_notify (READY=1 once serving; tests/ops checks the datagrams).
        self.assertEqual(self.one("Type"), "notify")
        self.assertEqual(self.one("NotifyAccess"), "main")
        self.assertEqual(self.one("KillSignal"), "SIGTERM")
        self.assertEqual(self.one("EnvironmentFile").lstrip("-"), "/etc/tollgate/tollgate.env")
        self.assertEqual(self.one("WantedBy", "Install"), "multi-user.target")

    def test_sandbox(self):
        expected = {"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                    "PrivateTmp": "yes", "NoNewPrivileges": "yes",
                    "CapabilityBoundingSet": "CAP_NET_BIND_SERVICE",
                    "AmbientCapabilities": "CAP_NET_BIND_SERVICE"}
        self.assertEqual({k: self.one(k) for k in expected}, expected)

    def test_file_limit_covers_client_and_upstream_connections(self):
        need = max(2 * g["limits"]["max_connections"] for g in gateway_files())
        self.assertGreaterEqual(int(self.one("LimitNOFILE")), need + 100)

    def test_stop_timeout_covers_delay_and_drain(self):
        longest = 0
        for g in gateway_files():
            s = g.get("shutdown")
            if s:
                longest = max(longest, seconds(s["delay"]) + seconds(s["drain_timeout"]))
        self.assertGreater(longest, 0, "no gateway file says shutdown: delay and drain_timeout")
        self.assertGreater(seconds(self.one("TimeoutStopSec")), longest)

    def test_the_log_directory_is_the_writable_place(self):
        # ProtectSystem=strict: a file access log can only go to LogsDirectory.
        self.assertEqual(self.one("LogsDirectory"), "tollgate")


def recipe():
    """The install commands of the unit's opening comment ("#   install ..." lines), in order,
    as argument lists."""
    with open(UNIT) as f:
        return [line[1:].split("#")[0].split() for line in f if line.startswith("#   install ")]


class Recipe(unittest.TestCase):
    """The unit's install lines, run as written from the repository but under a scratch root
    instead of /: what they install is what the unit reads, and the configuration loads."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="tollgate-recipe-")
        # Directories a system has already.
        for d in ("usr/local/bin", "etc/systemd/system"):
            os.makedirs(os.path.join(cls.root, d))
        tollgate = os.path.abspath(os.path.join(BUILD_DIR, "tollgate"))
        for words in recipe():
            # build/tollgate is the built binary (the build directory may be elsewhere).
            words = [tollgate if w == "build/tollgate" else cls.root + w if w.startswith("/")
                     else w for w in words]
            r = subprocess.run(words, cwd=REPO, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, f"{' '.join(words)}: {r.stderr}"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def under_root(self, path):
        return self.root + path

    def test_the_unit_reads_what_was_installed(self):
        u = unit()
        words = u[("Service", "ExecStart")][0].split()
        self.assertTrue(os.access(self.under_root(words[0]), os.X_OK), words[0])
        self.assertEqual(words[1], "--config")
        self.assertTrue(os.path.isfile(self.under_root(words[2])), words[2])
        env = u[("Service", "EnvironmentFile")][0].lstrip("-")
        self.assertTrue(os.path.isfile(self.under_root(env)), env)
        self.assertTrue(os.path.isfile(self.under_root("/etc/systemd/system/tollgate.service")))

    def test_the_installed_configuration_loads(self):
        config = self.under_root(unit()[("Service", "ExecStart")][0].split()[2])
        r = subprocess.run([os.path.join(BUILD_DIR, "tollgate"), "--check-config", config],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_the_access_log_is_in_the_logs_directory(self):
        # ProtectSystem=strict: /var/log/<LogsDirectory> is the only place the service writes.
        with open(self.under_root(unit()[("Service", "ExecStart")][0].split()[2])) as f:
            log = yaml.safe_load(f)["logging"]["access_log"]
        directory = unit()[("Service", "LogsDirectory")][0]
        self.assertEqual(os.path.dirname(log), "/var/log/" + directory)

    def test_the_service_file_is_the_default_with_a_services_paths(self):
        with open(os.path.join(REPO, "config", "gateway.yaml")) as f:
            default = yaml.safe_load(f)
        with open(SERVICE_GATEWAY) as f:
            service = yaml.safe_load(f)
        for g in (default, service):
            del g["policies"], g["logging"]["access_log"]
        self.assertEqual(service, default)


class Analyze(unittest.TestCase):
    """systemd-analyze on a copy of the unit whose binary is the built one."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tollgate-systemd-")
        tollgate = os.path.join(BUILD_DIR, "tollgate")
        assert os.access(tollgate, os.X_OK), f"{tollgate} is not built"
        with open(UNIT) as f:
            text = f.read().replace("/usr/local/bin/tollgate", os.path.abspath(tollgate))
        cls.path = os.path.join(cls.tmp, "tollgate.service")
        with open(cls.path, "w") as f:
            f.write(text)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def analyze(self, *args):
        return subprocess.run([SYSTEMD_ANALYZE, *args], capture_output=True, text=True, timeout=60,
                              cwd=self.tmp)

    def test_verify(self):
        r = self.analyze("verify", self.path)
        # verify exits 0 on an unknown key or a value it cannot parse, but says so: any word
        # from it is a finding.
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_security_exposure(self):
        r = self.analyze("security", "--offline=yes", f"--threshold={MAX_EXPOSURE}", self.path)
        self.assertEqual(r.returncode, 0, r.stdout[-600:] + r.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and os.path.isdir(args[0]):
        BUILD_DIR = args.pop(0)
    BUILD_DIR = os.environ.get("TOLLGATE_BUILD_DIR", BUILD_DIR)
    if args == ["verify"]:
        if not SYSTEMD_ANALYZE:
            # Debian's systemd package installs in a container as well (it is not PID 1 there;
            # verify and security --offline need no running manager).
            print("systemd-analyze not found: apt-get install systemd")
            sys.exit(1)
        args = ["Analyze"]
    else:
        args = args or ["Directives", "Recipe"]
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)

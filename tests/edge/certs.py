"""Certificates made at test time with the `openssl` command: certificate authorities, server
and client certificates signed by them, and their SHA-256 fingerprints. Used by the tests of
tests/edge/.
"""

import os
import subprocess


def _run(args):
    subprocess.run(args, check=True, capture_output=True, timeout=30)


def _key_args(key):
    return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key]


class Authority:
    """A self-signed CA `name`.pem / `name`.key in `directory`, which signs certificates."""

    def __init__(self, directory, name, cn=None):
        self.directory = directory
        self.cert = os.path.join(directory, f"{name}.pem")
        self.key = os.path.join(directory, f"{name}.key")
        _run(["openssl", "req", "-x509", *_key_args(self.key), "-days", "1",
              "-subj", f"/CN={cn or name}", "-out", self.cert])

    def issue(self, name, subject, sans=None, usage="clientAuth"):
        """A certificate `name`.pem / `name`.key for `subject` ("/CN=alice/O=Example"), with the
        subjectAltName `sans` ("DNS:a.test,email:a@test") and extended key usage `usage`
        (clientAuth or serverAuth); returns (certificate path, key path)."""
        cert = os.path.join(self.directory, f"{name}.pem")
        key = os.path.join(self.directory, f"{name}.key")
        csr = os.path.join(self.directory, f"{name}.csr")
        ext = os.path.join(self.directory, f"{name}.ext")
        with open(ext, "w") as f:
            f.write(f"extendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n")
            if sans:
                f.write(f"subjectAltName={sans}\n")
        _run(["openssl", "req", "-new", *_key_args(key), "-subj", subject, "-out", csr])
        _run(["openssl", "x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key,
              "-CAcreateserial", "-days", "1", "-extfile", ext, "-out", cert])
        return cert, key


def fingerprint(cert):
    """Lower-case hex SHA-256 of the certificate's DER bytes, without colons."""
    out = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", cert],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return out.strip().split("=", 1)[1].replace(":", "").lower()


def read(path):
    with open(path) as f:
        return f.read()

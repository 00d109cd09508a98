"""Writes tests/unit/golden/jwt_vectors.json: a JWK Set and tokens made by a library that is not
ours (Debian's python3-jwt over python3-cryptography), each with the verdict Tollgate must give
at a fixed instant. tests/unit/test_jwt.cpp reads it. Run again only to change the cases:
`python3 tests/identity/make_vectors.py` (keys are new each time; the verdicts stay).
"""

import base64
import json
import os

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

NOW = 1_900_000_000  # the instant of every verdict (2030-03-17)
OUT = os.path.join(os.path.dirname(__file__), "..", "unit", "golden", "jwt_vectors.json")


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_jwk(key, kid, alg=None):
    j = json.loads(jwt.algorithms.get_default_algorithms()[
        "RS256" if isinstance(key, rsa.RSAPrivateKey) else
        "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "EdDSA"].to_jwk(key.public_key()))
    j["kid"] = kid
    j["use"] = "sig"
    if alg:
        j["alg"] = alg
    return j


rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rsa_other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
p256 = ec.generate_private_key(ec.SECP256R1())
p384 = ec.generate_private_key(ec.SECP384R1())
p521 = ec.generate_private_key(ec.SECP521R1())
edkey = ed25519.Ed25519PrivateKey.generate()
small_rsa = rsa.generate_private_key(public_exponent=65537, key_size=1024)

keys = [public_jwk(rsa_key, "rsa"), public_jwk(p256, "p256"), public_jwk(p384, "p384"),
        public_jwk(p521, "p521"), public_jwk(edkey, "ed"),
        public_jwk(rsa_other, "rsa-ps", "PS256"), public_jwk(small_rsa, "small")]
# An HMAC key in a JWK Set is never used (HS* only with secret_env).
keys.append({"kty": "oct", "kid": "oct", "k": b64(b"not-a-secret")})
jwks = {"keys": keys}

SECRET = "a-shared-secret-of-32-bytes-long!"
ISS, AUD = "https://id.example.test/", "api"
base = {"sub": "user-1", "iss": ISS, "aud": AUD, "iat": NOW - 60, "exp": NOW + 3600,
        "org": {"plan": "premium", "seats": 12}}

cases = []


def case(name, token, expect, claims=None):
    cases.append({"name": name, "token": token, "expect": expect, "claims": claims or {}})


def sign(key, alg, kid, payload=None, headers=None):
    h = {"kid": kid} if kid is not None else {}
    h.update(headers or {})
    return jwt.encode(payload if payload is not None else base, key, algorithm=alg, headers=h)


ok_claims = {"sub": "user-1", "org.plan": "premium", "org.seats": "12"}
for alg in ["RS256", "RS384", "RS512"]:
    case(f"{alg} verifies", sign(rsa_key, alg, "rsa"), "verified", ok_claims)
case("PS256 verifies", sign(rsa_other, "PS256", "rsa-ps"), "verified", ok_claims)
case("ES256 verifies", sign(p256, "ES256", "p256"), "verified", ok_claims)
case("ES384 verifies", sign(p384, "ES384", "p384"), "verified", ok_claims)
case("ES512 verifies", sign(p521, "ES512", "p521"), "verified", ok_claims)
case("EdDSA verifies", sign(edkey, "EdDSA", "ed"), "verified", ok_claims)
for alg in ["HS256", "HS384", "HS512"]:
    case(f"{alg} verifies with the secret", sign(SECRET, alg, None), "verified", ok_claims)
case("an audience array naming api", sign(rsa_key, "RS256", "rsa", dict(base, aud=["web", "api"])),
     "verified", ok_claims)
case("exp within the leeway", sign(rsa_key, "RS256", "rsa", dict(base, exp=NOW - 20)), "verified",
     ok_claims)
case("a token without exp", sign(rsa_key, "RS256", "rsa",
                                 {k: v for k, v in base.items() if k != "exp"}), "verified", ok_claims)

# Refusals, one reason each.
unsigned = b64(json.dumps({"alg": "none", "typ": "JWT"}).encode()) + "." + \
    b64(json.dumps(base).encode()) + "."
case("alg none", unsigned, "alg_none")
case("alg NONE in capitals", b64(json.dumps({"alg": "NONE"}).encode()) + "." +
     b64(json.dumps(base).encode()) + ".", "alg_none")
case("an algorithm not listed (PS384)", sign(rsa_other, "PS384", "rsa"), "alg_not_allowed")
case("a kid not in the set", sign(rsa_key, "RS256", "gone"), "unknown_kid")
case("an RSA key for an EC algorithm", sign(p256, "ES256", "rsa"), "key_mismatch")
case("a key fixed to PS256 used for RS256", sign(rsa_other, "RS256", "rsa-ps"), "key_mismatch")
case("a 1024-bit RSA key is left out of the set", sign(small_rsa, "RS256", "small"), "unknown_kid")
case("an oct key of the set is never used", sign("not-a-secret", "HS256", "oct"), "bad_signature")
# Algorithm confusion: HS256 with the RSA public key's PEM as the secret.
pem = rsa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
hdr = b64(json.dumps({"alg": "HS256", "kid": "rsa", "typ": "JWT"}).encode())
body = b64(json.dumps(base).encode())
import hmac as _hmac, hashlib as _hashlib
confused = hdr + "." + body + "." + b64(_hmac.new(pem, (hdr + "." + body).encode(),
                                                  _hashlib.sha256).digest())
case("HS256 signed with the RSA public key (algorithm confusion)", confused, "bad_signature")
good = sign(rsa_key, "RS256", "rsa")
h, p, s = good.split(".")
case("a signature of another key", sign(rsa_other, "RS256", "rsa"), "bad_signature")
case("a payload changed after signing",
     h + "." + b64(json.dumps(dict(base, sub="admin")).encode()) + "." + s, "bad_signature")
case("expired", sign(rsa_key, "RS256", "rsa", dict(base, exp=NOW - 31)), "expired")
case("not yet valid", sign(rsa_key, "RS256", "rsa", dict(base, nbf=NOW + 31)), "not_yet_valid")
case("issued in the future", sign(rsa_key, "RS256", "rsa", dict(base, iat=NOW + 31)),
     "issued_in_future")
case("another issuer", sign(rsa_key, "RS256", "rsa", dict(base, iss="https://evil.test/")), "issuer")
case("no issuer", sign(rsa_key, "RS256", "rsa", {k: v for k, v in base.items() if k != "iss"}),
     "issuer")
case("another audience", sign(rsa_key, "RS256", "rsa", dict(base, aud="admin")), "audience")
case("an audience array without api", sign(rsa_key, "RS256", "rsa", dict(base, aud=["a", "b"])),
     "audience")
case("exp of the wrong type", sign(rsa_key, "RS256", "rsa", dict(base, exp="soon")), "bad_claim")
case("two parts", h + "." + p, "malformed")
case("four parts", good + ".x", "malformed")
case("padding in base64url", h + "=." + p + "." + s, "malformed")
case("a header that is not JSON", b64(b"{alg") + "." + p + "." + s, "malformed")
case("a header that is an array", b64(b'["RS256"]') + "." + p + "." + s, "malformed")
case("a payload that is not an object (signed)",
     jwt.api_jws.encode(b"[1,2]", rsa_key, algorithm="RS256", headers={"kid": "rsa"}), "malformed")
case("a crit header", sign(rsa_key, "RS256", "rsa", headers={"crit": ["exp"]}), "malformed")
case("over 8 KiB", sign(rsa_key, "RS256", "rsa", dict(base, pad="x" * 8200)), "too_long")
case("deeply nested payload (signed)",
     sign(rsa_key, "RS256", "rsa", dict(base, deep=json.loads("[" * 40 + "]" * 40))), "malformed")

with open(OUT, "w") as f:
    json.dump({"now": NOW, "secret": SECRET, "issuer": ISS, "audience": AUD,
               "algorithms": ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "ES512",
                              "EdDSA", "HS256", "HS384", "HS512"],
               "claim_paths": ["sub", "org.plan", "org.seats"],
               "jwks": jwks, "cases": cases}, f, indent=1)
print(f"wrote {len(cases)} cases to {OUT}")

"""Tollgate proof of work for Python clients: standard library only.

    from tollgate_pow import solution_for, solve

    try:
        urllib.request.urlopen(request)
    except urllib.error.HTTPError as e:
        solution = solution_for(e.code, e.headers)   # None unless a 428 with a challenge
        if solution is None:
            raise
        request.add_header("X-PoW-Solution", solution)
        urllib.request.urlopen(request)

A 428 from Tollgate carries X-PoW-Challenge and X-PoW-Difficulty. A proof is a nonce of 1-64
characters of [A-Za-z0-9_-] such that SHA-256(challenge ":" nonce) starts with at least
`difficulty` zero bits (most significant bit of the first byte first), sent back as
`X-PoW-Solution: <challenge>:<nonce>` before the challenge expires.

Command line: python3 tollgate_pow.py CHALLENGE BITS  (prints a nonce).
"""

import hashlib
import itertools
import re
import sys

__all__ = ["solve", "solution_for", "open_with_pow"]

_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{1,512}")
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# Every nonce is a counter in hex followed by two characters of the alphabet: the inner loop
# runs over these 4096 endings with a copy of the hash of "<challenge>:<counter>".
_ENDINGS = [bytes((a, b)) for a in _ALPHABET for b in _ALPHABET]


def _check(challenge, bits):
    if not isinstance(challenge, str) or not _CHALLENGE.fullmatch(challenge):
        raise ValueError("a challenge is 1-512 characters of [A-Za-z0-9_-]")
    if isinstance(bits, bool) or not isinstance(bits, int) or not 0 <= bits <= 64:
        raise ValueError("bits must be an integer from 0 to 64")


def _search(challenge, bits):
    """(nonce, number of hashes computed) for `challenge` at `bits`."""
    _check(challenge, bits)
    if bits == 0:
        return "0", 0
    # A digest has at least `bits` leading zero bits when its first 8 bytes, as a big-endian
    # number, are below 2^(64 - bits): that is `digest < limit` as bytes (a 32-byte digest
    # whose first 8 bytes equal the limit compares greater).
    limit = (1 << (64 - bits)).to_bytes(8, "big")
    base = hashlib.sha256(challenge.encode("ascii") + b":")
    endings = _ENDINGS
    for counter in itertools.count():
        head = base.copy()
        head.update(b"%x" % counter)
        copy = head.copy
        for ending in endings:
            h = copy()
            h.update(ending)
            if h.digest() < limit:
                tried = counter * len(endings) + endings.index(ending) + 1
                return "%x%s" % (counter, ending.decode()), tried
    raise AssertionError("unreachable")


def solve(challenge: str, bits: int) -> str:
    """A nonce such that SHA-256(challenge ":" nonce) has at least `bits` leading zero bits.
    ValueError for a malformed challenge or bits outside 0..64. Takes 2^bits hashes on
    average (about a second for 20 bits here: see docs/pow.md, "How long a proof takes")."""
    return _search(challenge, bits)[0]


def _header(headers, name):
    """The value of header `name` (any case) in a Message, a dict or (name, value) pairs."""
    get = getattr(headers, "get", None)
    if get is not None:
        value = get(name)  # email.message.Message (urllib, http.client) ignores case
        if value is not None:
            return value
    items = headers.items() if hasattr(headers, "items") else headers
    lowered = name.lower()
    for key, value in items:
        if key.lower() == lowered:
            return value
    return None


def solution_for(status, headers):
    """The X-PoW-Solution value ("<challenge>:<nonce>") for a response with this status and
    headers (urllib's HTTPError.headers, http.client's response.headers or getheaders(), a
    dict), or None when it is not a 428 with a challenge. ValueError for a challenge that is
    not Tollgate's (another algorithm, a bad difficulty or challenge)."""
    if int(status) != 428:
        return None
    challenge = _header(headers, "X-PoW-Challenge")
    if challenge is None:
        return None
    challenge = challenge.strip()
    algorithm = _header(headers, "X-PoW-Algorithm")
    if algorithm is not None and algorithm.strip().lower() != "sha256":
        raise ValueError(f"unsupported proof-of-work algorithm {algorithm!r}")
    difficulty = (_header(headers, "X-PoW-Difficulty") or "").strip()
    if not re.fullmatch(r"[0-9]{1,2}", difficulty):
        raise ValueError(f"bad X-PoW-Difficulty {difficulty!r}")
    return f"{challenge}:{solve(challenge, int(difficulty))}"


# The clearance a proof earned, per (scheme, host) (docs/pow.md, "Clearance"): sent back as
# X-PoW-Clearance, it spares the next requests a solve while it lasts.
_clearances = {}


def _remember_clearance(where, headers):
    clearance = _header(headers, "X-PoW-Clearance")
    if clearance:
        _clearances[where] = clearance.strip()


def open_with_pow(request, **kwargs):
    """urllib.request.urlopen(request, **kwargs); on a 428 with a challenge, solves it and
    sends the request once more with X-PoW-Solution. `request`: a URL or a Request. The
    clearance a proof earns is kept per host and sent with the next requests there."""
    import urllib.error
    import urllib.request

    if isinstance(request, str):
        request = urllib.request.Request(request)
    where = (request.type, request.host)
    if where in _clearances and not request.has_header("X-pow-clearance"):
        request.add_header("X-PoW-Clearance", _clearances[where])
    try:
        response = urllib.request.urlopen(request, **kwargs)
        _remember_clearance(where, response.headers)
        return response
    except urllib.error.HTTPError as e:
        solution = solution_for(e.code, e.headers)
        if solution is None:
            raise
        e.close()
    request.add_header("X-PoW-Solution", solution)
    response = urllib.request.urlopen(request, **kwargs)
    _remember_clearance(where, response.headers)
    return response


def main(argv):
    if len(argv) != 3 or not re.fullmatch(r"[0-9]{1,2}", argv[2]):
        print("usage: python3 tollgate_pow.py CHALLENGE BITS   (BITS: 0 to 64)", file=sys.stderr)
        return 2
    try:
        print(solve(argv[1], int(argv[2])))
    except ValueError as e:
        print(f"tollgate_pow: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

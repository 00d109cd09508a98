#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets, tests/fuzz/corpus/<target>/, from inputs the
unit tests use (tests/unit/test_*.cpp) and the shipped configuration. Run from anywhere:
`python3 tests/fuzz/make_corpus.py`; it replaces the seed files it writes and nothing else."""

import base64
import hashlib
import hmac
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def router():
    # target, method, Upgrade, then rules "<kind><options><method><pattern>[\t<Upgrade>]".
    default_routes = [
        "=7P/api/auth/login", "=7P/api/profile/register", "=7P/api/auth/password",
        "^0-/api/inbox", "=0-/ws/bus\twebsocket", "^0-/ws/crdt/\twebsocket",
        "^0-/ws/rtdb/\twebsocket",
    ]
    seeds = {
        "login": ["/api/auth/login", "POST", ""] + default_routes,
        "login_spelled": ["//api/./auth/login?next=/", "POST", ""] + default_routes,
        "login_escaped": ["/api/auth%2flogin", "POST", ""] + default_routes,
        "login_params": ["/API/auth/login;jsessionid=1/", "POST", ""] + default_routes,
        "dotdot_params": ["/a/..;/api/auth/login", "POST", ""] + default_routes,
        "websocket": ["/ws/rtdb/x", "GET", "h2c, websocket"] + default_routes,
        "inboxes": ["/api/inboxes", "PUT", ""] + default_routes,
        "absolute": ["http://example.com/api/inbox?q", "GET", ""] + default_routes,
        "globs": ["/api/users/7/info", "GET", "", "~0-/api/*/info", "~0-/api/**/info",
                  "~1-/api/files/**", "~2-/img/*.PNG", "~0-/**/*.png", "~0-/a/**/b/**/c"],
        "glob_case": ["/IMG/cat.png", "GET", "", "~2-/img/*.png", "~3-/img/**"],
        "glob_slash": ["/api/files/", "GET", "", "~1-/api/files/**", "=1-/api/files"],
        "escapes": ["/api/%61uth/%2e%2e/x/..", "GET", "", "^1-/api/", "~0-/*"],
        "bad_escape": ["/a%00b", "GET", "", "=0-/a"],
        "above_root": ["/a/../../b", "GET", "", "=0-/b"],
        "hostile": ["/" + "a" * 200, "GET", "", "~0-/*a*a*a*a*a*a*a*b", "~0-/**/a/**/a/**/b"],
    }
    for name, lines in seeds.items():
        write("fuzz_router", name, "\n".join(lines))


def proxy_header():
    def v2(command, family, body):
        return (b"\r\n\r\n\0\r\nQUIT\n" + bytes([0x20 | command, family]) +
                struct.pack(">H", len(body)) + body)

    v4 = bytes([203, 0, 113, 7, 192, 0, 2, 1, 0xc8, 0x22, 1, 0xbb])
    six = bytes([0x20, 0x01, 0x0d, 0xb8] + [0] * 11 + [5]) + bytes(16) + bytes([0, 1, 0, 2])
    tlv = bytes([203, 0, 113, 8, 192, 0, 2, 1, 0, 1, 0, 2, 0x04, 0, 2]) + b"hi"
    seeds = {
        "v1_tcp4": b"PROXY TCP4 203.0.113.7 192.0.2.1 51234 443\r\nGET / HTTP/1.1\r\n",
        "v1_tcp6": b"PROXY TCP6 2001:db8::5 2001:db8::1 1 65535\r\n",
        "v1_unknown": b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n",
        "v1_partial": b"PROXY TCP4 203.0.113.7 192.0.2.1 5",
        "v1_mismatch": b"PROXY TCP4 2001:db8::1 1.2.3.5 1 2\r\n",
        "v1_leading_zero": b"PROXY TCP4 1.2.3.4 1.2.3.5 01 2\r\n",
        "v1_long": b"PROXY TCP4 " + b"1" * 120,
        "v2_inet": v2(1, 0x11, v4) + b"GET /",
        "v2_inet6": v2(1, 0x21, six),
        "v2_tlv": v2(1, 0x11, tlv),
        "v2_local": v2(0, 0x00, b""),
        "v2_unix": v2(1, 0x31, bytes(216)),
        "v2_short": v2(1, 0x11, bytes([1, 2, 3])),
        "v2_bad_family": v2(1, 0x41, b"\1" * 12),
        "http": b"GET / HTTP/1.1\r\n\r\n",
    }
    for name, data in seeds.items():
        write("fuzz_proxy_header", name, data)


def client_address():
    # peer, trusted CIDRs, then X-Forwarded-For field values.
    seeds = {
        "walk": "10.0.0.2\n10.0.0.0/8\n1.1.1.1, 203.0.113.1, 10.0.0.9",
        "fields": "10.0.0.2\n10.0.0.0/8\n1.1.1.1\n203.0.113.1, 10.0.0.9",
        "garbage": "10.0.0.2\n10.0.0.0/8\n203.0.113.1, nonsense, 10.0.0.9",
        "untrusted": "198.51.100.7\n10.0.0.0/8\n203.0.113.1",
        "all_trusted": "10.0.0.2\n10.0.0.0/8\n10.1.1.1, 10.0.0.9",
        "v6": "::1\n::1/128 2001:db8::/32\n 2001:db8::5 ",
        "mapped": "::ffff:10.0.0.2\n::ffff:10.0.0.0/104\n192.0.2.1",
        "forms": "2001:DB8:0:0:1::1\n::FFFF:c633:6407 64:ff9b::198.51.100.7/96 ::198.51.100.7\n"
                 "fe80::1%eth0, [::1], 1.2.3.4:80, 01.2.3.4, 10.1.2.3/8",
        "empty_items": "10.0.0.2\n0.0.0.0/0 ::/0\n\n,\n 1.2.3.4 ,",
    }
    for name, text in seeds.items():
        write("fuzz_client_address", name, text)


def challenge():
    # As fuzz_challenge.cpp checks them: signed under its secret, for its client and "auth".
    secret = b"tollgate fuzz secret"
    now, client = 1_700_000_000, 0x0123456789abcdef

    def fnv1a(name):
        h = 2166136261
        for c in name.encode():
            h = ((h ^ c) * 16777619) & 0xffffffff
        return h

    def issue(expires, bits, category, who, random=bytes(range(16))):
        signed = (bytes([1]) + random + struct.pack(">qBIQ", expires, bits, category, who))
        raw = signed + hmac.new(secret, signed, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def solve(ch, bits):
        n = 0
        while True:
            proof = f"{ch}:{n}"
            d = int.from_bytes(hashlib.sha256(proof.encode()).digest(), "big")
            if 256 - d.bit_length() >= bits:
                return proof
            n += 1

    auth = fnv1a("auth")
    good = issue(now + 60, 4, auth, client)
    seeds = {
        "valid": solve(good, 4),
        "unsolved": good + ":x",
        "expired": solve(issue(now - 1, 4, auth, client), 4),
        "wrong_client": solve(issue(now + 60, 4, auth, client + 1), 4),
        "wrong_category": solve(issue(now + 60, 4, fnv1a("general"), client), 4),
        "too_easy": solve(issue(now + 60, 1, auth, client), 1),
        "tampered": good[:30] + ("B" if good[30] == "A" else "A") + good[31:] + ":1",
        "no_nonce": good + ":",
        "bad_nonce": good + ":a b",
        "all_a": "A" * 94 + ":1",
        "base64": "AAECAwQFBgcICQoLDA0ODw",
        "empty": "",
    }
    for name, text in seeds.items():
        write("fuzz_challenge", name, text)


def config():
    with open(os.path.join(ROOT, "config", "gateway.yaml")) as f:
        gateway = f.read()
    # fuzz_config writes a valid policy.yaml next to the input.
    gateway = "\n".join("policies: [policy.yaml]" if line.startswith("policies:") else line
                        for line in gateway.splitlines()) + "\n"
    with open(os.path.join(ROOT, "policies", "default.yaml")) as f:
        policy = f.read()
    minimal = ("listeners: [{ name: public, address: 0.0.0.0, port: 8080 }]\n"
               "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n"
               "default_route: { category: general, upstream: app }\n"
               "policies: [policy.yaml]\n")
    seeds = {
        "gateway": gateway,
        "policy": policy,
        "minimal": minimal,
        "options": minimal + (
            "workers: 3\n"
            "trusted_proxies: [10.0.0.0/8, '2001:db8::/32']\n"
            "routes:\n"
            "  - { match: { path_glob: '/api/files/**', case_insensitive: true }, category: auth,"
            " upstream: app }\n"
            "  - { match: { path: /a, ignore_trailing_slash: true }, category: auth,"
            " upstream: app }\n"
            "store: { type: redis, address: '[::1]:6379', timeout: 5ms, fail_mode: closed,"
            " capacity: { keyed: 7 } }\n"
            "logging: { level: debug, access_log: true }\n"),
        "duplicate_key": minimal + "workers: 1\nworkers: 2\n",
        "self_policy": minimal.replace("policy.yaml", "input.yaml"),
        # As tests/unit/test_config_files.cpp: a folder, a missing file among the policies.
        "policy_folder": minimal.replace("[policy.yaml]", "[policy.yaml, folder.yaml]"),
        "policy_missing": minimal.replace("[policy.yaml]", "[policy.yaml, missing.yaml]"),
        "policy_parent": minimal.replace("[policy.yaml]", "[..]"),
        "anchors": "a: &x { b: *x }\n",
        "small_policy": "categories:\n  general: {}\n  auth: { cost: 2 }\n",
    }
    for name, text in seeds.items():
        write("fuzz_config", name, text)


def http_heads():
    # flags, a count of segment sizes, the sizes (each + 1), then the message.
    def seed(flags, sizes, message):
        return bytes([flags, len(sizes)]) + bytes(s - 1 for s in sizes) + message

    get = b"GET /api/inbox?x=1 HTTP/1.1\r\nHost: example.com\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n"
    post = (b"POST /api/auth/login HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n"
            b"Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\nExpect: 100-continue\r\n\r\nhello")
    chunked = (b"PUT /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n0\r\n\r\n")
    old = b"GET / HTTP/1.0\r\nUser-Agent: x\r\n\r\n"
    upgrade = (b"GET /ws/bus HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"X-PoW-Solution: abc:1\r\n\r\n")
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Tollgate-Violation: failed_auth\r\n\r\nhello"
    chunked_ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    close = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody until close"
    seeds = {
        "get": seed(0, [], get),
        "get_bytewise": seed(0, [1], get),
        "post": seed(0, [7, 13], post),
        "chunked": seed(0, [30, 1], chunked),
        "http10": seed(0, [], old),
        "upgrade": seed(0, [2], upgrade),
        "response": seed(1 | 8 | 16, [], ok),
        "response_bytewise": seed(1, [1], ok),
        "response_chunked": seed(1 | 8, [5, 40], chunked_ok),
        "response_to_head": seed(1 | 2 | 8, [], ok),
        "response_http10_client": seed(1 | 4 | 8 | 16 | 32, [], chunked_ok),
        "response_close": seed(1 | 8, [3], close),
        "no_content": seed(1 | 8, [], b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"),
        "not_modified": seed(1, [], b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"),
        "no_reason": seed(1 | 8, [], b"HTTP/1.1 429 \r\nRetry-After: 1\r\n\r\n"),
        "interim": seed(1, [], b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"),
        "switching": seed(1 | 16, [7], b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          b"Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                          b"Sec-WebSocket-Protocol: chat\r\nX-Tollgate-Violation: x\r\n\r\n"),
    }
    for name, data in seeds.items():
        write("fuzz_http_heads", name, data)


def ws_frames():
    # options byte (max size 1 + (o&3)*700, o&4 message limit 3/s burst 3, o&8 drop,
    # o&16 per_kib, o&32 extensions, o&64 masked close frame), read-size seed, then frames.
    def frame(op, payload, fin=True, mask=b"\x01\x02\x03\x04", rsv=0, form=None):
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | rsv << 4 | op])
        m = 0x80 if mask else 0
        if form == 64 or (form is None and n > 0xFFFF):
            head += bytes([m | 127]) + struct.pack(">Q", n)
        elif form == 16 or (form is None and n >= 126):
            head += bytes([m | 126]) + struct.pack(">H", n)
        else:
            head += bytes([m | n])
        if mask:
            head += mask
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return head + payload

    seeds = {
        "text": (3, 7, frame(1, b"hello")),
        "fragmented": (7, 3, frame(1, b"ab", fin=False) + frame(9, b"p") + frame(0, b"cd")),
        "burst": (4, 1, b"".join(frame(2, b"x") for _ in range(5))),
        "drop": (4 | 8, 5, b"".join(frame(1, b"m", fin=False) + frame(0, b"n") for _ in range(5))),
        "per_kib": (3 | 4 | 16, 9, frame(2, b"k" * 1500) + frame(2, b"")),
        "sizes": (1, 11, frame(2, b"s" * 701) + frame(2, b"s" * 702)),
        "form16": (3, 2, frame(2, b"y" * 200)),
        "form64": (3, 2, frame(2, b"z" * 10, form=64)),
        "unmasked": (3, 4, frame(1, b"plain", mask=None)),
        "deflate": (3 | 32, 6, frame(1, b"\x00\x01", rsv=4)),
        "close": (3 | 64, 13, frame(8, b"\x03\xe8bye")),
        "ping126": (3, 8, frame(9, b"p" * 126)),
        "continuation_first": (3, 10, frame(0, b"c")),
    }
    for name, (options, seed, data) in seeds.items():
        write("fuzz_ws_frames", name, bytes([options, seed]) + data)


def access_lines():
    """fuzz_access_lines: method NUL target NUL limit."""
    seeds = {
        "plain": b"GET\0/api/profiles/x?a=1\0",
        "limited": b"POST\0/api/auth/login\0ipv4_individual.short",
        "quotes": b'GET\0/q?a="b\\c"&d=\x01\x7f\xff\xc3\xa9\0',
        "newline": b"GET\0/a\r\n{\"forged\":1}\0x",
    }
    for name, data in seeds.items():
        write("fuzz_access_lines", name, data)


def redis_replies():
    """fuzz_redis_replies: the first byte says where the input is split in two feeds; then what
    Redis sends the store: a script reply (v4: now, verdict, one element per tier, text past
    2^53 ns), a CLUSTER SLOTS map, redirections and errors, nested nils."""
    seeds = {
        "script_admitted": b"\x08*8\r\n:1700000000\r\n:5000\r\n:1\r\n:100000000\r\n"
                           b":36000000000\r\n:1000000000\r\n:-8571428572\r\n"
                           b"$21\r\n1:3000000000:12345678\r\n",
        "cluster_slots": b"\x05*3\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7101\r\n"
                         b"$40\r\n" + b"a" * 40 + b"\r\n"
                         b"*4\r\n:5461\r\n:10922\r\n*3\r\n$0\r\n\r\n:7102\r\n$1\r\nb\r\n"
                         b"*3\r\n$9\r\n127.0.0.1\r\n:7202\r\n$1\r\nr\r\n"
                         b"*3\r\n:10923\r\n:16383\r\n*2\r\n$3\r\n::1\r\n:7103\r\n",
        "redirects": b"\x03-MOVED 3999 127.0.0.1:6381\r\n-ASK 12 [::1]:7000\r\n"
                     b"-NOSCRIPT No matching script.\r\n+OK\r\n",
        "nested_nil": b"\x00*2\r\n*-1\r\n$-1\r\n",
    }
    for name, data in seeds.items():
        write("fuzz_redis_replies", name, data)


def sim_log():
    """fuzz_sim_log: log lines of the three formats the simulator reads (tests/unit/
    test_sim_log.cpp), good, cut and hostile; and `METHOD\0TARGET` pairs to write and read
    back."""
    text = ('2026-11-23T09:24:23.123Z access 192.0.2.7 "GET /a?b=1 HTTP/1.1" 200 category=general '
            'decision=allowed limit=- upstream=app upstream_time=0.000812 bytes=245 0.001500s')
    json_line = ('{"time":"2026-11-23T09:24:23.123Z","type":"access","client":"192.0.2.7",'
                 '"method":"GET","path":"/a?b=1","protocol":"HTTP/1.1","status":429,'
                 '"category":"general","decision":"limited","limit":"ipv4_individual.short",'
                 '"upstream":null,"upstream_time":null,"bytes":245,"duration":0.001500}')
    nginx = ('203.0.113.9 - - [23/Nov/2026:02:24:23 -0700] "GET /x?y=%20 HTTP/1.1" 200 612 "-" '
             '"curl/8"')
    seeds = {
        "text": text,
        "text_micro": text.replace(".123Z", ".123456Z"),
        "text_escapes": text.replace("/a?b=1", "/x\\x22y\\x20z\\xff\\x00"),
        "text_cut_escape": text[:60] + "\\x2",
        "tunnel": ('2026-11-18T11:06:40.123Z access 2001:db8::1 "GET /ws/bus" category=websocket '
                   'websocket closed code=4001 by=upstream messages_from_client=4 '
                   'messages_from_upstream=3 1.250000s'),
        "json": json_line,
        "json_escapes": json_line.replace("/a?b=1", "/\\u00e9\\\"\\ud83d\\ude00"),
        "json_duplicate": json_line.replace('"status":429', '"status":429,"status":200'),
        "json_app": '{"time":"2026-11-23T14:10:29.123Z","level":"info","message":"hi"}',
        "app": "[2026-11-23 14:10:29.123] [info] listening on public 127.0.0.1:8080",
        "nginx": nginx,
        "nginx_escapes": nginx.replace("/x?y=%20", "/q\\x22\\x5c"),
        "mixed": "\r\n".join([text, json_line, nginx, "", "garbage\0"]),
        "pair": "GET\0/a?b=1",
        "pair_hostile": "P\"O ST\0/x\"\n{\"forged\":1}\r\\\x01\x7f\xff\xc3\xa9",
    }
    for name, data in seeds.items():
        write("fuzz_sim_log", name, data)


def jwt():
    # Mode byte 0: a token (the unit tests' vectors, every verdict); 1: a JWK Set.
    import json
    with open(os.path.join(ROOT, "tests", "unit", "golden", "jwt_vectors.json")) as f:
        vectors = json.load(f)
    for i, c in enumerate(vectors["cases"]):
        write("fuzz_jwt", f"token-{i:02d}", b"\0" + c["token"].encode())
    write("fuzz_jwt", "jwks", b"\1" + json.dumps(vectors["jwks"]).encode())
    for k in vectors["jwks"]["keys"]:
        write("fuzz_jwt", f"jwk-{k.get('kid', 'none')}", b"\1" + json.dumps(k).encode())


def h2_frames():
    # The first byte cuts the rest into pieces of byte + 1; the rest is what follows the
    # client preface: frames made by python3-h2 (a client that is not ours), then raw ones.
    import h2.config
    import h2.connection

    def client():
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        data = c.data_to_send()
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        return c, data[len(preface):]

    def headers(path, method="GET", extra=()):
        return [(":method", method), (":path", path), (":scheme", "http"),
                (":authority", "fuzz"), *extra]

    c, out = client()
    c.send_headers(1, headers("/a"), end_stream=True)
    c.send_headers(3, headers("/g", extra=[("cookie", "a=1"), ("cookie", "tollgate_pow=x:1")]),
                   end_stream=True)
    write("fuzz_h2_frames", "gets", b"\xff" + out + c.data_to_send())
    c, out = client()
    c.send_headers(1, headers("/up", "POST", [("content-length", "5")]))
    c.send_data(1, b"hello", end_stream=True)
    c.send_headers(3, headers("/chunked", "POST"))
    c.send_data(3, b"abc")
    c.send_headers(3, [("x-trailer", "1")], end_stream=True)
    write("fuzz_h2_frames", "bodies", b"\x06" + out + c.data_to_send())
    c, out = client()
    for i in range(1, 40, 2):
        c.send_headers(i, headers("/r"), end_stream=True)
        c.reset_stream(i)
    write("fuzz_h2_frames", "resets", b"\x20" + out + c.data_to_send())
    c, out = client()
    for i in range(20):
        c.ping(bytes([i] * 8))
    c.update_settings({4: 0})
    c.send_headers(1, headers("/big", extra=[("x-big", "v" * 3000)]), end_stream=True)
    c.increment_flow_control_window(1000)
    write("fuzz_h2_frames", "control", b"\x00" + out + c.data_to_send())
    # HEADERS without END_HEADERS and CONTINUATION frames after it.
    c, out = client()
    block = c.encoder.encode(headers("/c"))
    frame = len(block).to_bytes(3, "big") + b"\x01\x00" + (1).to_bytes(4, "big") + block
    more = c.encoder.encode([("x-f", "a" * 200)])
    cont = len(more).to_bytes(3, "big") + b"\x09\x00" + (1).to_bytes(4, "big") + more
    write("fuzz_h2_frames", "continuations", b"\x40" + out + frame + cont * 12)


if __name__ == "__main__":
    router()
    proxy_header()
    client_address()
    challenge()
    config()
    http_heads()
    ws_frames()
    redis_replies()
    access_lines()
    sim_log()
    jwt()
    h2_frames()

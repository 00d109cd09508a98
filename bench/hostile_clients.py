#!/usr/bin/env python3
"""Hostile and idle clients for bench/hostile.sh, on loopback only, bounded in count and time.

  idle PORT N PIDS...         opens N keep-alive connections (from 127.0.1.x sources, 100 per
                              address), sends one GET on each, reads the answer, and prints the
                              summed RSS of PIDS (KiB) before and after, with N connections held
  slowheads PORT N PIDS...    opens N connections (127.0.2.x sources, 100 per address) that
                              each send the start of a head and stop, and prints the summed RSS
                              of PIDS before and after, with N such connections held
  slowloris PORT N SECONDS    N connections from 127.0.0.200, each sending a never-ending head
                              a byte every few seconds, for SECONDS; reconnects refused ones
  chunkflood PORT N SECONDS   N connections sending endless chunk extensions (half of them)
                              or trailers (the other half) as fast as they can, for SECONDS;
                              a connection the gateway closes is opened again
  proofspam PORT CLIENT N     as CLIENT (X-Forwarded-For, the gateway trusting loopback): one
                              failed login (POST /login?status=401), then N garbage proofs;
                              prints the statuses it got
  behindlb PORT N             N keep-alive connections from 127.0.0.1 (a trusted balancer),
                              each for another client (X-Forwarded-For), two requests each;
                              prints how many were answered 200 and how many reset
  adminflood PORT N SECONDS   up to N connections to the admin port, held SECONDS; prints how
                              many are still open after a second and how many were reset
  netslow PORT ADDRESSES EACH SECONDS
                              EACH half-sent heads from each of ADDRESSES addresses of
                              127.0.5.0/24, held SECONDS; prints how many were held
"""
import os
import resource
import selectors
import socket
import sys
import time


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def connect(port, source):
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def get_one(s, request, i):
    s.sendall(request)
    if answer_status(s) == 0:
        raise SystemExit(f"connection {i} closed before its answer")


def idle(port, n, pids):
    resource.setrlimit(resource.RLIMIT_NOFILE, (n + 1024, n + 1024))
    request = b"GET /idle HTTP/1.1\r\nHost: bench\r\n\r\n"
    sources = [f"127.0.1.{1 + i // 100}" for i in range(n)]
    # The limiter's keys of every source first (its tables are sized by configuration, not by
    # connections), and a few requests to warm the worker's caches.
    for source in sorted(set(sources)):
        for _ in range(5):
            with connect(port, source) as s:
                get_one(s, request, -1)
    time.sleep(0.5)
    before = rss_kib(pids)
    socks = []
    for i, source in enumerate(sources):
        s = connect(port, source)
        get_one(s, request, i)
        socks.append(s)
    time.sleep(2.5)  # idle connections give their buffers back after a second or two
    after = rss_kib(pids)
    print(f"{n} {before} {after} {(after - before) * 1024 / n:.0f}")
    for s in socks:
        s.close()


def slowheads(port, n, pids):
    resource.setrlimit(resource.RLIMIT_NOFILE, (n + 1024, n + 1024))
    sources = [f"127.0.2.{1 + i // 100}" for i in range(n)]
    for source in sorted(set(sources)):  # the limiter's keys first, as in idle()
        with connect(port, source) as s:
            get_one(s, b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n", -1)
    time.sleep(0.5)
    before = rss_kib(pids)
    socks = []
    for source in sources:
        s = connect(port, source)
        s.sendall(b"GET /slow HTTP/1.1\r\nHost: bench\r\nX-A: 1")
        socks.append(s)
    time.sleep(2.5)
    after = rss_kib(pids)
    print(f"{n} {before} {after} {(after - before) * 1024 / n:.0f}")
    for s in socks:
        s.close()


def slowloris(port, n, seconds):
    resource.setrlimit(resource.RLIMIT_NOFILE, (n + 1024, n + 1024))
    end = time.time() + seconds
    socks = []
    refused = 0
    while time.time() < end:
        while len(socks) < n and time.time() < end:
            try:
                s = connect(port, "127.0.0.200")
                s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            except OSError:
                refused += 1
                break
        alive = []
        for s in socks:
            try:
                s.sendall(b"X: y\r\n")
                alive.append(s)
            except OSError:
                refused += 1
                s.close()
        socks = alive
        time.sleep(min(2.0, max(0.0, end - time.time())))
    print(f"slowloris: {len(socks)} connections held at the end, {refused} refused or closed")


def chunkflood(port, n, seconds):
    end = time.time() + seconds
    sel = selectors.DefaultSelector()
    junk = b"a" * 65536
    opened = 0
    head = b"POST /flood HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

    def open_one(kind):
        nonlocal opened
        s = connect(port, "127.0.0.150")
        s.setblocking(False)
        s.send(head + (b"1;x=" if kind == 0 else b"0\r\nX-Trailer: "))
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ, kind)
        opened += 1

    for i in range(n):
        open_one(i % 2)
    sent = 0
    while time.time() < end:
        for key, events in sel.select(timeout=0.1):
            s = key.fileobj
            try:
                if events & selectors.EVENT_READ:
                    if not s.recv(65536):
                        raise OSError("closed")
                if events & selectors.EVENT_WRITE:
                    sent += s.send(junk)
            except OSError:
                sel.unregister(s)
                s.close()
                open_one(key.data)
    print(f"chunkflood: {opened} connections opened, {sent / 1e6:.1f} MB sent")


def answer_status(s):
    """The status of the next answer on `s` (its body read), 0 when the connection ended."""
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return 0
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                return 0
            body += chunk
        return int(head.split(b" ")[1])
    except OSError:
        return 0


def proofspam(port, client, n):
    statuses = {}
    xff = f"X-Forwarded-For: {client}\r\n".encode()
    with connect(port, "127.0.0.1") as s:
        s.sendall(b"POST /login?status=401 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n" + xff + b"\r\n")
        st = answer_status(s)
        statuses[st] = statuses.get(st, 0) + 1
        for i in range(n):
            s.sendall(b"GET /login HTTP/1.1\r\nHost: x\r\n" + xff +
                      f"X-PoW-Solution: garbage{i}:nonce\r\n\r\n".encode())
            st = answer_status(s)
            statuses[st] = statuses.get(st, 0) + 1
    print("proofspam: " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())))


def behindlb(port, n):
    resource.setrlimit(resource.RLIMIT_NOFILE, (n + 1024, n + 1024))
    socks, served, reset = [], 0, 0
    for i in range(n):
        try:
            socks.append(connect(port, "127.0.0.1"))
        except OSError:
            reset += 1
    for _ in range(2):
        for i, s in enumerate(socks):
            client = f"198.18.{i // 250}.{1 + i % 250}"
            try:
                s.sendall(f"GET /lb HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {client}\r\n\r\n".encode())
            except OSError:
                reset += 1
                continue
            if answer_status(s) == 200:
                served += 1
            else:
                reset += 1
    print(f"behindlb: {served} of {2 * n} requests answered 200 over {n} connections, {reset} reset")
    for s in socks:
        s.close()


def adminflood(port, n, seconds):
    resource.setrlimit(resource.RLIMIT_NOFILE, (n + 1024, n + 1024))
    socks, failed = [], 0
    for _ in range(n):
        try:
            socks.append(connect(port, "127.0.0.1"))
        except OSError:
            failed += 1
    time.sleep(1)
    open_now = 0
    for s in socks:
        s.setblocking(False)
        try:
            s.recv(1)  # b"": closed; an exception other than BlockingIOError: reset
        except BlockingIOError:
            open_now += 1  # nothing to read and not closed: still open
        except OSError:
            pass
    print(f"adminflood: {len(socks)} connected, {open_now} still open after 1 s, "
          f"{len(socks) - open_now} closed or reset, {failed} not connected")
    time.sleep(max(0.0, seconds - 1))
    for s in socks:
        s.close()


def netslow(port, addresses, each, seconds):
    resource.setrlimit(resource.RLIMIT_NOFILE, (addresses * each + 1024,) * 2)
    socks = []
    for a in range(1, addresses + 1):
        for _ in range(each):
            try:
                s = connect(port, f"127.0.5.{a}")
                s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            except OSError:
                pass
    time.sleep(1)
    held = 0
    for s in socks:
        s.setblocking(False)
        try:
            s.recv(1)
        except BlockingIOError:
            held += 1
        except OSError:
            pass
    print(f"netslow: {len(socks)} opened from {addresses} addresses of 127.0.5.0/24, {held} held")
    time.sleep(max(0.0, seconds - 1))
    for s in socks:
        s.close()


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "idle":
        idle(port, int(sys.argv[3]), [int(p) for p in sys.argv[4:]])
    elif mode == "slowheads":
        slowheads(port, int(sys.argv[3]), [int(p) for p in sys.argv[4:]])
    elif mode == "slowloris":
        slowloris(port, int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "chunkflood":
        chunkflood(port, int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "proofspam":
        proofspam(port, sys.argv[3], int(sys.argv[4]))
    elif mode == "behindlb":
        behindlb(port, int(sys.argv[3]))
    elif mode == "adminflood":
        adminflood(port, int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "netslow":
        netslow(port, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        raise SystemExit(__doc__)

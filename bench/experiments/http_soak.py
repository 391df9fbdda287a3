#!/usr/bin/env python3
"""What a hostile HTTP client can do to a daemon's dashboard and /metrics
listeners (issue 51: bounded front, common/metrics/http_listener.h).

  python3 bench/experiments/http_soak.py [--junk-mib=1024] [--slow=200]
      [--slow-seconds=20] [--build-dir=build] [--out=FILE.md]

Starts a coordinator (gradsync-server --role=coordinator) on loopback with a
token, --dashboard_listen and --metrics_listen, then, without the token:
  1. junk GET: "GET /" followed by --junk-mib MiB of 'a' on one connection;
  2. junk POST: a 1 GiB Content-Length and --junk-mib MiB of body;
each on the dashboard and on /metrics, recording the bytes the server took
before it closed the connection and the coordinator's peak RSS (sampled
from /proc every 20 ms) against its RSS before;
  3. slowloris: --slow connections to the dashboard that each send a request
line and then one header line every 3 s (reconnecting when closed), while
an authenticated GET /api/overview is timed once a second for
--slow-seconds.
Prints a markdown table (and writes it to --out). The targets: RSS moves by
< 16 MiB under 1 GiB of junk; every authenticated request answered in < 1 s
beside 200 slow connections.
"""
import argparse
import os
import re
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RssPeak:
    """Samples a process's RSS every 20 ms until stopped."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, rss_kib(pid), False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            self.peak = max(self.peak, rss_kib(self.pid))
            time.sleep(0.02)

    def stop(self):
        self._stop = True
        self._t.join()
        return self.peak


def start_coordinator(build, workdir):
    token = os.path.join(workdir, "token")
    with open(token, "w") as f:
        f.write("soak-token-0123456789abcdef")
    os.chmod(token, 0o600)
    log = open(os.path.join(workdir, "server.log"), "w+")
    proc = subprocess.Popen(
        [os.path.join(build, "bin", "gradsync-server"), "--listen=127.0.0.1:0",
         "--role=coordinator", f"--token_file={token}",
         f"--state_dir={workdir}/state", "--dashboard_listen=127.0.0.1:0",
         "--metrics_listen=127.0.0.1:0"],
        stdout=log, stderr=subprocess.STDOUT)
    found = {}
    deadline = time.time() + 30
    while time.time() < deadline and len(found) < 2:
        log.seek(0)
        text = log.read()
        for name, pat in (("dashboard", r"dashboard at http://([0-9.:]+)/"),
                          ("metrics", r"metrics at http://([0-9.:]+)/metrics")):
            m = re.search(pat, text)
            if m:
                host, port = m.group(1).rsplit(":", 1)
                found[name] = (host, int(port))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    if len(found) < 2:
        proc.kill()
        log.seek(0)
        sys.exit("coordinator did not start:\n" + log.read())
    return proc, found, "soak-token-0123456789abcdef"


def junk(addr, head, mib):
    """Sends `head` then `mib` MiB of junk; returns MiB the server took."""
    s = socket.create_connection(addr, timeout=10)
    chunk = b"a" * (1 << 20)
    sent = 0
    try:
        s.sendall(head)
        for _ in range(mib):
            s.sendall(chunk)
            sent += 1
    except OSError:
        pass
    s.close()
    return sent


def authed_get(addr, token):
    t0 = time.time()
    try:
        s = socket.create_connection(addr, timeout=10)
        s.sendall(b"GET /api/overview HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                  + token.encode() + b"\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        ok = data.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    return ok, time.time() - t0


def slowloris(addr, n, seconds, token):
    conns = []

    def opened():
        try:
            s = socket.create_connection(addr, timeout=2)
            s.setblocking(False)
            s.send(b"GET / HTTP/1.1\r\n")
            return s
        except OSError:
            return None

    conns = [opened() for _ in range(n)]
    latencies, answered, reconnects = [], 0, 0
    start = last_trickle = time.time()
    while time.time() - start < seconds:
        ok, dt = authed_get(addr, token)
        answered += ok
        latencies.append(dt)
        if time.time() - last_trickle >= 3:
            last_trickle = time.time()
            for i, s in enumerate(conns):
                alive = s is not None
                if alive:
                    r, _, _ = select.select([s], [], [], 0)
                    if r:  # closed (or answered): the server let it go
                        alive = False
                    else:
                        try:
                            s.send(b"X-a: b\r\n")
                        except OSError:
                            alive = False
                if not alive:
                    if s is not None:
                        s.close()
                    conns[i] = opened()
                    reconnects += 1
        time.sleep(max(0.0, 1.0 - (time.time() - start) % 1.0))
    for s in conns:
        if s is not None:
            s.close()
    return answered, len(latencies), latencies, reconnects


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--junk-mib", type=int, default=1024)
    ap.add_argument("--slow", type=int, default=200)
    ap.add_argument("--slow-seconds", type=int, default=20)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gradsync-soak-") as work:
        proc, addrs, token = start_coordinator(a.build_dir, work)
        try:
            before = rss_kib(proc.pid)
            for name in ("dashboard", "metrics"):
                for what, head in (
                        ("junk GET line", b"GET /"),
                        ("junk POST body", b"POST / HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 1073741824\r\n\r\n")):
                    peak = RssPeak(proc.pid)
                    took = junk(addrs[name], head, a.junk_mib)
                    p = peak.stop()
                    rows.append((f"{name}: {what}, {a.junk_mib} MiB",
                                 f"{took} MiB sent before the server closed",
                                 f"{(p - before) / 1024:.1f} MiB"))
            answered, tried, lat, rec = slowloris(addrs["dashboard"], a.slow,
                                                  a.slow_seconds, token)
            med = statistics.median(lat) if lat else float("nan")
            rows.append((f"dashboard: {a.slow} slow connections, {a.slow_seconds} s",
                         f"{answered}/{tried} authenticated GETs answered, "
                         f"median {med * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms, "
                         f"{rec} slow reconnects",
                         f"{(rss_kib(proc.pid) - before) / 1024:.1f} MiB"))
            alive = proc.poll() is None
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    table = ["| attack (no token) | what happened | coordinator RSS change |",
             "|---|---|---|"] + [f"| {r[0]} | {r[1]} | {r[2]} |" for r in rows]
    table.append(f"\ncoordinator alive at the end: {'yes' if alive else 'NO'}; "
                 f"RSS before: {before / 1024:.1f} MiB")
    text = "\n".join(table)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())

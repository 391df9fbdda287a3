#!/usr/bin/env python3
"""Tiny network probes for tests/netem/netem_cluster_test.sh (stdlib only).

  netprobe.py udp-echo ADDR PORT           echo UDP datagrams until killed
  netprobe.py rtt ADDR PORT COUNT          median UDP round trip, prints "rtt_ms X"
  netprobe.py sink ADDR PORT CONNS         accept CONNS TCP connections, then send
                                           each a start byte and read each to EOF;
                                           prints "bytes N seconds S mbit M"
                                           (first byte received to last EOF)
  netprobe.py source ADDR PORT BYTES       connect, wait for the start byte, send
                                           BYTES zero bytes

The sink times from the first byte it receives, not from connect, so the
sender's socket buffer filling at memory speed does not count as throughput;
the start byte makes several senders begin together (no idle gap from one
starting late).
"""
import socket
import statistics
import sys
import threading
import time


def udp_echo(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)


def rtt(addr, port, count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    samples = []
    for i in range(count):
        msg = b"%d" % i
        t0 = time.perf_counter()
        s.sendto(msg, (addr, port))
        try:
            while s.recv(2048) != msg:
                pass
        except socket.timeout:
            continue  # a lost probe (or the echo not up yet)
        samples.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.05)
    if len(samples) < count // 2:
        sys.exit("rtt: only %d of %d probes answered" % (len(samples), count))
    print("rtt_ms %.3f" % statistics.median(samples))


def sink(addr, port, conns):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(conns)
    print("listening", flush=True)
    lock = threading.Lock()
    state = {"bytes": 0, "first": None, "last": None}

    def drain(c):
        buf = bytearray(1 << 20)
        while True:
            n = c.recv_into(buf)
            now = time.perf_counter()
            with lock:
                if n == 0:
                    state["last"] = now
                    break
                if state["first"] is None:
                    state["first"] = now
                state["bytes"] += n
        c.close()

    accepted = [srv.accept()[0] for _ in range(conns)]
    threads = [threading.Thread(target=drain, args=(c,)) for c in accepted]
    for t in threads:
        t.start()
    for c in accepted:
        c.sendall(b"g")
    for t in threads:
        t.join()
    secs = state["last"] - state["first"]
    print("bytes %d seconds %.3f mbit %.1f" % (state["bytes"], secs,
                                               state["bytes"] * 8 / secs / 1e6))


def source(addr, port, nbytes):
    deadline = time.time() + 5
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    s.settimeout(None)
    if s.recv(1) != b"g":
        sys.exit("source: no start byte from the sink")
    chunk = bytes(1 << 16)
    left = nbytes
    while left > 0:
        left -= s.send(chunk[:min(left, len(chunk))])
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the sink to close: all bytes were received
    s.close()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "udp-echo":
        udp_echo(args[0], int(args[1]))
    elif cmd == "rtt":
        rtt(args[0], int(args[1]), int(args[2]))
    elif cmd == "sink":
        sink(args[0], int(args[1]), int(args[2]))
    elif cmd == "source":
        source(args[0], int(args[1]), int(args[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

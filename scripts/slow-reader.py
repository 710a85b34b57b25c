#!/usr/bin/env python3
"""Slow-reader scenario of issue 10 item 5, against a running server (hyperbloom or redis-server).

SET bigkey to a 1 MiB value; then CLIENTS connections each pipeline GETS x `GET bigkey` and never
read a reply, while one more connection sends PINGs one at a time and times each round trip.
Every 100 ms the server's VmRSS is sampled from /proc/PID/status. After SECONDS it prints one line:

  clients=N gets=G rss_start_mb=.. rss_peak_mb=.. rss_end_mb=.. pings=.. ping_p50_ms=.. ping_p99_ms=.. ping_max_ms=.. alive=yes|no

A server that dies (OOM, address-space cap) prints alive=no; a PING that gets no answer within
the run counts as SECONDS. Measurement only: nothing here is asserted.

Usage: scripts/slow-reader.py PORT SERVER_PID [CLIENTS=1] [GETS=200000] [SECONDS=6]
"""
import socket
import sys
import threading
import time

port = int(sys.argv[1])
pid = sys.argv[2]
clients = int(sys.argv[3]) if len(sys.argv) > 3 else 1
gets = int(sys.argv[4]) if len(sys.argv) > 4 else 200000
seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 6.0


def rss_mb():
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def read_reply(sock, buf):
    """Reads one simple reply line (PING's +PONG, SET's +OK)."""
    while b"\r\n" not in buf[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf[0] += chunk
    line, buf[0] = buf[0].split(b"\r\n", 1)
    return line


c = socket.create_connection(("127.0.0.1", port))
v = b"v" * (1 << 20)
c.sendall(b"*3\r\n$3\r\nSET\r\n$6\r\nbigkey\r\n$%d\r\n" % len(v) + v + b"\r\n")
buf = [b""]
assert read_reply(c, buf) == b"+OK"
start_rss = rss_mb()

req = b"*2\r\n$3\r\nGET\r\n$6\r\nbigkey\r\n" * gets
slow = []
for _ in range(clients):
    s = socket.create_connection(("127.0.0.1", port))
    slow.append(s)

    def w(s=s):
        try:
            s.sendall(req)
        except OSError:
            pass

    threading.Thread(target=w, daemon=True).start()

samples = []
stop = threading.Event()


def sampler():
    while not stop.is_set():
        r = rss_mb()
        if r is not None:
            samples.append(r)
        time.sleep(0.1)


threading.Thread(target=sampler, daemon=True).start()

lat = []
deadline = time.time() + seconds
c.settimeout(seconds)
alive = True
while time.time() < deadline:
    t = time.time()
    try:
        c.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert read_reply(c, buf) == b"+PONG"
        lat.append((time.time() - t) * 1000)
    except (OSError, ConnectionError, AssertionError):
        lat.append(seconds * 1000)
        alive = False
        break
    time.sleep(0.01)
stop.set()
end_rss = rss_mb()
if end_rss is None:
    alive = False
lat.sort()


def pct(p):
    return lat[min(len(lat) - 1, int(len(lat) * p))] if lat else float("nan")


print(
    f"clients={clients} gets={gets} rss_start_mb={start_rss:.0f} "
    f"rss_peak_mb={max(samples) if samples else float('nan'):.0f} "
    f"rss_end_mb={end_rss if end_rss is not None else float('nan'):.0f} pings={len(lat)} "
    f"ping_p50_ms={pct(0.5):.2f} ping_p99_ms={pct(0.99):.2f} ping_max_ms={lat[-1] if lat else 0:.2f} "
    f"alive={'yes' if alive else 'no'}",
    flush=True,
)
for s in slow:
    s.close()

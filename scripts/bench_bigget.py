#!/usr/bin/env python3
"""PING latency while many clients GET a large value (issue 10 item 5: no copy under the lock).

For each server (hyperbloom from the release build, then redis-server): `SET big <SIZE bytes>`, then
`redis-benchmark -c CLIENTS -n N GET big` runs in the background, and meanwhile one more connection
sends PING every 20 ms and times each round trip. Prints p50 / p99 / max of those PINGs.

  python3 scripts/bench_bigget.py                      # 200 clients, 8 MB value
  python3 scripts/bench_bigget.py --clients 50 --size 1048576 --hyperbloom /tmp/hb-old
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_load  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run(server: bench_load.Server, args) -> dict:
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(bench_load.encode("SET", "big", b"x" * args.size))
    assert s.recv(64).startswith(b"+OK")
    bench = subprocess.Popen(["redis-benchmark", "-p", str(server.port), "-c", str(args.clients),
                              "-n", str(args.requests), "-q", "GET", "big"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1.0)  # let every client connect and start reading
    lat = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end and bench.poll() is None:
        t0 = time.perf_counter()
        s.sendall(b"PING\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            buf += s.recv(64)
        lat.append(time.perf_counter() - t0)
        time.sleep(0.02)
    still_running = bench.poll() is None
    bench.kill()
    bench.wait()
    s.close()
    return {"n": len(lat), "p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat),
            "ran_out": not still_running}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--size", type=int, default=8 * 1024 * 1024)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--hyperbloom", default=str(bench_load.ROOT / "target" / "release" / "hyperbloom"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-module", default=None)
    ap.add_argument("--only-server", default=None)
    args = ap.parse_args()
    args.redis_benchmark = None
    print(f"{args.clients} clients GET a {args.size}-byte value; PING every 20 ms for {args.seconds:.0f} s")
    print("| server | PINGs | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for name, argv in bench_load.server_argv(args, args.hyperbloom):
        if args.only_server and name != args.only_server:
            continue
        srv = bench_load.Server(name, argv)
        try:
            r = run(srv, args)
        finally:
            srv.stop()
        note = " (benchmark ended early)" if r["ran_out"] else ""
        print(f"| {name}{note} | {r['n']} | {r['p50'] * 1e3:.1f} | {r['p99'] * 1e3:.1f} | "
              f"{r['max'] * 1e3:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The kernel's share of a request, and what io_uring takes off it (issue 15, target 1).

Pinned (server on core 1, redis-benchmark on core 0), `PING_MBULK -c 50` at each -P: server CPU
µs per request (utime+stime from /proc/PID/stat), requests/s, and (`--syscalls`) syscalls and
voluntary context switches per request (`perf stat -e raw_syscalls:sys_enter`), for:

  redis       redis-server (Debian 7.0.15)
  hyperbloom  the release build (current-thread runtime when pinned)
  epoll       examples/uring_ping.rs, Redis's loop: epoll_wait, read, write
  uring       examples/uring_ping.rs, one receive in flight per connection, every send and receive
              of a batch of completions submitted with the wait in one io_uring_enter
  uring-coop / uring-defer   the same with SINGLE_ISSUER|COOP_TASKRUN / SINGLE_ISSUER|DEFER_TASKRUN

All servers are started once and run back to back in every round, the order rotating, so slow
drifts of the machine's load hit all alike; the table gives medians and the 1-minute load average.

Usage: cargo build --release --example uring_ping
       python3 scripts/uring_floor.py [-n 300000] [-r 3] [-P 1,16] [--syscalls] [--only epoll,uring]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_load as bl  # noqa: E402

ALL = ["redis", "hyperbloom", "epoll", "uring", "uring-coop", "uring-defer"]


def argv_for(name: str, args):
    ex = str(Path(args.target) / "release" / "examples" / "uring_ping")
    hb = str(Path(args.target) / "release" / "hyperbloom") if not args.hyperbloom else args.hyperbloom
    if name == "redis":
        return lambda port, d: [args.redis_server, "--port", str(port), "--save", "", "--appendonly", "no",
                                "--bind", "127.0.0.1", "--dir", d, "--loglevel", "warning"]
    if name == "hyperbloom":
        return lambda port, d: [hb, "--port", str(port), "--save", "", "--bind", "127.0.0.1", "--dir", d,
                                "--loglevel", "warning"]
    return lambda port, d: [ex, name, str(port)]


class Plain(bl.Server):
    """A server without INFO (the uring_ping example)."""

    def _version(self) -> str:
        return "-"


def syscalls(pid: int, run) -> float:
    """raw_syscalls:sys_enter events of `pid` while `run()` runs."""
    out = tempfile.mktemp(prefix="perf-", suffix=".csv")
    p = subprocess.Popen(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p", str(pid), "-o", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        run()
    finally:
        p.send_signal(2)
        p.wait()
    try:
        for line in Path(out).read_text().splitlines():
            if "sys_enter" in line:
                return float(line.split(",")[0])
    finally:
        Path(out).unlink(missing_ok=True)
    return 0.0


def vol_switches(pid: int) -> int:
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        for line in (t / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                total += int(line.split()[1])
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=300000)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("-c", "--clients", type=int, default=50)
    ap.add_argument("-P", "--pipelines", default="1,16")
    ap.add_argument("--only", default=",".join(ALL), help="comma-separated: " + ",".join(ALL))
    ap.add_argument("--syscalls", action="store_true", help="also count syscalls (perf stat)")
    ap.add_argument("--hyperbloom", default=None)
    ap.add_argument("--target", default=os.environ.get("CARGO_TARGET_DIR") or str(bl.ROOT / "target"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark"))
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n in ALL]
    pipelines = [int(p) for p in args.pipelines.split(",")]
    wrapper = ["taskset", "-c", bl.SERVER_CORE]
    servers = []
    rps: dict = {}
    cpu: dict = {}
    sc: dict = {}
    cs: dict = {}
    loads: list[float] = []
    try:
        for n in names:
            cls = bl.Server if n in ("redis", "hyperbloom") else Plain
            servers.append(cls(n, argv_for(n, args), wrapper))
        bench_args = argparse.Namespace(clients=args.clients, requests=args.requests, threads=0, pin=True)
        for rnd in range(args.rounds):
            k = rnd % len(servers)
            order = servers[k:] + servers[:k]
            print(f"round {rnd + 1}/{args.rounds}: {' then '.join(s.name for s in order)}", file=sys.stderr)
            for p in pipelines:
                for s in order:
                    loads.append(os.getloadavg()[0])
                    before, v0 = s.cpu_seconds(), vol_switches(s.proc.pid)
                    got = {}

                    def run():
                        got.update(bl.benchmark(args.redis_benchmark, s.port, bench_args, p, ["-t", "ping_mbulk"]))

                    calls = None
                    if args.syscalls:
                        calls = syscalls(s.proc.pid, run)
                    else:
                        run()
                    spent = s.cpu_seconds() - before
                    key = (s.name, p)
                    for v in got.values():
                        rps.setdefault(key, []).append(v)
                    cpu.setdefault(key, []).append(spent / args.requests * 1e6)
                    cs.setdefault(key, []).append((vol_switches(s.proc.pid) - v0) / args.requests)
                    if calls is not None:
                        sc.setdefault(key, []).append(calls / args.requests)
                    print(f"  {s.name} -P {p}: {list(got.values())} rps, {cpu[key][-1]:.2f} µs/req", file=sys.stderr)
    finally:
        for s in servers:
            s.stop()
    med = lambda d, k: statistics.median(d[k]) if d.get(k) else None  # noqa: E731
    print()
    print(f"PING_MBULK, redis-benchmark -c {args.clients} -n {args.requests}, {args.rounds} rounds (order "
          f"rotating), medians; {bl.machine_line(bench_args)}; load average {min(loads):.1f}–{max(loads):.1f} "
          f"during the runs. CPU = server utime+stime per request; 'vs epoll' = epoll's CPU / this one's.")
    print()
    print("| server | -P | rps | CPU µs/req | vs epoll | syscalls/req | vol. switches/req |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for p in pipelines:
        base = med(cpu, ("epoll", p))
        for n in names:
            r, c = med(rps, (n, p)), med(cpu, (n, p))
            s_, w = med(sc, (n, p)), med(cs, (n, p))
            vs = f"{base / c:.2f}" if base and c else "—"
            f = lambda v, spec: format(v, spec) if v is not None else "—"  # noqa: E731
            print(f"| {n} | {p} | {f(r, ',.0f')} | {f(c, '.2f')} | {vs} | {f(s_, '.2f')} | {f(w, '.3f')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

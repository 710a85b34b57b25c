#!/usr/bin/env python3
"""Transactions of reads, one core: hyperbloom against Redis + RedisBloom, per request.

redis-benchmark repeats one command; it cannot send MULTI ... EXEC. This script sends what a
redis-py pipeline sends (`transaction=True`, its default): MULTI, K reads, EXEC in one write,
then reads the K + 2 replies, over one connection, so each transaction is one batch on the
server. The same reads sent bare (K + 2 of them, no MULTI) are the comparison. Per server and
workload it prints either

  - server CPU per request (utime + stime of the server process, /proc/PID/stat, divided by the
    requests; the client here is Python and sets the pace, so throughput says nothing), or
  - with --callgrind, userspace instructions per request (the server under valgrind's callgrind;
    its total minus an idle server's, divided by the requests), as scripts/bench_load.py counts.

    scripts/bench_multi.py [--callgrind] [-n TRANSACTIONS] [-k READS] [-r ROUNDS]
                           [--redis-module target/refbloom/redisbloom.so]

Rounds alternate the servers; medians are printed. Needs redis-server (Debian's 7.0) and, for the
reference's BF.EXISTS, RedisBloom (`scripts/fetch-redisbloom.sh`).
"""

import argparse
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_load import Server, call, encode, frame_len, machine_line, resolve_redis_module, server_argv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# (label, the reads of transaction t (K, or K + 2 bare), whether wrapped in MULTI/EXEC)
WORKLOADS = [
    ("MULTI, {k} x BF.EXISTS, EXEC", lambda t, k: [("BF.EXISTS", "bf", f"item{(t * k + i) % 2000}") for i in range(k)], True),
    ("{k2} x BF.EXISTS, bare", lambda t, k: [("BF.EXISTS", "bf", f"item{(t * k + i) % 2000}") for i in range(k + 2)], False),
    ("MULTI, {k} x GET, EXEC", lambda t, k: [("GET", f"key:{(t * k + i) % 10000}") for i in range(k)], True),
    ("{k2} x GET, bare", lambda t, k: [("GET", f"key:{(t * k + i) % 10000}") for i in range(k + 2)], False),
]


def prepare(port: int) -> None:
    """A filter of 1000 items (half of those asked for) and 10k strings."""
    call(port, "BF.RESERVE", "bf", "0.01", "100000")
    payload = b"".join(encode("BF.ADD", "bf", f"item{i}") for i in range(0, 2000, 2))
    payload += b"".join(encode("SET", f"key:{i}", "value") for i in range(10000))
    expected = 1000 + 10000
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(payload)
        read_replies(s, expected)


def read_replies(s: socket.socket, n: int) -> bytes:
    """Reads exactly `n` replies; the last one's bytes."""
    buf, at, last = b"", 0, b""
    while n:
        end = frame_len(buf, at) if len(buf) > at else None
        if end is None:
            chunk = s.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            buf = buf[at:] + chunk
            at = 0
            continue
        last = buf[at:end]
        if last.startswith(b"-"):
            raise RuntimeError(f"error reply: {last!r}")
        at = end
        n -= 1
    return last


def drive(port: int, workload, transactions: int, k: int) -> int:
    """Sends the workload's transactions, one batch each; the requests sent."""
    _, reads, wrapped = workload
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for t in range(transactions):
            cmds = [encode(*c) for c in reads(t, k)]
            if wrapped:
                cmds = [encode("MULTI")] + cmds + [encode("EXEC")]
            s.sendall(b"".join(cmds))
            last = read_replies(s, len(cmds))
            if wrapped and not last.startswith(b"*%d\r\n" % k):
                raise RuntimeError(f"EXEC answered {last[:40]!r}")
            sent += len(cmds)
    return sent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--transactions", type=int, default=None,
                    help="transactions per run (default 20000, 3000 with --callgrind)")
    ap.add_argument("-k", "--reads", type=int, default=14, help="reads per transaction (default 14: 16 requests)")
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--callgrind", action="store_true", help="count instructions instead of CPU time")
    ap.add_argument("--redis-module", default="auto", help="RedisBloom .so for the reference (default: scripts/fetch-redisbloom.sh's)")
    ap.add_argument("--hyperbloom", default=str(ROOT / "target" / "release" / "hyperbloom"))
    ap.add_argument("--redis-server", default="redis-server")
    args = ap.parse_args()
    args.redis_module = resolve_redis_module(args.redis_module)
    if not args.redis_module:
        print("bench_multi: no RedisBloom for the reference (scripts/fetch-redisbloom.sh)", file=sys.stderr)
        return 2
    n = args.transactions or (3000 if args.callgrind else 20000)
    started = time.monotonic()
    results: dict[tuple[str, str], list[float]] = {}

    def run(name, argv, workload):
        """One server, one workload: CPU seconds or Ir per request (None for the idle run)."""
        out = tempfile.mktemp(prefix=f"cg-multi-{name}-", suffix=".out")
        wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] if args.callgrind else []
        s = Server(name, argv, wrapper, ready_timeout=300)
        try:
            prepare(s.port)
            before = s.cpu_seconds()
            sent = drive(s.port, workload, n, args.reads) if workload else 0
            cpu = s.cpu_seconds() - before
        finally:
            s.stop(timeout=300)
        if not args.callgrind:
            return cpu / sent * 1e6 if sent else None
        try:
            m = re.search(r"^(?:summary|totals):\s*(\d+)", Path(out).read_text(errors="replace"), re.M)
        finally:
            Path(out).unlink(missing_ok=True)
        return (int(m.group(1)), sent)

    servers = server_argv(args, args.hyperbloom)
    idle = {}
    if args.callgrind:
        for name, argv in servers:
            idle[name] = run(name, argv, None)[0]
    for _ in range(1 if args.callgrind else args.rounds):
        for workload in WORKLOADS:
            for name, argv in servers:
                got = run(name, argv, workload)
                value = (got[0] - idle[name]) / got[1] if args.callgrind else got
                results.setdefault((name, workload[0]), []).append(value)
                print(f"  {name} {workload[0].format(k=args.reads, k2=args.reads + 2)}: {value:,.3f}", file=sys.stderr)
    unit = "Ir a request" if args.callgrind else "µs of server CPU a request"
    print()
    print(f"transactions of reads, one connection, {n} transactions of K = {args.reads} reads, {unit}"
          f"{'' if args.callgrind else f', medians of {args.rounds} rounds'}; {machine_line(argparse.Namespace(pin=False))}; "
          f"{time.monotonic() - started:.0f}s")
    print()
    print("| workload | hyperbloom | redis + RedisBloom | redis/hyperbloom |")
    print("|---|---:|---:|---:|")
    fmt = (lambda v: f"{v:,.0f}") if args.callgrind else (lambda v: f"{v:.2f}")
    for label, _, _ in WORKLOADS:
        h = statistics.median(results[("hyperbloom", label)])
        r = statistics.median(results[("redis", label)])
        print(f"| {label.format(k=args.reads, k2=args.reads + 2)} | {fmt(h)} | {fmt(r)} | {r / h:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Replication under load, hyperbloom primary -> hyperbloom replicas (issue 12), in one run:

1. the primary's throughput with 0, 1 and 2 replicas attached (redis-benchmark, pipelined SET and
   BF.ADD, the same parameters each time, several rounds alternating the replica count);
2. the replication lag while that load runs: every `--sample-ms` the primary's
   `master_repl_offset` and then each replica's `slave_repl_offset` are read (one INFO each over
   kept-open connections), and the difference in bytes is recorded; p50/p99/max are printed per
   replica count, counting only samples where the replica's link is up (not while it loads a
   snapshot). The replica is read after the primary, so a sample slightly understates the lag.

After the first round the primary keeps its backlog (repl-backlog-ttl), so "0 replicas" in later
rounds still feeds it, as a Redis primary does; round 1 shows the cost without any backlog.

Release binary (HYPERBLOOM_BIN or target/release/hyperbloom), ephemeral loopback ports, every
server stopped at the end. Usage: scripts/bench_repl.py [-n 200000] [-P 16] [-c 50] [--rounds 3]
[--server redis]: the same run with Debian's redis-server as primary and replicas (SET only: it
has no RedisBloom), to tell what replication costs from what three servers and the benchmark
cost on a small machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = os.environ.get("HYPERBLOOM_BIN") or str(ROOT / "target" / "release" / "hyperbloom")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    """A minimal RESP client: enough for INFO and simple commands."""

    def __init__(self, port: int):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def call(self, *args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self._reply()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self) -> bytes:
        line = self._line()
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return b""
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line[1:]

    def call_retry(self, *args, timeout: float = 60) -> bytes:
        """`call`, retried while the server answers -LOADING (a replica loading its snapshot)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.call(*args)
            except RuntimeError as e:
                if "LOADING" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def field(self, section: str, name: str) -> str | None:
        for l in self.call("INFO", section).decode().splitlines():
            if l.startswith(name + ":"):
                return l.split(":", 1)[1]
        return None


def start(work: Path, name: str, binary: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    d = work / name
    d.mkdir()
    p = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--dir", str(d), "--loglevel", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            Conn(port).call("PING")
            return p, port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def benchmark(port: int, args) -> dict[str, float]:
    out = {}
    tests = [("SET", ["-t", "set"])]
    if args.server == "hyperbloom":
        tests.append(("BF.ADD", ["BF.ADD", "bf", "__rand_int__"]))
    for test, cmd in tests:
        r = subprocess.run(["redis-benchmark", "-p", str(port), "-q", "--csv", "-n", str(args.n),
                            "-c", str(args.c), "-P", str(args.P), "-r", "1000000", *cmd],
                           capture_output=True, text=True, check=True)
        for line in r.stdout.splitlines():
            cells = [c.strip('"') for c in line.split(",")]
            if len(cells) >= 2 and cells[0] != "test":
                out[test] = float(cells[1])
    return out


def sampler(primary: int, replicas: list[int], every_s: float, stop: threading.Event,
            lags: list[int]):
    p = Conn(primary)
    rs = [Conn(r) for r in replicas]
    while not stop.is_set():
        off = int(p.field("replication", "master_repl_offset") or 0)
        for r in rs:
            try:
                info = r.call("INFO", "replication").decode()
            except RuntimeError:  # -LOADING
                continue
            fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
            # Only a replica that streams: a Redis primary shows a replica online as soon as
            # the snapshot is sent, while the replica may still be loading it.
            if fields.get("master_link_status") == "up" and "slave_repl_offset" in fields:
                lags.append(off - int(fields["slave_repl_offset"]))
        time.sleep(every_s)


def pct(xs: list[int], q: float) -> int:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200000)
    ap.add_argument("-P", type=int, default=16)
    ap.add_argument("-c", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample-ms", type=float, default=10)
    ap.add_argument("--server", choices=["hyperbloom", "redis"], default="hyperbloom")
    args = ap.parse_args()
    binary = BIN if args.server == "hyperbloom" else shutil.which("redis-server")
    assert shutil.which("redis-benchmark"), "redis-benchmark (Debian redis-tools) is needed"
    work = Path(tempfile.mkdtemp(prefix="hb-bench-repl-"))
    procs = []
    try:
        pp, pport = start(work, "p", binary)
        procs.append(pp)
        reps = []
        for i in range(2):
            rp, rport = start(work, f"r{i}", binary)
            procs.append(rp)
            reps.append(rport)
        p = Conn(pport)
        if args.server == "hyperbloom":
            p.call("BF.RESERVE", "bf", "0.01", "10000000")
        results: dict[int, list[dict[str, float]]] = {0: [], 1: [], 2: []}
        lags: dict[int, list[int]] = {0: [], 1: [], 2: []}

        def attach(k: int):
            # Exactly the first k replicas follow the primary.
            for i, rport in enumerate(reps):
                c = Conn(rport)
                argv = ("REPLICAOF", "127.0.0.1", str(pport)) if i < k else ("REPLICAOF", "NO", "ONE")
                c.call_retry(*argv)
            deadline = time.monotonic() + 60
            while True:
                n = int(p.field("replication", "connected_slaves") or 0)
                info = p.call("INFO", "replication").decode()
                online = info.count("state=online")
                if n == k and online == k:
                    return
                assert time.monotonic() < deadline, f"replicas did not come online: {info}"
                time.sleep(0.05)

        for rnd in range(args.rounds):
            for k in (0, 1, 2):
                attach(k)
                stop = threading.Event()
                t = threading.Thread(target=sampler, args=(pport, reps[:k], args.sample_ms / 1000,
                                                            stop, lags[k]))
                t.start()
                results[k].append(benchmark(pport, args))
                stop.set()
                t.join()
                print(f"round {rnd + 1}, {k} replica(s): {results[k][-1]}", flush=True)
        print()
        print(f"redis-benchmark -n {args.n} -c {args.c} -P {args.P} -r 1000000, median of {args.rounds} rounds")
        base = {t: statistics.median(r[t] for r in results[0]) for t in results[0][0]}
        for k in (0, 1, 2):
            row = []
            for test in base:
                med = statistics.median(r[test] for r in results[k])
                row.append(f"{test} {med:,.0f} req/s ({med / base[test]:.2f}x)")
            line = f"{k} replica(s): " + ", ".join(row)
            if k > 0:
                xs = lags[k]
                line += (f" | offset lag bytes p50 {pct(xs, 0.5):,} p99 {pct(xs, 0.99):,}"
                         f" max {max(xs) if xs else 0:,} ({len(xs)} samples)")
            print(line)
        # Every replica ends with the primary's data.
        for rport in reps:
            Conn(rport).call_retry("REPLICAOF", "127.0.0.1", str(pport))
        attach(2)
        p.call("WAIT", "2", "10000")
        want = p.call("DBSIZE")
        for rport in reps:
            got = Conn(rport).call_retry("DBSIZE")
            print(f"replica :{rport} DBSIZE {got.decode()} (primary {want.decode()})")
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            try:
                pr.wait(10)
            except subprocess.TimeoutExpired:
                pr.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

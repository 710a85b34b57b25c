#!/usr/bin/env python3
"""Load benchmark: redis-benchmark against hyperbloom and a real redis-server, in one run.

Both servers run on this machine on free ports (hyperbloom from the release build; redis-server from
the Debian package with `--save "" --appendonly no`). For every test and pipeline depth the two are
run back to back, alternating which goes first each round, so slow drifts of the machine's load hit
both alike. The table gives the median requests per second over the rounds and the ratio
hyperbloom/redis (above 1 = hyperbloom faster).

Tests: redis-benchmark's own PING_INLINE, PING_MBULK, SET, GET, INCR, MSET (`-t ... --csv`), then custom
commands for the probabilistic families (BF.ADD / BF.EXISTS / BF.MADD of 10, PFADD, PFCOUNT of one key,
PFCOUNT and PFMERGE of three dense HLLs, CF.ADD / CF.EXISTS, TDIGEST.ADD / QUANTILE, CMS.INCRBY /
CMS.QUERY on a 2000 × 7 sketch, TOPK.ADD on a k = 50, 2000 × 7 sketch). A test runs on a server only if that
server knows its command (COMMAND INFO), so Redis runs the core and PF tests only, and hyperbloom runs
whatever exists in the build.

Usage: scripts/bench-load.sh [-n REQUESTS] [-r ROUNDS] [--quick] [-c CLIENTS] [-P 16,1] [--only REGEX]
Only the Python standard library is needed.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# redis-benchmark's built-in tests, as named in its -t option and its CSV output.
STANDARD = [
    ("ping_inline", "PING_INLINE", "ping"),
    ("ping_mbulk", "PING_MBULK", "ping"),
    ("set", "SET", "set"),
    ("get", "GET", "get"),
    ("incr", "INCR", "incr"),
    ("mset", "MSET (10 keys)", "mset"),
]

# Custom tests: (label, command words, commands the server must know).
CUSTOM = [
    ("BF.ADD", ["BF.ADD", "bench:bf", "__rand_int__"], ["bf.add"]),
    ("BF.EXISTS", ["BF.EXISTS", "bench:bf", "__rand_int__"], ["bf.exists"]),
    ("BF.MADD (10 items)", ["BF.MADD", "bench:bf"] + ["__rand_int__"] * 10, ["bf.madd"]),
    ("PFADD", ["PFADD", "bench:hll", "__rand_int__"], ["pfadd"]),
    ("PFCOUNT (1 key)", ["PFCOUNT", "bench:hll"], ["pfcount"]),
    ("PFCOUNT (3 dense)", ["PFCOUNT", "bench:d1", "bench:d2", "bench:d3"], ["pfcount"]),
    ("PFMERGE (3 dense)", ["PFMERGE", "bench:dst", "bench:d1", "bench:d2", "bench:d3"], ["pfmerge"]),
    ("CF.ADD", ["CF.ADD", "bench:cf", "__rand_int__"], ["cf.add"]),
    ("CF.EXISTS", ["CF.EXISTS", "bench:cf", "__rand_int__"], ["cf.exists"]),
    ("TDIGEST.ADD", ["TDIGEST.ADD", "bench:td", "__rand_int__"], ["tdigest.add"]),
    ("TDIGEST.QUANTILE (2)", ["TDIGEST.QUANTILE", "bench:tdq", "0.5", "0.99"], ["tdigest.quantile"]),
    ("CMS.INCRBY", ["CMS.INCRBY", "bench:cms", "__rand_int__", "1"], ["cms.incrby"]),
    ("CMS.QUERY", ["CMS.QUERY", "bench:cms", "__rand_int__"], ["cms.query"]),
    ("TOPK.ADD", ["TOPK.ADD", "bench:topk", "__rand_int__"], ["topk.add"]),
]


# ---------------------------------------------------------------------------------------------
# A minimal RESP client for setup (replies read as raw frames).
# ---------------------------------------------------------------------------------------------


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def frame_len(buf: bytes, at: int = 0):
    end = buf.find(b"\r\n", at)
    if end < 0:
        return None
    kind, nxt = buf[at:at + 1], end + 2
    if kind in b"+-:_#,(":
        return nxt
    n = int(buf[at + 1:end])
    if kind in b"$=!":
        return nxt if n < 0 else (nxt + n + 2 if len(buf) >= nxt + n + 2 else None)
    pos = nxt
    for _ in range(max(n, 0) * (2 if kind in b"%|" else 1)):
        pos = frame_len(buf, pos)
        if pos is None:
            return None
    return pos


def call(port: int, *args) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(encode(*args))
        buf = b""
        while True:
            n = frame_len(buf) if buf else None
            if n is not None:
                return buf[:n]
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk


def has_command(port: int, name: str) -> bool:
    reply = call(port, "COMMAND", "INFO", name)
    return not reply.startswith((b"*1\r\n$-1", b"*1\r\n*-1", b"*1\r\n_", b"-"))


# ---------------------------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name: str, argv_for_port):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"bench-{name}-")
        self.port = free_port()
        self.log = open(Path(self.dir) / "server.log", "wb")
        self.proc = subprocess.Popen(argv_for_port(self.port, self.dir), stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {(Path(self.dir) / 'server.log').read_text()}")
            try:
                if call(self.port, "PING").startswith(b"+PONG"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after 30s")
            time.sleep(0.02)
        self.version = self._version()

    def _version(self) -> str:
        info = call(self.port, "INFO", "server").decode(errors="replace")
        m = re.search(r"redis_version:(\S+)", info)
        return m.group(1) if m else "?"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def prepare(server: Server) -> None:
    """Keys the custom tests read: large filters (so adds do not measure growth) and dense HLLs."""
    call(server.port, "FLUSHALL")
    if has_command(server.port, "bf.reserve"):
        call(server.port, "BF.RESERVE", "bench:bf", "0.01", "10000000")
    if has_command(server.port, "cf.reserve"):
        call(server.port, "CF.RESERVE", "bench:cf", "4000000")
    if has_command(server.port, "tdigest.create"):
        call(server.port, "TDIGEST.CREATE", "bench:td")
        call(server.port, "TDIGEST.CREATE", "bench:tdq")
        call(server.port, "TDIGEST.ADD", "bench:tdq", *[str((i * 7919) % 100003) for i in range(20000)])
    if has_command(server.port, "cms.initbyprob"):
        call(server.port, "CMS.INITBYPROB", "bench:cms", "0.001", "0.01")
    if has_command(server.port, "topk.reserve"):
        call(server.port, "TOPK.RESERVE", "bench:topk", "50", "2000", "7", "0.925")
    if has_command(server.port, "pfadd"):
        for key in ("bench:hll", "bench:d1", "bench:d2", "bench:d3"):
            call(server.port, "PFADD", key, *[f"{key}:{i}" for i in range(20000)])


# ---------------------------------------------------------------------------------------------
# Running redis-benchmark
# ---------------------------------------------------------------------------------------------


def benchmark(bench_bin: str, port: int, args: argparse.Namespace, pipeline: int, extra: list[str]):
    """Runs redis-benchmark --csv; returns {test name: rps} (empty on failure, with a warning)."""
    cmd = [bench_bin, "-h", "127.0.0.1", "-p", str(port), "-c", str(args.clients), "-n", str(args.requests),
           "-P", str(pipeline), "-r", "1000000", "-q", "--csv"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    cmd += extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    out = {}
    for row in csv.reader(io.StringIO(p.stdout)):
        if len(row) >= 2 and row[0] != "test":
            try:
                out[row[0]] = float(row[1])
            except ValueError:
                pass
    if p.returncode != 0 or not out or "rror" in p.stdout + p.stderr:
        print(f"  warning: {' '.join(cmd[5:])}: exit {p.returncode} {p.stderr.strip()[:200]}",
              file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=None, help="requests per test (default 100000; 20000 with --quick)")
    ap.add_argument("-r", "--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--quick", action="store_true", help="fewer requests per test: a smoke run, noisier numbers")
    ap.add_argument("-c", "--clients", type=int, default=50)
    ap.add_argument("-P", "--pipelines", default="16,1", help="pipeline depths, comma-separated (default 16,1)")
    ap.add_argument("--threads", type=int, default=0, help="redis-benchmark --threads (default: its single thread)")
    ap.add_argument("--only", default=None, help="regex: run only the tests whose label matches")
    ap.add_argument("--hyperbloom", default=None, help="hyperbloom binary (default: the release build)")
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark"))
    args = ap.parse_args()
    if args.requests is None:
        args.requests = 20000 if args.quick else 100000
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    hb_bin = args.hyperbloom or str(target / "release" / "hyperbloom")
    for what, path in (("hyperbloom", hb_bin), ("redis-server", args.redis_server),
                       ("redis-benchmark", args.redis_benchmark)):
        if not path or not Path(path).exists():
            print(f"bench-load: {what} not found ({path})", file=sys.stderr)
            return 1
    pipelines = [int(x) for x in args.pipelines.split(",")]
    only = re.compile(args.only) if args.only else None

    servers = []
    try:
        hb = Server("hyperbloom", lambda port, d: [hb_bin, "--port", str(port), "--save", "", "--bind",
                                                   "127.0.0.1", "--dir", d, "--loglevel", "warning"])
        servers.append(hb)
        rd = Server("redis", lambda port, d: [args.redis_server, "--port", str(port), "--save", "",
                                              "--appendonly", "no", "--daemonize", "no", "--bind",
                                              "127.0.0.1", "--dir", d, "--loglevel", "warning"])
        servers.append(rd)
        for s in servers:
            prepare(s)

        # What each server can run.
        std = [t for t in STANDARD if not only or only.search(t[1])]
        std_ok = {s.name: [t for t in std if has_command(s.port, t[2])] for s in servers}
        custom = [t for t in CUSTOM if not only or only.search(t[0])]
        custom_ok = {s.name: [t for t in custom if all(has_command(s.port, c) for c in t[2])] for s in servers}

        results: dict[tuple[str, int, str], list[float]] = {}
        started = time.monotonic()
        for rnd in range(args.rounds):
            order = servers if rnd % 2 == 0 else servers[::-1]
            print(f"round {rnd + 1}/{args.rounds} ({' then '.join(s.name for s in order)} for each test)",
                  file=sys.stderr)
            for pipeline in pipelines:
                for s in order:
                    names = ",".join(t[0] for t in std_ok[s.name])
                    if names:
                        for name, rps in benchmark(args.redis_benchmark, s.port, args, pipeline,
                                                   ["-t", names]).items():
                            results.setdefault((s.name, pipeline, name), []).append(rps)
                for label, words, _ in custom:
                    for s in order:
                        if (label, words, _) in custom_ok[s.name]:
                            for _name, rps in benchmark(args.redis_benchmark, s.port, args, pipeline,
                                                        words).items():
                                results.setdefault((s.name, pipeline, label), []).append(rps)
        elapsed = time.monotonic() - started

        # The table.
        labels = [t[1] for t in std] + [t[0] for t in custom]
        cpu = platform.processor() or platform.machine()
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        print()
        print(f"hyperbloom {hb.version}-compat vs redis-server {rd.version}; "
              f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores ({cpu}); "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"redis-benchmark -c {args.clients} -n {args.requests} -r 1000000, {args.rounds} rounds, "
              f"median rps, {elapsed:.0f}s")
        print()
        print("| test | -P | hyperbloom rps | redis rps | hyperbloom/redis |")
        print("|---|---:|---:|---:|---:|")
        for pipeline in pipelines:
            for label in labels:
                h = results.get(("hyperbloom", pipeline, label))
                r = results.get(("redis", pipeline, label))
                if not h and not r:
                    continue
                hm = statistics.median(h) if h else None
                rm = statistics.median(r) if r else None
                ratio = f"{hm / rm:.2f}" if hm and rm else "—"
                fmt = lambda v: f"{v:,.0f}" if v else "—"  # noqa: E731
                print(f"| {label} | {pipeline} | {fmt(hm)} | {fmt(rm)} | {ratio} |")
        skipped = [t[1] for t in std if t not in std_ok["hyperbloom"]]
        skipped += [t[0] for t in custom if t not in custom_ok["hyperbloom"]]
        if skipped:
            print(f"\nnot run on hyperbloom (command missing): {', '.join(skipped)}")
        return 0
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    sys.exit(main())

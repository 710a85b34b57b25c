#!/usr/bin/env python3
"""Memory per key: RSS growth after loading keys with `redis-cli --pipe`, hyperbloom and the reference.

For each data set a fresh server starts (hyperbloom from the release build; the reference is
redis-server with `--save "" --appendonly no` and RedisBloom 2.6.12 loaded), its VmRSS is read from
/proc/PID/status, N commands are piped in with `redis-cli --pipe`, and the growth divided by N is
the figure. RSS is not load-sensitive, so this is reproducible on a busy machine.

  python3 scripts/bench_memory.py                    # 1M keys of each set (issue 15, target 3)
  python3 scripts/bench_memory.py --sets strings --keys 100000,1000000   # a curve
  python3 scripts/bench_curves.py --only memory      # the README's SVG plots (10k to 10M keys)

Data sets: strings (`SET key:%012d v%d`, 16-byte keys, ≤8-byte values), strings-ttl (the same
with `EX 1000000`; not in the default run), hll (`PFADD hll:%012d a%d b%d c%d`:
sparse, 3 elements), bloom (`BF.ADD bf:%012d x`: RedisBloom's default 100-capacity filter), cuckoo
(`CF.ADD cf:%012d x`, default 1024 capacity). The reference module is `--redis-module PATH`, by
default the one `scripts/fetch-redisbloom.sh` fetches (RedisBloom 2.6.12); `--redis-module none`
runs Redis without it, and the filter sets then have no reference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_load  # noqa: E402

SETS = {
    "strings": lambda i: ["SET", f"key:{i:012d}", f"v{i % 10000000}"],
    # The same strings with a TTL each (a cache's keys): what the expiry index costs a key.
    "strings-ttl": lambda i: ["SET", f"key:{i:012d}", f"v{i % 10000000}", "EX", "1000000"],
    "hll": lambda i: ["PFADD", f"hll:{i:012d}", f"a{i}", f"b{i}", f"c{i}"],
    "bloom": lambda i: ["BF.ADD", f"bf:{i:012d}", "x"],
    "cuckoo": lambda i: ["CF.ADD", f"cf:{i:012d}", "x"],
    # The sketches, each created with its usual parameters and fed (a sketch allocated and never
    # written leaves its zeroed pages out of the RSS on both servers): a count-min sketch of
    # 2000 x 5 counters and 20 items, a top-10 (RedisBloom's default width 8, depth 7) and 20
    # items, a t-digest of the default compression (100) and 100 values. A generator may give a
    # list of commands for a key.
    "cms": lambda i: [["CMS.INITBYDIM", f"cms:{i:012d}", "2000", "5"],
                      ["CMS.INCRBY", f"cms:{i:012d}"] + [x for j in range(20) for x in (f"i{i}-{j}", "1")]],
    "topk": lambda i: [["TOPK.RESERVE", f"topk:{i:012d}", "10"],
                       ["TOPK.ADD", f"topk:{i:012d}"] + [f"i{i}-{j}" for j in range(20)]],
    "tdigest": lambda i: [["TDIGEST.CREATE", f"td:{i:012d}"],
                          ["TDIGEST.ADD", f"td:{i:012d}"] + [str((i * 7919 + j * 104729) % 100003) for j in range(100)]],
}
DEFAULT_N = {"strings": 1000000, "strings-ttl": 1000000, "hll": 1000000, "bloom": 1000000, "cuckoo": 1000000,
             "cms": 10000, "topk": 100000, "tdigest": 100000}


def rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def write_commands(gen, n: int) -> str:
    """The `redis-cli --pipe` input for n keys, in a temporary file (reused for both servers)."""
    fd, path = tempfile.mkstemp(prefix="bench-mem-", suffix=".resp")
    with os.fdopen(fd, "wb") as f:
        chunk = []
        for i in range(n):
            commands = gen(i)
            for command in commands if isinstance(commands[0], list) else [commands]:
                chunk.append(bench_load.encode(*command))
            if len(chunk) == 100000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    return path


def measure(server: bench_load.Server, path: str, n: int) -> float:
    time.sleep(0.2)
    before = rss_kb(server.proc.pid)
    with open(path, "rb") as data:
        p = subprocess.run(["redis-cli", "-p", str(server.port), "--pipe"], stdin=data, capture_output=True)
    if p.returncode != 0 or b"errors: 0" not in p.stdout:
        raise RuntimeError(f"redis-cli --pipe: {p.stdout[-300:]!r} {p.stderr[-300:]!r}")
    time.sleep(0.5)
    return (rss_kb(server.proc.pid) - before) * 1024 / n


def run_set(args, name: str, n: int) -> dict[str, float]:
    """B/key of one data set at n keys on each server ({"hyperbloom": .., "redis": ..}), each on a
    fresh server, one after the other, from the same command file. args needs hyperbloom,
    redis_server, redis_module (a path or None) and optionally only_server."""
    got = {}
    path = write_commands(SETS[name], n)
    try:
        for sname, argv in bench_load.server_argv(args, args.hyperbloom):
            if getattr(args, "only_server", None) and sname != args.only_server:
                continue
            if sname == "redis" and name in ("bloom", "cuckoo") and not args.redis_module:
                continue
            s = bench_load.Server(sname, argv)
            try:
                got[sname] = measure(s, path, n)
            finally:
                s.stop()
    finally:
        os.unlink(path)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="strings,hll,bloom,cuckoo")
    ap.add_argument("--keys", default=None, help="comma-separated key counts (default per set)")
    ap.add_argument("--hyperbloom", default=str(bench_load.ROOT / "target" / "release" / "hyperbloom"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-module", default="auto",
                    help="module for the reference (default: scripts/fetch-redisbloom.sh; none: no module)")
    ap.add_argument("--only-server", default=None, help="hyperbloom or redis")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    args.redis_module = bench_load.resolve_redis_module(args.redis_module)
    args.hyperbloom = str(Path(args.hyperbloom).resolve())  # each server runs in its own directory
    results = []
    print("| data | keys | hyperbloom B/key | reference B/key | hyperbloom/reference |")
    print("|---|---:|---:|---:|---:|")
    for name in args.sets.split(","):
        counts = [int(x) for x in args.keys.split(",")] if args.keys else [DEFAULT_N[name]]
        for n in counts:
            got = run_set(args, name, n)
            results.append({"set": name, "keys": n, **got})
            h, r = got.get("hyperbloom"), got.get("redis")
            ratio = f"{h / r:.2f}" if h and r else "—"
            fmt = lambda v: f"{v:.0f}" if v else "—"  # noqa: E731
            print(f"| {name} | {n:,} | {fmt(h)} | {fmt(r)} | {ratio} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0



if __name__ == "__main__":
    sys.exit(main())

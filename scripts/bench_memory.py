#!/usr/bin/env python3
"""Memory per key: RSS growth after loading keys with `redis-cli --pipe`, hyperbloom and redis-server.

For each data set a fresh server starts (hyperbloom from the release build, redis-server with
`--save "" --appendonly no`), its VmRSS is read from /proc/PID/status, N commands are piped in with
`redis-cli --pipe`, and the growth divided by N is the figure. RSS is not load-sensitive, so this is
reproducible on a busy machine.

  python3 scripts/bench_memory.py                    # 1M small strings, 500k sparse HLLs
  python3 scripts/bench_memory.py --sets strings --keys 100000,1000000   # a curve
  python3 scripts/bench_memory.py --sets strings,hll --keys 10000,100000,1000000,10000000 \
      --json mem.json --plot docs/memory-per-key.png   # the README's picture (needs matplotlib)

Data sets: strings (`SET key:%010d v%d`, 16-byte keys, ≤8-byte values), hll (`PFADD hll:%010d a%d b%d c%d`:
sparse, 3 elements), bloom (`BF.ADD bf:%010d x`: RedisBloom's default 100-capacity filter), cuckoo
(`CF.ADD cf:%010d x`, default 1024 capacity). Module sets run on Redis only with --redis-module.
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
    "hll": lambda i: ["PFADD", f"hll:{i:012d}", f"a{i}", f"b{i}", f"c{i}"],
    "bloom": lambda i: ["BF.ADD", f"bf:{i:012d}", "x"],
    "cuckoo": lambda i: ["CF.ADD", f"cf:{i:012d}", "x"],
}
DEFAULT_N = {"strings": 1000000, "hll": 500000, "bloom": 100000, "cuckoo": 100000}


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
            chunk.append(bench_load.encode(*gen(i)))
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="strings,hll")
    ap.add_argument("--keys", default=None, help="comma-separated key counts (default per set)")
    ap.add_argument("--hyperbloom", default=str(bench_load.ROOT / "target" / "release" / "hyperbloom"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-module", default=None)
    ap.add_argument("--only-server", default=None, help="hyperbloom or redis")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--plot", default=None, help="draw B/key against keys into this PNG/SVG")
    args = ap.parse_args()
    results = []
    args.redis_benchmark = None
    print("| data | keys | hyperbloom B/key | redis B/key | hyperbloom/redis |")
    print("|---|---:|---:|---:|---:|")
    for name in args.sets.split(","):
        counts = [int(x) for x in args.keys.split(",")] if args.keys else [DEFAULT_N[name]]
        for n in counts:
            got = {}
            path = write_commands(SETS[name], n)
            try:
                for sname, argv in bench_load.server_argv(args, args.hyperbloom):
                    if args.only_server and sname != args.only_server:
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
            results.append({"set": name, "keys": n, **got})
            h, r = got.get("hyperbloom"), got.get("redis")
            ratio = f"{h / r:.2f}" if h and r else "—"
            fmt = lambda v: f"{v:.0f}" if v else "—"  # noqa: E731
            print(f"| {name} | {n:,} | {fmt(h)} | {fmt(r)} | {ratio} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)
    return 0


def plot(results, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"hyperbloom": "-o", "redis": "--s"}
    for name in dict.fromkeys(r["set"] for r in results):
        for server, style in styles.items():
            pts = [(r["keys"], r[server]) for r in results if r["set"] == name and r.get(server)]
            if pts:
                xs, ys = zip(*pts)
                label = f"{server if server == 'hyperbloom' else 'redis-server 7.0'} — {name}"
                ax.plot(xs, ys, style, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("keys loaded (redis-cli --pipe)")
    ax.set_ylabel("RSS growth per key (bytes)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Memory per key: strings (16-byte keys, ≤8-byte values), sparse HLLs (3 elements)",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    sys.exit(main())

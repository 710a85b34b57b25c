#!/usr/bin/env python3
"""Instructions per request of many commands, hyperbloom against redis-server + RedisBloom.

`bench_load.py --callgrind` measures issue 15's target commands one server start each; this sweep
runs one server of each kind under callgrind for a whole list of commands and dumps the counts
after each (`callgrind_control -d`), so a command that costs more than Redis's shows up among
the many nobody benchmarks. It found INCRBYFLOAT at 0.19x, SCAN at 0.00x on 100k keys (a walk of
the whole table per step), PFMERGE of sparse HLLs at 0.90x.

Each server gets the same setup (a Bloom filter of 1,000 items, a cuckoo filter, a t-digest of
2,000 values, a Top-K, a Count-Min sketch, a sparse and a dense HLL, some strings, and
`--keys N` filler strings `key:1..N`), then for every command: `redis-benchmark -c 1 -n N -P P
-r 100000 CMD...`, a dump, and the dump's total divided by N. Commands run in order on the same
server, so a write changes what later commands see, the same way on both servers.

    python3 scripts/cg_sweep.py [--hyperbloom BIN] [--redis-module SO] [-n 5000] [-P 16]
                                [--keys 0] [--only REGEX] [COMMAND ...]

Needs valgrind (callgrind_control), redis-server, redis-cli and redis-benchmark; the module is
`scripts/fetch-redisbloom.sh`'s build. Without it the module commands are left out.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The sweep's default list: string, keyspace and server commands, then each family's.
COMMANDS = """
PING
ECHO hi
INCRBYFLOAT fl 1.5
APPEND ap x
SETRANGE sr 5 abc
GETRANGE s 0 2
STRLEN s
INCRBY n 5
DECR n
GETSET gs v
GETDEL gd
GETEX s
SETNX nx __rand_int__
SETEX se 100 v
PSETEX pse 100000 v
MSETNX m1 a m2 b
MGET k0 k1 k2 k3 k4 k5 k6 k7 k8 k9
EXISTS s
DEL nokey
UNLINK nokey
TYPE s
TTL s
PTTL s
EXPIRE s 1000
PERSIST s
RENAME s s
TOUCH s
DBSIZE
OBJECT ENCODING s
RANDOMKEY
SCAN 0
SCAN 0 COUNT 100
PFCOUNT hs
PFCOUNT d1
PFADD hs2 __rand_int__
PFMERGE hm hs
BF.MEXISTS bf i1 i2 x y z
BF.CARD bf
BF.INFO bf
BF.INSERT bf ITEMS __rand_int__ a
CF.COUNT cf __rand_int__
CF.ADDNX cf __rand_int__
CF.DEL cf x
CF.MEXISTS cf a b c
CF.INFO cf
CF.INSERT cf ITEMS __rand_int__
TDIGEST.ADD td __rand_int__
TDIGEST.QUANTILE td 0.5 0.99
TDIGEST.CDF td 10 100
TDIGEST.RANK td 10 100
TDIGEST.MIN td
TDIGEST.TRIMMED_MEAN td 0.1 0.9
TDIGEST.BYRANK td 1 10
TDIGEST.INFO td
TOPK.ADD tk __rand_int__
TOPK.QUERY tk a b
TOPK.LIST tk
TOPK.INCRBY tk __rand_int__ 2
TOPK.COUNT tk a b
CMS.QUERY cms a b c
CMS.INFO cms
CMS.INCRBY cms __rand_int__ 1
INFO stats
CLIENT ID
TIME
""".strip().splitlines()

SETUP = [
    ["BF.RESERVE", "bf", "0.01", "100000"],
    ["BF.MADD", "bf"] + [f"i{i}" for i in range(1000)],
    ["CF.RESERVE", "cf", "100000"],
    ["CF.ADD", "cf", "x"],
    ["TDIGEST.CREATE", "td"],
    ["TDIGEST.ADD", "td"] + [str(i * 1.37) for i in range(2000)],
    ["TOPK.RESERVE", "tk", "10"],
    ["TOPK.ADD", "tk"] + [f"i{i % 50}" for i in range(500)],
    ["CMS.INITBYDIM", "cms", "2000", "5"],
    ["CMS.INCRBY", "cms", "a", "1"],
    ["PFADD", "hs", "a", "b", "c"],
    ["PFADD", "d1"] + [f"a{i}" for i in range(5000)],
    ["SET", "s", "hello"],
    ["SET", "fl", "10.5"],
    ["SET", "n", "12345"],
    ["MSET"] + [x for i in range(10) for x in (f"k{i}", "v")],
]

MODULE_PREFIXES = ("BF.", "CF.", "TDIGEST.", "TOPK.", "CMS.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port: int, *args: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True).stdout


def dump_total(files: list[str]) -> int:
    total = 0
    for f in files:
        with open(f) as fh:
            for line in fh:
                if line.startswith(("summary:", "totals:")):
                    total = max(total, int(line.split()[1]))
    return total


def sweep(name: str, argv: list[str], port: int, commands: list[str], args) -> dict[str, float]:
    out_dir = tempfile.mkdtemp(prefix=f"cg-sweep-{name}-")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/cg.out", *argv],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if "PONG" in cli(port, "PING"):
                break
            time.sleep(0.1)
        else:
            sys.exit(f"{name} did not start")
        for cmd in SETUP:
            if args.module or not cmd[0].startswith(MODULE_PREFIXES):
                cli(port, *cmd)
        if args.keys:
            pipe = "".join(f"SET key:{i} v\r\n" for i in range(1, args.keys + 1))
            subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=pipe, text=True,
                           capture_output=True)
        subprocess.run(["callgrind_control", "-d", str(server.pid)], capture_output=True)
        costs = {}
        for command in commands:
            subprocess.run(["redis-benchmark", "-p", str(port), "-c", "1", "-n", str(args.n), "-P",
                            str(args.P), "-r", "100000", "-q", *command.split()], capture_output=True)
            before = set(glob.glob(f"{out_dir}/cg.out.*"))
            subprocess.run(["callgrind_control", "-d", str(server.pid)], capture_output=True)
            time.sleep(0.2)
            new = sorted(set(glob.glob(f"{out_dir}/cg.out.*")) - before, key=os.path.getmtime)
            costs[command] = dump_total(new) / args.n
        return costs
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(out_dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("commands", nargs="*", help="commands to run (default: the built-in list)")
    ap.add_argument("--hyperbloom", default=str(ROOT / "target/release/hyperbloom"))
    ap.add_argument("--redis-module", dest="module",
                    default=str(ROOT / "target/refbloom/redisbloom.so"))
    ap.add_argument("-n", type=int, default=5000, help="requests per command")
    ap.add_argument("-P", type=int, default=16, help="pipeline depth")
    ap.add_argument("--keys", type=int, default=0, help="filler keys key:1..N before the sweep")
    ap.add_argument("--only", default=None, help="only commands matching this regex")
    args = ap.parse_args()
    if not os.path.exists(args.module):
        print(f"no module at {args.module}: the module commands are left out", file=sys.stderr)
        args.module = None
    commands = args.commands or COMMANDS
    if not args.module:
        commands = [c for c in commands if not c.upper().startswith(MODULE_PREFIXES)]
    if args.only:
        commands = [c for c in commands if re.search(args.only, c)]
    hb_port, redis_port = free_port(), free_port()
    hb = sweep("hyperbloom", [args.hyperbloom, "--port", str(hb_port), "--save", "",
                              "--appendonly", "no"], hb_port, commands, args)
    redis_argv = ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"]
    if args.module:
        redis_argv += ["--loadmodule", args.module]
    redis = sweep("redis", redis_argv, redis_port, commands, args)
    print(f"callgrind, instructions per request (whole server, this command's interval); "
          f"redis-benchmark -c 1 -n {args.n} -P {args.P}; {args.keys} filler keys; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| command | hyperbloom | redis | redis/hyperbloom |")
    print("|---|---:|---:|---:|")
    behind = []
    for c in commands:
        h, r = hb[c], redis[c]
        ratio = r / h if h else 0.0
        if ratio < 1.0:
            behind.append(f"{c} {ratio:.2f}")
        print(f"| {c} | {h:,.0f} | {r:,.0f} | {ratio:.2f} |")
    print(f"\nbehind the reference (ratio < 1): {', '.join(behind) if behind else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

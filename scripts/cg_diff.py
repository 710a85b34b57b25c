#!/usr/bin/env python3
"""Per-request instruction profile: a benchmark's callgrind.out minus the idle baseline's.

`scripts/bench_load.py --callgrind --keep-callgrind DIR` keeps each test's callgrind.out and the
idle run's (start, prepare, exit: `NAME-P1-idle.out`). A test's file holds the same setup plus the
-n requests, so subtracting the idle file function by function leaves what the requests cost;
divided by -n that is instructions per request, per function (inclusive or exclusive).

    python3 scripts/cg_diff.py DIR/hyperbloom-P16-PFADD.out DIR/hyperbloom-P1-idle.out -n 20000
    python3 scripts/cg_diff.py BENCH.out IDLE.out -n 20000 --exclusive --top 40

Only the Python standard library and valgrind's callgrind_annotate are needed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(?:\*\s+)?(.+?)\s*$")


def costs(path: str, inclusive: bool) -> dict[str, int]:
    out = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", path],
        capture_output=True, text=True, check=True).stdout
    table: dict[str, int] = {}
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started or line.startswith("----"):
            continue
        if not line.strip():
            if table:
                break  # the end of the function summary (source annotation follows)
            continue
        m = LINE.match(line)
        if m:
            name = re.sub(r"\s+\[[^\]]*\]$", "", m.group(2))
            table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench")
    ap.add_argument("idle")
    ap.add_argument("-n", "--requests", type=int, required=True)
    ap.add_argument("--exclusive", action="store_true", help="self cost instead of inclusive")
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--grep", default=None, help="only functions matching this regex")
    args = ap.parse_args()
    a = costs(args.bench, not args.exclusive)
    b = costs(args.idle, not args.exclusive)
    rows = [(a.get(k, 0) - b.get(k, 0), k) for k in set(a) | set(b)]
    rows = [r for r in rows if r[0] and (not args.grep or re.search(args.grep, r[1]))]
    rows.sort(reverse=True)
    short = lambda k: re.sub(r"/rustc/[0-9a-f]+/library/|/root/\.cargo/registry/src/[^/]+/|/work/[^/]+/", "", k)  # noqa: E731
    for d, k in rows[: args.top]:
        print(f"{d / args.requests:10.1f}  {short(k)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

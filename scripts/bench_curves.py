#!/usr/bin/env python3
"""Cost curves for the README (issue 15, target 5): throughput against the number of clients, and
BF.EXISTS cost against the number of links of a scaling Bloom filter, hyperbloom and the reference
side by side, written as a Markdown table and an SVG plot per curve.

* clients: redis-benchmark -P 1 (unpipelined, as most applications talk) with -c 1, 10, 50, 200,
  1000 for SET and GET, both servers alternating, medians of the rounds.
* links: a filter grown to L links (EXPANSION 1, 1000 items a link, filled by scripts/bench_load.py's
  `fill_links`), then BF.EXISTS of redis-benchmark's random items (misses, so every link is tested:
  the worst case) at -P 16 with -c 50. Reported as throughput and as server CPU µs per request
  (utime+stime). The reference needs RedisBloom (`--redis-module PATH`); without it the curve is
  hyperbloom's alone and the table says so.

Usage: python3 scripts/bench_curves.py [--pin] [-n N] [-r ROUNDS] [--redis-module PATH]
                                       [--out docs/bench] [--only clients|links]
Writes OUT/clients.svg, OUT/links.svg and prints the tables. Only the Python standard library is
needed: the plots are plain SVG written here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_load as bl  # noqa: E402

CLIENTS = [1, 10, 50, 200, 1000]
LINKS = list(range(1, 21))


# ---------------------------------------------------------------------------------------------
# SVG line plots
# ---------------------------------------------------------------------------------------------

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo or 1.0
    raw = span / n
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = int(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 0.001:
        if t >= lo - step * 0.001:
            ticks.append(round(t, 10))
        t += step
    return ticks


def fmt_num(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def svg_plot(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, list[tuple]],
             logx: bool = False, note: str = "") -> None:
    """series: name -> [(x, y)]; writes a 720x420 SVG line chart with markers and a legend."""
    import math
    w, h, ml, mr, mt, mb = 720, 420, 80, 20, 50, 70
    pts = [p for s in series.values() for p in s if p[1] is not None]
    if not pts:
        return
    xs = [p[0] for p in pts]
    fx = (lambda x: math.log10(x)) if logx else (lambda x: x)  # noqa: E731
    x0, x1 = fx(min(xs)), fx(max(xs))
    y1 = max(p[1] for p in pts) * 1.1
    yt = nice_ticks(0, y1)
    y1 = max(y1, yt[-1])
    X = lambda x: ml + (fx(x) - x0) / ((x1 - x0) or 1) * (w - ml - mr)  # noqa: E731
    Y = lambda y: h - mb - y / y1 * (h - mt - mb)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    for t in yt:
        out.append(f'<line x1="{ml}" y1="{Y(t):.1f}" x2="{w - mr}" y2="{Y(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{ml - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{fmt_num(t)}</text>')
    for x in sorted(set(xs)):
        out.append(f'<line x1="{X(x):.1f}" y1="{h - mb}" x2="{X(x):.1f}" y2="{h - mb + 5}" stroke="#333"/>')
        out.append(f'<text x="{X(x):.1f}" y="{h - mb + 18}" text-anchor="middle">{x:g}</text>')
    out.append(f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="#333"/>')
    out.append(f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="#333"/>')
    out.append(f'<text x="{(ml + w - mr) / 2}" y="{h - mb + 38}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="18" y="{(mt + h - mb) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {(mt + h - mb) / 2})">{ylabel}</text>')
    for i, (name, s) in enumerate(series.items()):
        c = COLOURS[i % len(COLOURS)]
        dash = ' stroke-dasharray="6 4"' if name.startswith("redis") else ""
        good = [(x, y) for x, y in s if y is not None]
        if len(good) > 1:
            d = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in good)
            out.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for x, y in good:
            out.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>')
        # Legend in the plot's lower right, below the curves (which start well above zero).
        ly = h - mb - 14 - 18 * (len(series) - 1 - i)
        out.append(f'<line x1="{w - mr - 190}" y1="{ly}" x2="{w - mr - 165}" y2="{ly}" stroke="{c}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{w - mr - 160}" y="{ly + 4}">{name}</text>')
    if note:
        out.append(f'<text x="{ml}" y="{h - 8}" font-size="10" fill="#555">{note}</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def run_one(args, server, pipeline, extra, clients):
    before = server.cpu_seconds()
    got = bl.benchmark(args.redis_benchmark, server.port, args, pipeline, extra, clients=clients)
    spent = server.cpu_seconds() - before
    rps = next(iter(got.values()), None)
    return rps, spent / args.requests * 1e6


def clients_curve(args, servers, out: Path) -> None:
    tests = [("SET", ["-t", "set"]), ("GET", ["-t", "get"])]
    res: dict[tuple, list] = {}
    for rnd in range(args.rounds):
        order = servers if rnd % 2 == 0 else servers[::-1]
        for c in CLIENTS:
            for label, extra in tests:
                for s in order:
                    rps, _ = run_one(args, s, 1, extra, c)
                    if rps:
                        res.setdefault((s.name, label, c), []).append(rps)
    med = lambda k: statistics.median(res[k]) if res.get(k) else None  # noqa: E731
    print(f"\n### Throughput against clients (-P 1, -n {args.requests}, {args.rounds} rounds, medians)\n")
    print(f"{bl.machine_line(args)}\n")
    print("| clients | " + " | ".join(f"hyperbloom {t} | redis {t} | ratio" for t, _ in tests) + " |")
    print("|---:|" + "---:|---:|---:|" * len(tests))
    for c in CLIENTS:
        cells = []
        for label, _ in tests:
            h, r = med(("hyperbloom", label, c)), med(("redis", label, c))
            cells += [bl_fmt(h), bl_fmt(r), f"{h / r:.2f}" if h and r else "—"]
        print(f"| {c} | " + " | ".join(cells) + " |")
    series = {}
    for s in servers:
        for label, _ in tests:
            series[f"{s.name} {label}"] = [(c, med((s.name, label, c))) for c in CLIENTS]
    svg_plot(out / "clients.svg", "Throughput against clients (redis-benchmark -P 1)", "clients (log scale)",
             "requests/s", series, logx=True, note=bl.machine_line(args))


def bl_fmt(v):
    return f"{v:,.0f}" if v else "—"


def links_curve(args, servers, out: Path) -> None:
    res: dict[tuple, list] = {}
    cpu: dict[tuple, list] = {}
    have = [s for s in servers if bl.has_command(s.port, "bf.exists")]
    args = argparse.Namespace(**{**vars(args), "requests": args.links_requests})
    for links in LINKS:
        for s in have:
            got = bl.fill_links(s.port, "bench:links", links)
            if got != links:
                print(f"warning: {s.name}: {got} links instead of {links}", file=sys.stderr)
        for rnd in range(args.rounds):
            order = have if rnd % 2 == 0 else have[::-1]
            for s in order:
                rps, us = run_one(args, s, 16, ["BF.EXISTS", "bench:links", "__rand_int__"], 50)
                if rps:
                    res.setdefault((s.name, links), []).append(rps)
                    cpu.setdefault((s.name, links), []).append(us)
    med = lambda d, k: statistics.median(d[k]) if d.get(k) else None  # noqa: E731
    missing = [s.name for s in servers if s not in have]
    print(f"\n### BF.EXISTS against links (-P 16 -c 50, -n {args.requests}, {args.rounds} rounds, medians)\n")
    print(f"{bl.machine_line(args)}\n")
    if missing:
        print(f"No reference: {', '.join(missing)} has no BF.EXISTS (RedisBloom not loaded).\n")
    names = [s.name for s in have]
    print("| links | " + " | ".join(f"{n} rps | {n} CPU µs/req" for n in names) + " |")
    print("|---:|" + "---:|---:|" * len(names))
    for links in LINKS:
        cells = []
        for n in names:
            cells += [bl_fmt(med(res, (n, links))), f"{med(cpu, (n, links)) or 0:.2f}"]
        print(f"| {links} | " + " | ".join(cells) + " |")
    note = bl.machine_line(args) + ("; no RedisBloom here: hyperbloom only" if missing else "")
    svg_plot(out / "links.svg", "BF.EXISTS (misses) against links: server CPU per request", "links",
             "server CPU µs/request", {f"{n} BF.EXISTS": [(x, med(cpu, (n, x))) for x in LINKS] for n in names},
             note=note)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=100000)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--links-requests", type=int, default=300000,
                    help="-n of each links point (CPU time is read in 10 ms ticks: more requests, finer steps)")
    ap.add_argument("--pin", action="store_true", help="server on core 1, redis-benchmark on core 0")
    ap.add_argument("--only", choices=["clients", "links"], default=None)
    ap.add_argument("--out", default=str(bl.ROOT / "docs" / "bench"))
    ap.add_argument("--redis-module", default=None)
    ap.add_argument("--hyperbloom", default=None)
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark"))
    args = ap.parse_args()
    args.threads = 0
    args.clients = 50
    target = Path(os.environ.get("CARGO_TARGET_DIR") or bl.ROOT / "target")
    hb_bin = args.hyperbloom or str(target / "release" / "hyperbloom")
    servers = []
    started = time.monotonic()
    try:
        wrapper = ["taskset", "-c", bl.SERVER_CORE] if args.pin else []
        for name, argv in bl.server_argv(args, hb_bin):
            servers.append(bl.Server(name, argv, wrapper))
        out = Path(args.out)
        if args.only in (None, "clients"):
            clients_curve(args, servers, out)
        if args.only in (None, "links"):
            links_curve(args, servers, out)
    finally:
        for s in servers:
            s.stop()
    print(f"\n({time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Cost curves for the README (issue 15, target 5): hyperbloom and the reference (Debian's
redis-server 7.0.15 with RedisBloom 2.6.12 loaded) side by side, written as Markdown tables and one
SVG plot per curve.

* clients: redis-benchmark -P 1 (unpipelined, as most applications talk) with -c 1, 10, 50, 200,
  1000 for SET, GET and BF.EXISTS, the servers alternating (the order flips every round), medians
  of the rounds.
* links: a filter grown to L links (EXPANSION 1, 1000 items a link, filled by scripts/bench_load.py's
  `fill_links`), then BF.EXISTS of redis-benchmark's random items (misses, so every link is tested:
  the worst case) at -P 16 with -c 50. Reported as throughput and as server CPU µs per request
  (utime+stime), the servers alternating.
* memory: RSS growth per key after `redis-cli --pipe` of N keys into a fresh server
  (scripts/bench_memory.py), strings and sparse HLLs for 10k to 10M keys, small Bloom and default
  cuckoo filters for 10k to 1M (10M default cuckoo filters would take 12 GB per server).

The reference module is `--redis-module PATH`, by default what scripts/fetch-redisbloom.sh fetches
(the RedisBloom 2.6.12 release .so, checksummed, into target/refbloom); without a module
(`--redis-module none`) the BF curves are hyperbloom's alone and the tables say so.

Usage: python3 scripts/bench_curves.py [--pin] [-n N] [-r ROUNDS] [--redis-module PATH|auto|none]
                                       [--out docs/bench] [--only clients,links,memory]
Writes OUT/clients.svg, OUT/links.svg, OUT/memory.svg, OUT/memory-filters.svg (and
OUT/memory.json) and prints the tables. Only the Python standard library is needed: the plots are
plain SVG written here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_load as bl  # noqa: E402
import bench_memory as bm  # noqa: E402

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
             logx: bool = False, note: str = "", styles: dict[str, tuple[int, bool]] | None = None) -> None:
    """series: name -> [(x, y)]; writes a 720x420 SVG line chart with markers and a legend.
    styles: name -> (colour index, dashed); by default each series its own colour, dashed when its
    name starts with "redis" (the reference). The legend goes in whichever corner of the plot the
    curves cross least."""
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
    style = {name: (styles or {}).get(name, (i, name.startswith("redis"))) for i, name in enumerate(series)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    for t in yt:
        out.append(f'<line x1="{ml}" y1="{Y(t):.1f}" x2="{w - mr}" y2="{Y(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{ml - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{fmt_num(t)}</text>')
    for x in sorted(set(xs)):
        out.append(f'<line x1="{X(x):.1f}" y1="{h - mb}" x2="{X(x):.1f}" y2="{h - mb + 5}" stroke="#333"/>')
        out.append(f'<text x="{X(x):.1f}" y="{h - mb + 18}" text-anchor="middle">{fmt_num(x)}</text>')
    out.append(f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="#333"/>')
    out.append(f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="#333"/>')
    out.append(f'<text x="{(ml + w - mr) / 2}" y="{h - mb + 38}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="18" y="{(mt + h - mb) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {(mt + h - mb) / 2})">{ylabel}</text>')
    polylines = []
    for name, s in series.items():
        c, dashed = style[name]
        colour, dash = COLOURS[c % len(COLOURS)], ' stroke-dasharray="6 4"' if dashed else ""
        good = [(X(x), Y(y)) for x, y in s if y is not None]
        polylines.append(good)
        if len(good) > 1:
            d = " ".join(f"{px:.1f},{py:.1f}" for px, py in good)
            out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for px, py in good:
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>')
    # The legend box: the corner (or side) its area meets the fewest samples of the curves in.
    lw = max(len(n) for n in series) * 6.8 + 45
    lh = 18 * len(series) + 8

    def crossings(bx: float, by: float) -> int:
        n = 0
        for line in polylines:
            for (ax_, ay), (bx_, by_) in zip(line, line[1:] or line):
                for k in range(41):
                    px, py = ax_ + (bx_ - ax_) * k / 40, ay + (by_ - ay) * k / 40
                    n += bx <= px <= bx + lw and by <= py <= by + lh
        return n

    spots = [(w - mr - lw - 8, h - mb - lh - 8), (w - mr - lw - 8, mt + 8), (ml + 8, mt + 8),
             (ml + 8, h - mb - lh - 8), (w - mr - lw - 8, (mt + h - mb - lh) / 2)]
    bx, by = min(spots, key=lambda p: crossings(*p))
    out.append(f'<rect x="{bx:.1f}" y="{by:.1f}" width="{lw:.1f}" height="{lh}" fill="white" '
               f'fill-opacity="0.85" stroke="#ccc"/>')
    for i, name in enumerate(series):
        c, dashed = style[name]
        colour, dash = COLOURS[c % len(COLOURS)], ' stroke-dasharray="6 4"' if dashed else ""
        ly = by + 13 + 18 * i
        out.append(f'<line x1="{bx + 8:.1f}" y1="{ly:.1f}" x2="{bx + 33:.1f}" y2="{ly:.1f}" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{bx + 38:.1f}" y="{ly + 4:.1f}">{name}</text>')
    if note:
        out.append(f'<text x="{ml}" y="{h - 8}" font-size="10" fill="#555">{note}</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def reference_name(server) -> str:
    """"redis 7.0.15", plus " + RedisBloom 2.6.12" when the module is loaded (MODULE LIST's `ver`,
    MMmmpp)."""
    label = f"redis {server.version}"
    reply = bl.call(server.port, "MODULE", "LIST")
    m = re.search(rb"\$4\r\nname\r\n\$2\r\nbf\r\n\$3\r\nver\r\n:(\d+)", reply)
    if m:
        v = int(m.group(1))
        label += f" + RedisBloom {v // 10000}.{v // 100 % 100}.{v % 100}"
    return label


def run_one(args, server, pipeline, extra, clients):
    before = server.cpu_seconds()
    got = bl.benchmark(args.redis_benchmark, server.port, args, pipeline, extra, clients=clients)
    spent = server.cpu_seconds() - before
    rps = next(iter(got.values()), None)
    return rps, spent / args.requests * 1e6


CLIENT_TESTS = [("SET", ["-t", "set"], "set"), ("GET", ["-t", "get"], "get"),
                ("BF.EXISTS", ["BF.EXISTS", "bench:bf", "__rand_int__"], "bf.exists")]


def clients_curve(args, servers, out: Path) -> None:
    for s in servers:
        bl.prepare(s)  # bench:bf, a 10M-capacity filter, for BF.EXISTS
    tests = [t for t in CLIENT_TESTS if any(bl.has_command(s.port, t[2]) for s in servers)]
    res: dict[tuple, list] = {}
    cpu: dict[tuple, list] = {}
    for rnd in range(args.rounds):
        order = servers if rnd % 2 == 0 else servers[::-1]
        for c in CLIENTS:
            for label, extra, cmd in tests:
                for s in order:
                    if not bl.has_command(s.port, cmd):
                        continue
                    rps, us = run_one(args, s, 1, extra, c)
                    if rps:
                        res.setdefault((s.name, label, c), []).append(rps)
                        cpu.setdefault((s.name, label, c), []).append(us)
    med = lambda k, d=res: statistics.median(d[k]) if d.get(k) else None  # noqa: E731
    print(f"\n### Throughput against clients (-P 1, -n {args.requests}, {args.rounds} rounds, medians)\n")
    print(f"{bl.machine_line(args)}; reference: {args.reference}\n")
    print("| clients | " + " | ".join(f"hyperbloom {t} | reference {t} | ratio" for t, _, _ in tests) + " |")
    print("|---:|" + "---:|---:|---:|" * len(tests))
    for c in CLIENTS:
        cells = []
        for label, _, _ in tests:
            h, r = med(("hyperbloom", label, c)), med(("redis", label, c))
            cells += [bl_fmt(h), bl_fmt(r), f"{h / r:.2f}" if h and r else "—"]
        print(f"| {c} | " + " | ".join(cells) + " |")
    # At -P 1 the client and the kernel set the pace; the server's own CPU per request is the
    # measure throughput cannot show (10 ms ticks: a few percent at these -n).
    print("\nServer CPU µs per request (utime+stime), same runs:\n")
    print("| clients | " + " | ".join(f"hyperbloom {t} | reference {t} | reference/hyperbloom" for t, _, _ in tests)
          + " |")
    print("|---:|" + "---:|---:|---:|" * len(tests))
    for c in CLIENTS:
        cells = []
        for label, _, _ in tests:
            h, r = med(("hyperbloom", label, c), cpu), med(("redis", label, c), cpu)
            cells += [f"{h:.2f}" if h else "—", f"{r:.2f}" if r else "—", f"{r / h:.2f}" if h and r else "—"]
        print(f"| {c} | " + " | ".join(cells) + " |")
    series, styles = {}, {}
    for i, (label, _, _) in enumerate(tests):
        for s in servers:
            name = f"{'hyperbloom' if s.name == 'hyperbloom' else 'reference'} {label}"
            series[name] = [(c, med((s.name, label, c))) for c in CLIENTS]
            styles[name] = (i, s.name != "hyperbloom")
    svg_plot(out / "clients.svg", "Throughput against clients (redis-benchmark -P 1)", "clients (log scale)",
             "requests/s", series, logx=True, styles=styles,
             note=f"{bl.machine_line(args)}; dashed: {args.reference}")


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
    print(f"{bl.machine_line(args)}; reference: {args.reference}\n")
    if missing:
        print(f"No reference: {', '.join(missing)} has no BF.EXISTS (RedisBloom not loaded).\n")
    names = [s.name for s in have]
    label = {"hyperbloom": "hyperbloom", "redis": "reference"}
    print("| links | " + " | ".join(f"{label[n]} rps | {label[n]} CPU µs/req" for n in names)
          + (" | reference/hyperbloom CPU |" if len(names) == 2 else " |"))
    print("|---:|" + "---:|---:|" * len(names) + ("---:|" if len(names) == 2 else ""))
    for links in LINKS:
        cells = []
        for n in names:
            cells += [bl_fmt(med(res, (n, links))), f"{med(cpu, (n, links)) or 0:.2f}"]
        if len(names) == 2:
            h, r = med(cpu, ("hyperbloom", links)), med(cpu, ("redis", links))
            cells.append(f"{r / h:.2f}" if h and r else "—")
        print(f"| {links} | " + " | ".join(cells) + " |")
    note = bl.machine_line(args) + ("; no RedisBloom: hyperbloom only" if missing else f"; dashed: {args.reference}")
    series = {f"{label[n]} BF.EXISTS": [(x, med(cpu, (n, x))) for x in LINKS] for n in names}
    svg_plot(out / "links.svg", "BF.EXISTS (misses) against links: server CPU per request", "links",
             "server CPU µs/request", series, note=note,
             styles={f"{label[n]} BF.EXISTS": (0, n != "hyperbloom") for n in names})


def memory_curve(args, out: Path) -> None:
    """B/key against keys for each data set, each point on fresh servers (scripts/bench_memory.py)."""
    mem_args = argparse.Namespace(hyperbloom=args.hb_bin, redis_server=args.redis_server,
                                  redis_module=args.redis_module, only_server=None, pin=False)
    plan = [(name, [int(x) for x in args.mem_keys.split(",")]) for name in ("strings", "hll")]
    plan += [(name, [int(x) for x in args.mem_filter_keys.split(",")]) for name in ("bloom", "cuckoo")]
    results = []
    for name, counts in plan:
        for n in counts:
            got = bm.run_set(mem_args, name, n)
            results.append({"set": name, "keys": n, **got})
            print(f"  memory {name} {n:,}: {got}", file=sys.stderr, flush=True)
    (out / "memory.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n### Memory per key (RSS growth after redis-cli --pipe, fresh servers)\n")
    print(f"{bl.machine_line(args)}; reference: {args.reference}\n")
    print("| data | keys | hyperbloom B/key | reference B/key | hyperbloom/reference |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        h, ref = r.get("hyperbloom"), r.get("redis")
        print(f"| {r['set']} | {r['keys']:,} | {h:.0f} | {f'{ref:.0f}' if ref else '—'} | "
              f"{f'{h / ref:.2f}' if h and ref else '—'} |")
    titles = {"strings": "strings", "hll": "sparse HLLs", "bloom": "BF.ADD (default filter)",
              "cuckoo": "CF.ADD (default filter)"}
    for fname, sets, title in (("memory.svg", ("strings", "hll"),
                                "RSS per key: strings (16-byte keys, ≤8-byte values), sparse HLLs (3 items)"),
                               ("memory-filters.svg", ("bloom", "cuckoo"),
                                "RSS per key: small Bloom filters (capacity 100), cuckoo filters (1024)")):
        series, styles = {}, {}
        for i, name in enumerate(sets):
            for server in ("hyperbloom", "redis"):
                pts = [(r["keys"], r.get(server)) for r in results if r["set"] == name and r.get(server)]
                if pts:
                    label = f"{'hyperbloom' if server == 'hyperbloom' else 'reference'} {titles[name]}"
                    series[label] = pts
                    styles[label] = (i, server != "hyperbloom")
        svg_plot(out / fname, title, "keys loaded (log scale)", "RSS growth per key (bytes)", series,
                 logx=True, styles=styles, note=f"{bl.machine_line(args)}; dashed: {args.reference}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--requests", type=int, default=50000, help="-n of each clients point")
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--links-requests", type=int, default=300000,
                    help="-n of each links point (CPU time is read in 10 ms ticks: more requests, finer steps)")
    ap.add_argument("--mem-keys", default="10000,100000,1000000,10000000", help="key counts for strings, HLLs")
    ap.add_argument("--mem-filter-keys", default="10000,100000,1000000", help="key counts for BF, CF")
    ap.add_argument("--pin", action="store_true", help="server on core 1, redis-benchmark on core 0")
    ap.add_argument("--only", default="clients,links,memory", help="comma-separated: clients, links, memory")
    ap.add_argument("--out", default=str(bl.ROOT / "docs" / "bench"))
    ap.add_argument("--redis-module", default="auto",
                    help="module for the reference (default: scripts/fetch-redisbloom.sh; none: no module)")
    ap.add_argument("--hyperbloom", default=None)
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark"))
    args = ap.parse_args()
    args.threads = 0
    args.clients = 50
    args.redis_module = bl.resolve_redis_module(args.redis_module)
    only = set(args.only.split(","))
    target = Path(os.environ.get("CARGO_TARGET_DIR") or bl.ROOT / "target")
    # Absolute: each server runs in its own temporary directory.
    args.hb_bin = str(Path(args.hyperbloom or target / "release" / "hyperbloom").resolve())
    servers = []
    started = time.monotonic()
    out = Path(args.out)
    try:
        wrapper = ["taskset", "-c", bl.SERVER_CORE] if args.pin else []
        if only & {"clients", "links"}:
            for name, argv in bl.server_argv(args, args.hb_bin):
                servers.append(bl.Server(name, argv, wrapper))
            args.reference = reference_name(servers[1])
        if "clients" in only:
            clients_curve(args, servers, out)
        if "links" in only:
            links_curve(args, servers, out)
    finally:
        for s in servers:
            s.stop()
    if "memory" in only:
        if not servers:
            probe = bl.Server("redis", dict(bl.server_argv(args, args.hb_bin))["redis"])
            try:
                args.reference = reference_name(probe)
            finally:
                probe.stop()
        memory_curve(args, out)
    print(f"\n({time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

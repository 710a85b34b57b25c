#!/usr/bin/env python3
"""Renders example.py's results (--json) to a picture: PNG or SVG, chosen by the file's extension.

    pip install -r requirements-plot.txt
    python plot.py results.json results.png

Four panels: lookup latency distribution with and without the filter; queries and CPU time that
reached PostgreSQL; the false-positive rate as a filter fills past its planned capacity (measured,
predicted, and what a single non-scaling link would give); cold-start restore against a rebuild.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BLUE, ORANGE, GREY, GREEN = "#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c"


def main(src: str, dst: str) -> None:
    res = json.loads(open(src).read())
    wl = res["workload"]
    a, b = wl["without_filter"], wl["with_filter"]
    rows = res["table"]["rows"]
    fig, ax = plt.subplots(2, 2, figsize=(12, 8.5))
    fig.suptitle(f"hyperbloom in front of PostgreSQL: {rows:,} rows, {wl['queries']:,} lookups, "
                 f"{wl['misses'] / wl['queries']:.0%} misses", fontsize=13)

    # 1. Latency distribution.
    p = ax[0][0]
    frac = [i / 199 for i in range(200)]
    p.plot(a["latency_ms"]["cdf"], frac, color=GREY, label="PostgreSQL only")
    p.plot(b["latency_ms"]["cdf"], frac, color=BLUE, label="hyperbloom first")
    if a["miss_latency_ms"] and b["miss_latency_ms"]:
        p.plot(b["miss_latency_ms"]["cdf"], frac, color=BLUE, ls=":", label="hyperbloom first, misses only")
    p.set_xscale("log")
    p.set_xlabel("lookup latency (ms, log scale)")
    p.set_ylabel("fraction of lookups")
    for name, run, color in (("without", a, GREY), ("with", b, BLUE)):
        p.axvline(run["latency_ms"]["p95"], color=color, ls="--", lw=0.8)
    p.set_title(f"latency: p95 {a['latency_ms']['p95']:.3f} ms -> {b['latency_ms']['p95']:.3f} ms")
    p.legend(loc="lower right", fontsize=9)
    p.grid(alpha=0.3)

    # 2. Queries and CPU that reached PostgreSQL, as a share of the run without the filter.
    p = ax[0][1]
    labels = ["queries to PostgreSQL", "PostgreSQL backend CPU", "wall time of the run"]
    without = [a["db_queries"], a["pg_backend_cpu_seconds"], a["wall_seconds"]]
    with_ = [b["db_queries"], b["pg_backend_cpu_seconds"], b["wall_seconds"]]
    fmt = ["{:,.0f}", "{:.2f} s", "{:.2f} s"]
    for i, (w0, w1, f) in enumerate(zip(without, with_, fmt)):
        p.bar(i - 0.2, 100, 0.4, color=GREY, label="PostgreSQL only" if i == 0 else None)
        share = 100 * w1 / w0 if w0 else 0
        p.bar(i + 0.2, share, 0.4, color=BLUE, label="hyperbloom first" if i == 0 else None)
        p.text(i - 0.2, 101, f.format(w0), ha="center", va="bottom", fontsize=9)
        p.text(i + 0.2, share + 1, f.format(w1), ha="center", va="bottom", fontsize=9)
    p.set_xticks(range(len(labels)), labels)
    p.set_ylim(0, max(125, 100 * max(w1 / w0 for w0, w1 in zip(without, with_) if w0) + 25))
    p.set_ylabel("% of the run without the filter")
    p.set_title(f"{wl['misses_kept_from_db']:.3%} of misses never reach PostgreSQL")
    p.legend(loc="upper right", fontsize=9, ncols=2)

    # 3. False-positive rate as the filter fills.
    p = ax[1][0]
    curve = res["fp_curve"]
    fill = [c["fill"] for c in curve]
    configured = res["config"]["error_rate"]
    p.plot(fill, [c["single_link_fp"] for c in curve], color=GREY, ls="--",
           label="one fixed-size filter (theory)")
    p.plot(fill, [c["predicted_fp"] for c in curve], color=BLUE, label="scaling filter, predicted")
    p.plot(fill, [c["measured_fp"] for c in curve], "o", color=BLUE, ms=4, label="scaling filter, measured")
    p.axhline(configured, color=ORANGE, lw=1, label=f"configured {configured}")
    h = res["health"]
    p.axvline(res["config"]["rebuild_at"], color=GREEN, lw=1, ls=":", label="rebuild threshold")
    p.set_yscale("log")
    p.set_ylim(1e-6, 0.2)
    p.set_xlabel("items / planned capacity")
    p.set_ylabel("false-positive rate (log)")
    p.set_title(f"FP rate as a filter fills (capacity {res['config']['curve_capacity']:,})")
    p.legend(fontsize=8, loc="lower right")
    p.grid(alpha=0.3)

    # 4. Cold start.
    p = ax[1][1]
    cs = res["cold_start"]
    names = ["LOADCHUNK from\nSCANDUMP file", "restart from\nRDB snapshot", "rebuild from\nthe table"]
    values = [cs["loadchunk_seconds"], cs["rdb_restart_seconds"], cs["rebuild_from_table_seconds"]]
    bars = p.bar(names, values, color=[BLUE, BLUE, GREY])
    for bar, v in zip(bars, values):
        p.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.2f} s", ha="center", va="bottom")
    p.set_ylabel("seconds until the filter answers")
    p.set_title(f"cold start of a {res['warm']['bf_info']['Size'] / 2**20:.1f} MiB filter "
                f"(rebuild after growth: {h['rebuild']['build_seconds']:.1f} s, no gap)")

    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

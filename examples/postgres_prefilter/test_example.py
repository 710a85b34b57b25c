"""The example at a small N against a real PostgreSQL and the real hyperbloom release binary.

One run of every part (about 20 s with 50,000 rows), then one test per claim. The example asserts
its own invariants while it runs too, so a broken part fails the fixture and every test with it.
Part 7 (pub/sub) runs against hyperbloom when it has SUBSCRIBE, and always against a real
redis-server when one is installed, so the synchronisation code is tested either way.

    python -m pytest -q examples/postgres_prefilter
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import example  # noqa: E402
import sync  # noqa: E402
from harness import ServerProcess  # noqa: E402

ARGS = ["--rows", "50000", "--queries", "10000", "--new-users", "500", "--deletes", "500",
        "--probes", "200000", "--sync-adds", "1000", "--quiet"]


@pytest.fixture(scope="module")
def results():
    return example.run(example.parse_args(ARGS))


def test_no_false_negatives(results):
    assert results["inserts"]["not_found_after_add"] == 0
    assert results["workload"]["false_negatives"] == 0
    assert results["workload"]["wrong_answers"] == 0
    assert results["deletes"]["false_negatives"] == 0 and results["deletes"]["rows_checked"] > 50_000 - 500
    assert results["health"]["false_negatives_after"] == 0


def test_false_positive_rate_within_2x_of_configured(results):
    configured = results["config"]["error_rate"]
    assert results["workload"]["probe_fp_rate"] <= 2 * configured
    assert results["workload"]["fp_rate"] <= 2 * configured
    assert results["health"]["fp_grown"] <= 2 * configured
    for point in results["fp_curve"]:
        assert point["measured_fp"] <= 2 * configured, point


def test_false_positive_prediction_matches_measurement(results):
    # Pooled over the fill curve (hundreds of expected false positives), measured and predicted
    # counts must agree within a factor of 1.5: the health report's prediction is meaningful.
    probes = results["config"]["curve_probes"]
    measured = sum(p["measured_fp"] * probes for p in results["fp_curve"])
    predicted = sum(p["predicted_fp"] * probes for p in results["fp_curve"])
    assert predicted > 100
    assert predicted / 1.5 <= measured <= predicted * 1.5, (measured, predicted)


def test_most_misses_kept_from_postgres(results):
    wl = results["workload"]
    assert wl["misses"] > 0.8 * wl["queries"]
    assert wl["misses_kept_from_db"] >= 0.8
    assert wl["without_filter"]["db_queries"] == wl["queries"]
    assert wl["with_filter"]["db_queries"] < wl["queries"] - 0.8 * wl["misses"]


def test_cuckoo_filter_forgets_deleted_rows(results):
    d = results["deletes"]
    assert d["deleted_still_maybe_bloom"] == d["deleted"]  # a Bloom filter cannot delete
    assert d["deleted_still_maybe_cuckoo"] <= 0.05 * d["deleted"]


def test_cold_start_restores_identical_filter(results):
    cs = results["cold_start"]
    assert cs["identical_loadchunk"] and cs["identical_scandump_bytes"] and cs["identical_rdb"]
    assert cs["checked_items"] > 200_000


def test_rebuild_swaps_without_gap(results):
    h = results["health"]
    assert h["grown"]["fill"] > results["config"]["rebuild_at"] >= h["before"]["fill"]
    assert h["after"]["fill"] < h["grown"]["fill"]
    assert h["during_rebuild"]["lookups"] > 0 and h["during_rebuild"]["gaps"] == 0
    assert h["during_rebuild"]["writes"] > 0 and h["during_rebuild"]["write_not_found"] == 0
    # The rebuilt filter no longer holds the deleted rows (beyond false positives).
    assert h["deleted_still_maybe_bloom_after"] <= 0.05 * results["deletes"]["deleted"]


def test_instances_in_step_on_hyperbloom(results):
    s = results["in_step"]
    if "skipped" in s:
        pytest.skip(f"hyperbloom has no pub/sub yet: {s['skipped']}")
    assert s["complete"] and s["missing_peer_items"] == 0 and s["filters_identical"]
    assert s["messages"] == 2 * results["config"]["sync_adds"]


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_instances_in_step_on_redis_server(tmp_path):
    with ServerProcess(shutil.which("redis-server"), tmp_path) as server:
        assert sync.supports_pubsub("127.0.0.1", server.port)
        s = sync.run_instances(f"redis://127.0.0.1:{server.port}", adds=1000)
    assert s["complete"] and s["missing_peer_items"] == 0 and s["filters_identical"]
    assert s["messages"] == 2000


def test_pubsub_probe_agrees_with_command_info(tmp_path):
    # The probe must answer False, not hang or raise, on a server without SUBSCRIBE (hyperbloom
    # until pub/sub lands) and True on one with it; COMMAND INFO is the server's own word.
    for binary in filter(None, [example.find_hyperbloom(), shutil.which("redis-server")]):
        with ServerProcess(binary, tmp_path / Path(binary).name) as server:
            supported = sync.supports_pubsub("127.0.0.1", server.port)
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                s.sendall(b"COMMAND INFO SUBSCRIBE\r\n")
                info = s.recv(65536)
        listed = info.startswith(b"*1\r\n*") and not info.startswith(b"*1\r\n*-1")  # null = unknown
        assert supported == listed, (binary, supported, info[:100])

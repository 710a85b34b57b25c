"""t-digest (TDIGEST.*) through redis-py's ``r.tdigest()``, in each protocol mode.

Expected numbers are RedisBloom's (tdigest.md §4.10's worked example and the golden vectors); they
are exact, since hyperbloom reproduces the reference arithmetic bit for bit. redis-py shapes the
replies differently per mode (floats or ``"nan"`` strings in lists, ``TDigestInfo`` or a dict), so
the helpers below bring them to one form.
"""

from __future__ import annotations

import math

import pytest
import redis

TD = ("tdigest.create", "tdigest.reset", "tdigest.add", "tdigest.merge", "tdigest.min", "tdigest.max",
      "tdigest.quantile", "tdigest.cdf", "tdigest.trimmed_mean", "tdigest.rank", "tdigest.revrank",
      "tdigest.byrank", "tdigest.byrevrank", "tdigest.info")

INFO_FIELDS = {"Compression": "compression", "Capacity": "capacity", "Merged nodes": "merged_nodes",
               "Unmerged nodes": "unmerged_nodes", "Merged weight": "merged_weight",
               "Unmerged weight": "unmerged_weight", "Total compressions": "total_compressions",
               "Memory usage": "memory_usage"}


def floats(reply):
    return [float(x.decode() if isinstance(x, bytes) else x) for x in reply]


def info(reply):
    if isinstance(reply, dict):
        out = {}
        for k, v in reply.items():
            k = k.decode() if isinstance(k, bytes) else k
            if k in INFO_FIELDS:
                out[INFO_FIELDS[k]] = v
        return out
    return {attr: getattr(reply, attr) for attr in INFO_FIELDS.values()}


@pytest.mark.requires(*TD)
def test_create_add_info(r):
    td = r.tdigest()
    assert td.create("t", 100)
    assert info(td.info("t")) == {"compression": 100, "capacity": 610, "merged_nodes": 0,
                                  "unmerged_nodes": 0, "merged_weight": 0, "unmerged_weight": 0,
                                  "total_compressions": 0, "memory_usage": 9840}
    td.add("t", list(range(1, 11)))
    i = info(td.info("t"))
    assert (i["unmerged_nodes"], i["unmerged_weight"], i["merged_nodes"]) == (10, 10, 0)
    with pytest.raises(redis.ResponseError, match="T-Digest: key already exists"):
        td.create("t", 100)
    with pytest.raises(redis.ResponseError, match="T-Digest: key does not exist"):
        td.add("missing", [1])
    with pytest.raises(redis.ResponseError, match="val parameter needs to be a finite number"):
        td.add("t", ["inf"])
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        td.info("s")


@pytest.mark.requires(*TD)
def test_worked_example(r):
    """tdigest.md §4.10: compression 2, values 1..22."""
    td = r.tdigest()
    td.create("t", 2)
    td.add("t", list(range(1, 23)))
    assert floats(td.quantile("t", 0, 0.1, 0.25, 0.5, 0.75, 0.9, 1)) == [
        1.0, 2.3333333333333335, 6.0, 11.5, 17.15, 20.78, 22.0]
    assert floats(td.cdf("t", 2)) == [0.086363636363636365]
    assert td.rank("t", 2) == [2]
    assert td.revrank("t", 2) == [20]
    assert floats(td.byrank("t", 2, 21)) == [2.1111111111111112, 22.0]
    assert float(td.trimmed_mean("t", 0.1, 0.9)) == 11.277777777777779
    assert float(td.min("t")) == 1.0
    assert float(td.max("t")) == 22.0
    i = info(td.info("t"))
    assert (i["merged_nodes"], i["unmerged_nodes"], i["total_compressions"]) == (5, 0, 2)


@pytest.mark.requires(*TD)
def test_ranks_and_edges(r):
    td = r.tdigest()
    td.create("t", 100)
    td.add("t", [1, 2, 2, 2, 2, 3, 3, 4])
    assert td.rank("t", 1, 2, 2.5, 3, 3.5, 4, 0, 9) == [0, 3, 5, 6, 7, 7, -1, 8]
    assert td.revrank("t", 1, 2, 2.5, 3, 3.5, 4, 0, 9) == [7, 5, 3, 2, 1, 0, 8, -1]
    assert floats(td.byrank("t", 0, 100)) == [1.0, math.inf]
    assert floats(td.byrevrank("t", 0, 100)) == [4.0, -math.inf]
    assert floats(td.cdf("t", 0, 10)) == [0.0, 1.0]
    # Empty and single-observation digests answer nan (tdigest.md §4.4).
    td.create("e", 100)
    assert math.isnan(float(td.min("e")))
    assert td.rank("e", 1) == [-2]
    td.create("one", 100)
    td.add("one", [7.5])
    assert float(td.min("one")) == 7.5
    assert all(math.isnan(x) for x in floats(td.quantile("one", 0.5)))
    assert td.rank("one", 7.5) == [-9223372036854775808]


@pytest.mark.requires(*TD)
def test_merge_and_reset(r):
    td = r.tdigest()
    td.create("a", 50)
    td.create("b", 200)
    td.add("a", [float(i) for i in range(100)])
    td.add("b", [float(i) for i in range(100, 200)])
    assert td.merge("d", 2, "a", "b")
    i = info(td.info("d"))
    assert (i["compression"], i["merged_weight"] + i["unmerged_weight"]) == (200, 200)
    # Sources are compressed by the merge.
    assert info(td.info("a"))["unmerged_nodes"] == 0
    assert td.merge("d", 1, "a", compression=30)
    assert info(td.info("d"))["compression"] == 30
    assert info(td.info("d"))["merged_weight"] + info(td.info("d"))["unmerged_weight"] == 300
    assert td.merge("d", 1, "a", override=True)
    assert info(td.info("d"))["compression"] == 50
    assert float(td.min("d")) == 0.0 and float(td.max("d")) == 99.0
    with pytest.raises(redis.ResponseError, match="T-Digest: key does not exist"):
        td.merge("d", 2, "a", "nope")
    assert td.reset("a")
    assert info(td.info("a"))["merged_weight"] == 0
    assert math.isnan(float(td.max("a")))

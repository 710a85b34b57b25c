"""HyperLogLog (PF*), Bloom (BF.*) and cuckoo (CF.*) through redis-py, in RESP3 and RESP2.

Each group is skipped until hyperbloom's COMMAND INFO knows its commands, so the tests turn on by
themselves when a family lands in main. Expected values are RedisBloom 2.6 / Redis 7.0 behaviour
(see the golden vectors); the owners of the families extend these tests.
"""

from __future__ import annotations

import pytest
import redis

PF = ("pfadd", "pfcount", "pfmerge")
BF = ("bf.reserve", "bf.add", "bf.madd", "bf.exists", "bf.mexists", "bf.info", "bf.card", "bf.insert")
BF_DUMP = ("bf.scandump", "bf.loadchunk", "bf.debug")
CF = ("cf.reserve", "cf.add", "cf.addnx", "cf.exists", "cf.mexists", "cf.count", "cf.del", "cf.info",
      "cf.insert", "cf.insertnx")
CF_DUMP = ("cf.scandump", "cf.loadchunk")

BF_FIELDS = {"Capacity": "capacity", "Size": "size", "Number of filters": "filterNum",
             "Number of items inserted": "insertedNum", "Expansion rate": "expansionRate"}
CF_FIELDS = {"Size": "size", "Number of buckets": "bucketNum", "Number of filters": "filterNum",
             "Number of items inserted": "insertedNum", "Number of items deleted": "deletedNum",
             "Bucket size": "bucketSize", "Expansion rate": "expansionRate", "Max iterations": "maxIteration"}


def info(reply, fields):
    """BF.INFO / CF.INFO as redis-py returns it: a BFInfo/CFInfo object (RESP2 and the default
    mode), or with an explicit protocol=3 the raw RESP3 map. Both become {attribute: value}."""
    if isinstance(reply, dict):
        return {fields[(k.decode() if isinstance(k, bytes) else k)]: v for k, v in reply.items()}
    return {attr: getattr(reply, attr) for attr in fields.values()}


# ---------------------------------------------------------------------------------------------
# HyperLogLog: compared with a real redis-server, since Redis implements PF* itself.
# ---------------------------------------------------------------------------------------------


@pytest.mark.requires(*PF)
def test_pf_basics(r):
    assert r.pfadd("h", "a", "b", "c") == 1
    assert r.pfadd("h", "a") == 0
    assert r.pfcount("h") == 3
    assert r.pfcount("missing") == 0
    assert r.pfadd("h2", *[f"x{i}" for i in range(10_000)]) == 1
    assert abs(r.pfcount("h2") - 10_000) < 10_000 * 0.02
    assert r.pfmerge("m", "h", "h2") is True
    assert r.pfcount("m") == r.pfcount("h", "h2")
    r.set("s", "plain string")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.pfadd("s", "x")


@pytest.mark.requires(*PF)
def test_pf_same_as_redis(hb, real, protocol):
    """Counts and the HLL string bytes (sparse and dense) equal Redis's."""
    a, b = hb.client(protocol=protocol), real.client(protocol=protocol)
    for c in (a, b):
        c.pfadd("sparse", *[f"s{i}" for i in range(100)])
        c.pfadd("dense", *[f"d{i}" for i in range(5000)])
        c.pfmerge("merged", "sparse", "dense")
    for key in ("sparse", "dense", "merged"):
        assert a.pfcount(key) == b.pfcount(key)
        assert a.get(key) == b.get(key), key
    assert a.pfcount("sparse", "dense") == b.pfcount("sparse", "dense")


# ---------------------------------------------------------------------------------------------
# Bloom filters
# ---------------------------------------------------------------------------------------------


@pytest.mark.requires(*BF)
def test_bf_create_add_exists(r):
    bf = r.bf()
    assert bf.create("bloom", 0.01, 1000)
    assert bf.add("bloom", "foo") == 1
    assert bf.add("bloom", "foo") == 0
    assert bf.madd("bloom", "foo", "bar") == [0, 1]
    assert bf.exists("bloom", "foo") == 1
    assert bf.exists("bloom", "nope") == 0
    assert bf.mexists("bloom", "foo", "bar", "nope") == [1, 1, 0]
    assert bf.card("bloom") == 2
    assert bf.card("missing") == 0
    with pytest.raises(redis.ResponseError, match="item exists"):
        bf.create("bloom", 0.01, 1000)


@pytest.mark.requires(*BF)
def test_bf_info(r):
    bf = r.bf()
    bf.add("auto", "x")
    assert info(bf.info("auto"), BF_FIELDS) == {
        "capacity": 100, "size": 240, "filterNum": 1, "insertedNum": 1, "expansionRate": 2}
    bf.create("ns", 0.01, 3, noScale=True)
    got = info(bf.info("ns"), BF_FIELDS)
    assert (got["capacity"], got["size"], got["expansionRate"]) == (3, 104, None)
    with pytest.raises(redis.ResponseError):
        bf.create("bad", 0.01, 3, expansion=4, noScale=True)


@pytest.mark.requires(*BF)
def test_bf_insert_and_errors(r):
    bf = r.bf()
    assert bf.insert("ins", ["a", "b", "a"], capacity=10, error=0.01) == [1, 1, 0]
    with pytest.raises(redis.ResponseError, match="not found"):
        bf.insert("nocreate", ["a"], noCreate=True)
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        bf.add("s", "a")
    assert bf.exists("s", "a") == 0  # RedisBloom answers 0 on a wrong-type key


@pytest.mark.requires(*BF)
def test_bf_scaling(r):
    bf = r.bf()
    bf.create("grow", 0.01, 10, expansion=2)
    bf.madd("grow", *[f"item:{i}" for i in range(10000, 10100)])
    got = info(bf.info("grow"), BF_FIELDS)
    assert (got["capacity"], got["size"], got["filterNum"], got["insertedNum"]) == (150, 568, 4, 98)


@pytest.mark.requires(*BF, *BF_DUMP)
def test_bf_scandump_loadchunk_roundtrip(r):
    bf = r.bf()
    bf.create("src", 0.01, 1000)
    bf.madd("src", *[f"i{i}" for i in range(500)])
    chunks, it = [], 0
    while True:
        it, data = bf.scandump("src", it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks:
        bf.loadchunk("dst", it, data)
    assert info(bf.info("dst"), BF_FIELDS)["insertedNum"] == 500
    assert bf.mexists("dst", *[f"i{i}" for i in range(500)]) == [1] * 500
    assert r.execute_command("BF.DEBUG", "src") == r.execute_command("BF.DEBUG", "dst")


# ---------------------------------------------------------------------------------------------
# Cuckoo filters
# ---------------------------------------------------------------------------------------------


@pytest.mark.requires(*CF)
def test_cf_basics(r):
    cf = r.cf()
    assert cf.create("cuckoo", 1000)
    assert cf.add("cuckoo", "filter") == 1
    assert cf.add("cuckoo", "filter") == 1  # CF.ADD allows duplicates
    assert cf.addnx("cuckoo", "filter") == 0
    assert cf.addnx("cuckoo", "new") == 1
    assert cf.exists("cuckoo", "filter") == 1
    assert cf.exists("cuckoo", "nope") == 0
    assert cf.mexists("cuckoo", "filter", "new", "nope") == [1, 1, 0]
    assert cf.count("cuckoo", "filter") == 2
    assert cf.delete("cuckoo", "filter") == 1
    assert cf.count("cuckoo", "filter") == 1
    assert cf.insert("ins", ["a", "b"]) == [1, 1]
    assert cf.insertnx("ins", ["a", "c"]) == [0, 1]
    with pytest.raises(redis.ResponseError, match="Not found"):
        cf.delete("missing", "x")


@pytest.mark.requires(*CF)
def test_cf_info(r):
    cf = r.cf()
    cf.create("c", 1000)
    cf.add("c", "x")
    assert info(cf.info("c"), CF_FIELDS) == {
        "size": 1080, "bucketNum": 512, "filterNum": 1, "insertedNum": 1, "deletedNum": 0,
        "bucketSize": 2, "expansionRate": 1, "maxIteration": 20}
    with pytest.raises(redis.ResponseError, match="not found"):
        cf.info("missing")


@pytest.mark.requires(*CF, *CF_DUMP)
def test_cf_scandump_loadchunk_roundtrip(r):
    cf = r.cf()
    cf.create("src", 1000)
    for i in range(300):
        cf.add("src", f"i{i}")
    chunks, it = [], 0
    while True:
        it, data = cf.scandump("src", it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks:
        cf.loadchunk("dst", it, data)
    assert info(cf.info("dst"), CF_FIELDS)["insertedNum"] == 300
    assert cf.mexists("dst", *[f"i{i}" for i in range(300)]) == [1] * 300


@pytest.mark.requires("bf.add", "cf.add")
def test_types_do_not_mix(r):
    r.bf().add("b", "x")
    r.cf().add("c", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.cf().add("b", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.bf().add("c", "x")
    assert r.type("b") == b"MBbloom--"
    assert r.type("c") == b"MBbloomCF"

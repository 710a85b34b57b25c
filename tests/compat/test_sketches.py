"""Count-min sketches (CMS.*) and Top-K (TOPK.*) through redis-py's ``r.cms()`` and ``r.topk()``,
in each protocol mode.

Expected values are RedisBloom's (cms.md / topk.md worked examples and the golden vectors). The
Top-K cases only use inputs whose replies do not depend on random decay draws (decay 1, or items
that never share a bucket), so they are exact.
"""

from __future__ import annotations

import pytest
import redis

CMS = ("cms.initbydim", "cms.initbyprob", "cms.incrby", "cms.query", "cms.merge", "cms.info")
TOPK = ("topk.reserve", "topk.add", "topk.incrby", "topk.query", "topk.count", "topk.list", "topk.info")


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def texts(reply):
    """redis-py decodes TOPK replies to str in RESP2 and leaves bytes in RESP3."""
    return [text(v) for v in reply]


def info(reply, fields):
    """CMSInfo / TopKInfo objects (or a dict in raw RESP3) as {field: value}."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items() if text(k) in fields}
    return {f: getattr(reply, f) for f in fields}


# ---------------------------------------------------------------------------------------------
# CMS
# ---------------------------------------------------------------------------------------------


@pytest.mark.requires(*CMS)
def test_cms_init_incr_query_info(r):
    cms = r.cms()
    assert cms.initbydim("dim", 1000, 5)
    assert cms.initbyprob("prob", 0.001, 0.01)
    assert info(cms.info("prob"), ("width", "depth", "count")) == {"width": 2000, "depth": 7, "count": 0}
    assert cms.incrby("dim", ["foo", "bar", "foo"], [5, 2, 3]) == [5, 2, 8]
    assert cms.query("dim", "foo", "bar", "never") == [8, 2, 0]
    assert info(cms.info("dim"), ("width", "depth", "count")) == {"width": 1000, "depth": 5, "count": 10}
    with pytest.raises(redis.ResponseError, match="CMS: key already exists"):
        cms.initbydim("dim", 10, 2)
    with pytest.raises(redis.ResponseError, match="CMS: key does not exist"):
        cms.query("missing", "x")
    with pytest.raises(redis.ResponseError, match="CMS: Number cannot be negative"):
        cms.incrby("dim", ["foo"], [-1])
    with pytest.raises(redis.ResponseError, match="CMS: invalid width"):
        cms.initbydim("bad", 0, 5)
    with pytest.raises(redis.ResponseError, match="CMS: Insufficient memory to create the key"):
        cms.initbydim("huge", 1_000_000_000_000, 1)
    r.set("s", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        cms.incrby("s", ["a"], [1])


@pytest.mark.requires(*CMS)
def test_cms_merge_with_weights(r):
    cms = r.cms()
    for k in ("a", "b", "dest"):
        assert cms.initbydim(k, 100, 4)
    cms.incrby("a", ["x", "y"], [3, 1])
    cms.incrby("b", ["x"], [10])
    assert cms.merge("dest", 2, ["a", "b"])
    assert cms.query("dest", "x", "y") == [13, 1]
    assert cms.merge("dest", 2, ["a", "b"], weights=[2, 3])
    assert cms.query("dest", "x", "y") == [36, 2]
    assert info(cms.info("dest"), ("count",)) == {"count": 2 * 4 + 3 * 10}
    with pytest.raises(redis.ResponseError, match="CMS: MERGE overflow"):
        cms.merge("dest", 2, ["a", "b"], weights=[1, -1])
    cms.initbydim("other", 10, 4)
    with pytest.raises(redis.ResponseError, match="CMS: width/depth is not equal"):
        cms.merge("dest", 2, ["a", "other"])


@pytest.mark.requires(*CMS)
def test_cms_incrby_overflow_element(r):
    """cms.md §8: an estimate of exactly 2^32 - 1 comes back as an error inside the array."""
    cms = r.cms()
    cms.initbydim("c", 5, 2)
    res = r.execute_command("CMS.INCRBY", "c", "a", 4294967295, "b", 1)
    assert isinstance(res[0], redis.ResponseError) and "CMS: INCRBY overflow" in str(res[0])
    assert res[1] == 1


# ---------------------------------------------------------------------------------------------
# TOPK
# ---------------------------------------------------------------------------------------------


@pytest.mark.requires(*TOPK)
@pytest.mark.filterwarnings("ignore:Call to deprecated count")
def test_topk_worked_example(r):
    """topk.md §6.4: k = 3 on a 50 × 4 sketch with decay 1; the four items never collide."""
    tk = r.topk()
    assert tk.reserve("t", 3, 50, 4, 1)
    assert texts(tk.add("t", "a", "b", "c")) == [None, None, None]
    assert texts(tk.add("t", "d")) == ["a"]
    assert texts(tk.add("t", "a", "a")) == ["c", None]
    assert texts(tk.list("t")) == ["a", "d", "b"]
    assert texts(tk.list("t", withcount=True)) == ["a", 3, "d", 1, "b", 1]
    assert [bool(x) for x in tk.query("t", "a", "c", "zzz")] == [True, False, False]
    assert tk.count("t", "a", "d", "c") == [3, 1, 1]
    assert info(tk.info("t"), ("k", "width", "depth")) == {"k": 3, "width": 50, "depth": 4}
    assert float(text(info(tk.info("t"), ("decay",))["decay"])) == 1.0


@pytest.mark.requires(*TOPK)
def test_topk_incrby_and_errors(r):
    tk = r.topk()
    assert tk.reserve("t", 2, 20, 3, 0.5)
    assert texts(tk.incrby("t", ["x", "y"], [5, 7])) == [None, None]
    assert texts(tk.list("t", withcount=True)) == ["y", 7, "x", 5]
    with pytest.raises(redis.ResponseError, match="TopK: key already exists"):
        tk.reserve("t", 2, 20, 3, 0.5)
    with pytest.raises(redis.ResponseError, match="TopK: invalid decay value"):
        tk.reserve("u", 2, 20, 3, 1.5)
    with pytest.raises(redis.ResponseError, match="TopK: key does not exist"):
        tk.add("missing", "x")
    with pytest.raises(redis.ResponseError, match="Insufficient memory to create topk data structure"):
        tk.reserve("huge", 4294967295, 8, 7, 0.9)
    res = r.execute_command("TOPK.INCRBY", "t", "z", 100001)
    assert len(res) == 1 and "increment must be an integer" in str(res[0])
    assert r.ping()


@pytest.mark.requires(*CMS, *TOPK)
def test_types_dump_restore(r):
    r.cms().initbydim("c", 20, 5)
    r.cms().incrby("c", ["foo"], [3])
    r.topk().reserve("t", 3, 50, 4, 1)
    r.topk().add("t", "a", "b")
    assert text(r.type("c")) == "CMSk-TYPE"
    assert text(r.type("t")) == "TopK-TYPE"
    for key in ("c", "t"):
        payload = r.dump(key)
        assert r.restore(key + ":copy", 0, payload)
    assert r.cms().query("c:copy", "foo") == [3]
    assert r.topk().list("t:copy", withcount=True) == r.topk().list("t", withcount=True)

"""redis-py (8.x) against hyperbloom, in RESP3 (redis-py's default: HELLO 3 on connect) and RESP2.

Every test taking the ``r`` fixture runs three times: redis-py's default (RESP3 on the wire, replies
shaped as in RESP2), explicit ``protocol=3`` and ``protocol=2``. What redis-py needs at connection
time (HELLO 3 with proto 3, CLIENT SETINFO, CLIENT SETNAME, SELECT) is exercised by simply connecting.
"""

from __future__ import annotations

import threading

import pytest
import redis


def test_default_protocol_is_resp3(hb):
    """A client built with no ``protocol`` argument speaks RESP3 and works."""
    c = redis.Redis(host="127.0.0.1", port=hb.port)
    assert c.ping() is True
    assert c.connection_pool.get_connection().protocol in (3, "3")
    info = c.client_info()
    assert info["resp"] in (3, "3")


def test_set_get_binary(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.get("missing") is None
    value = bytes(range(256)) * 4
    key = b"\x00bin\r\nkey\xff"
    assert r.set(key, value)
    assert r.get(key) == value
    assert r.exists(key, "k", "missing") == 2
    assert r.type(key) == b"string"
    assert r.delete(key, "missing") == 1
    assert r.get(key) is None


def test_decode_responses(hb, protocol):
    c = hb.client(protocol=protocol, decode_responses=True)
    c.set("greeting", "héllo wörld")
    assert c.get("greeting") == "héllo wörld"


@pytest.mark.requires("incr", "incrby", "decr", "incrbyfloat")
def test_counters(r):
    assert r.incr("n") == 1
    assert r.incrby("n", 41) == 42
    assert r.decr("n") == 41
    assert r.incrbyfloat("f", 2.5) == 2.5
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="not an integer or out of range"):
        r.incr("s")


@pytest.mark.requires("expire", "ttl", "pttl", "persist")
def test_expire_ttl(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.ttl("missing") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert 99_000 <= r.pttl("k") <= 100_000
    assert r.persist("k") is True
    assert r.ttl("k") == -1
    assert r.set("e", "v", px=1)
    # An expired key is never visible.
    import time

    time.sleep(0.01)
    assert r.get("e") is None


@pytest.mark.requires("mset", "mget")
def test_mset_mget(r):
    assert r.mset({"a": "1", "b": b"\x00\xff"}) is True
    assert r.mget("a", "b", "missing") == [b"1", b"\x00\xff", None]


def test_pipeline_transaction(r):
    p = r.pipeline(transaction=True)
    p.set("a", "1").get("a").set("b", "2").get("b")
    assert p.execute() == [True, b"1", True, b"2"]


def test_pipeline_without_transaction(r):
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.set(f"k{i}", i)
    for i in range(500):
        p.get(f"k{i}")
    out = p.execute()
    assert out[:500] == [True] * 500
    assert out[500:] == [str(i).encode() for i in range(500)]


def test_pipeline_errors_are_returned_in_place(r):
    p = r.pipeline(transaction=False)
    p.set("a", "1").execute_command("FOO").get("a")
    out = p.execute(raise_on_error=False)
    assert out[0] is True
    assert isinstance(out[1], redis.ResponseError)
    assert out[2] == b"1"


def test_transaction_execabort(r):
    """A queued command with bad arity aborts the whole transaction (EXECABORT)."""
    p = r.pipeline(transaction=True)
    p.set("a", "1").execute_command("GET")  # wrong arity: refused at queue time
    with pytest.raises(redis.ResponseError):
        p.execute()
    assert r.get("a") is None


def test_watch_transaction_retries(hb, r, protocol):
    """``r.transaction`` retries its function when a WATCHed key changes before EXEC."""
    other = hb.client(protocol=protocol)
    r.set("balance", "10")
    attempts = []

    def move(pipe):
        attempts.append(1)
        current = int(pipe.get("balance"))
        if len(attempts) == 1:
            other.set("balance", "100")  # another client changes the watched key
        pipe.multi()
        pipe.set("balance", current + 1)

    r.transaction(move, "balance")
    assert len(attempts) == 2
    assert r.get("balance") == b"101"


def test_watch_aborts_exec(hb, r, protocol):
    other = hb.client(protocol=protocol)
    with r.pipeline() as p:
        p.watch("w")
        other.set("w", "changed")
        p.multi()
        p.set("w", "mine")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("w") == b"changed"


def test_client_name(hb, r, protocol):
    assert r.client_setname("compat-suite") is True
    assert r.client_getname() in (b"compat-suite", "compat-suite")
    with pytest.raises(redis.ResponseError):
        r.client_setname("has space")
    # A name given to the constructor is sent with CLIENT SETNAME on connect.
    named = hb.client(protocol=protocol, client_name="from-ctor")
    assert named.client_getname() in (b"from-ctor", "from-ctor")
    assert r.client_id() > 0
    assert any(c.get("name") in (b"from-ctor", "from-ctor") for c in r.client_list())


def test_info(r):
    info = r.info()
    assert info["redis_version"].split(".")[0] == "7"
    assert info["arch_bits"] == 64
    assert info["cluster_enabled"] == 0
    assert info["role"] == "master"
    assert isinstance(info["uptime_in_seconds"], int)
    r.set("a", "1")
    ks = r.info("keyspace")
    assert ks["db0"]["keys"] == 1
    assert "used_memory" in r.info("memory")


def test_info_modules_advertise_bloom(r):
    """redis-py's own test setup needs a module named bf if any module line is present."""
    modules = r.module_list()
    names = [m.get(b"name", m.get("name")) for m in modules]
    assert b"bf" in names or "bf" in names


def test_config_get(r):
    assert r.config_get("databases") == {"databases": "16"}
    maxclients = r.config_get("maxclients")
    assert int(maxclients["maxclients"]) > 0
    assert r.config_get("save") == {"save": ""}
    assert r.config_set("hz", 20) is True
    assert r.config_get("hz") == {"hz": "20"}


def test_hello(r, protocol):
    # redis-py refuses r.hello() (it owns the protocol); the raw command is what it sends on connect.
    reply = r.execute_command("HELLO")
    if isinstance(reply, list):  # RESP2: a flat array
        reply = dict(zip(reply[::2], reply[1::2]))
    reply = {(k.decode() if isinstance(k, bytes) else k): v for k, v in reply.items()}
    assert reply["proto"] == (2 if protocol == 2 else 3)
    assert reply["server"] in (b"redis", "redis")
    assert reply["mode"] in (b"standalone", "standalone")
    assert reply["role"] in (b"master", "master")


def test_select_db(hb, protocol):
    c = hb.client(protocol=protocol, db=3)
    c.set("in3", "x")
    assert c.dbsize() == 1
    assert hb.client(protocol=protocol).get("in3") is None


def test_error_messages(r):
    with pytest.raises(redis.ResponseError, match="unknown command 'FOO'"):
        r.execute_command("FOO", "a")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET")


def test_concurrent_clients(hb, protocol):
    """Several threads with their own connections; every write is visible afterwards."""
    def work(t):
        c = hb.client(protocol=protocol)
        p = c.pipeline(transaction=False)
        for i in range(200):
            p.set(f"t{t}:{i}", i)
        p.execute()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert hb.client(protocol=protocol).dbsize() == 1600

"""RDB snapshots cross between hyperbloom and a real redis-server (strings and HyperLogLogs, which Redis
loads without any module): what one server SAVEs, the other loads at start-up with the same values,
and DUMP payloads RESTORE on the other side.

A fresh server is started on the other side's snapshot (``--dir`` + ``--dbfilename``) for each
direction; the session servers are not touched apart from SAVE.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import Server, _hyperbloom_argv, _redis_argv


def fill(c, ttl: bool):
    c.set("plain", "hello")
    c.set("int", "12345")
    c.set("bin", bytes(range(256)))
    c.set("compressible", "a" * 1000)
    c.set("expiring", "soon")
    if ttl:
        c.expire("expiring", 100_000)
    c.pfadd("hll:sparse", *[f"s{i}" for i in range(50)])
    c.pfadd("hll:dense", *[f"d{i}" for i in range(5000)])
    c.pfcount("hll:dense")  # stores the cached cardinality in the string
    c.pfadd("hll:empty")
    c.execute_command("SELECT", 2)
    c.set("in-db-2", "x")
    c.execute_command("SELECT", 0)


def has_ttl(hb) -> bool:
    """Expiry is compared once hyperbloom has EXPIRE and TTL."""
    return hb.has_command("expire") and hb.has_command("ttl")


KEYS = ["plain", "int", "bin", "compressible", "expiring", "hll:sparse", "hll:dense", "hll:empty"]


def snapshot_of(c, ttl: bool):
    out = {k: c.get(k) for k in KEYS}
    if ttl:
        out["ttl>0"] = c.ttl("expiring") > 0
    out["pfcount"] = c.pfcount("hll:sparse", "hll:dense")
    c.execute_command("SELECT", 2)
    out["db2"] = c.get("in-db-2")
    c.execute_command("SELECT", 0)
    return out


def start_on_snapshot(kind: str, rdb: Path) -> Server:
    def argv(port, workdir):
        shutil.copy(rdb, Path(workdir) / "dump.rdb")
        base = _hyperbloom_argv if kind == "hyperbloom" else _redis_argv
        return base(port, workdir) + ["--dbfilename", "dump.rdb"]

    return Server(f"{kind}-loaded", argv).start()


@pytest.mark.requires("save", "pfadd", "pfcount")
def test_hyperbloom_snapshot_loads_in_redis(hb, real):
    c, ttl = hb.client(protocol=2), has_ttl(hb)
    fill(c, ttl)
    want = snapshot_of(c, ttl)
    assert c.save() is True
    loaded = start_on_snapshot("redis", Path(hb.dir) / "dump.rdb")
    try:
        got = snapshot_of(loaded.client(protocol=2), ttl)
        assert got == want
    finally:
        loaded.cleanup()


@pytest.mark.requires("save", "pfadd", "pfcount")
def test_redis_snapshot_loads_in_hyperbloom(hb, real):
    c, ttl = real.client(protocol=2), has_ttl(hb)
    fill(c, ttl)
    want = snapshot_of(c, ttl)
    assert c.save() is True
    loaded = start_on_snapshot("hyperbloom", Path(real.dir) / "dump.rdb")
    try:
        got = snapshot_of(loaded.client(protocol=2), ttl)
        assert got == want
    finally:
        loaded.cleanup()


@pytest.mark.requires("dump", "restore", "pfadd")
def test_dump_restore_across(hb, real):
    h, r = hb.client(protocol=2), real.client(protocol=2)
    fill(h, False)
    fill(r, False)
    for key in KEYS:
        # The same value dumps to the same bytes, and each side restores the other's payload.
        assert h.dump(key) == r.dump(key), key
        h.restore(key + ":from-redis", 0, r.dump(key))
        r.restore(key + ":from-hb", 0, h.dump(key))
        assert h.get(key + ":from-redis") == r.get(key + ":from-hb") == r.get(key)

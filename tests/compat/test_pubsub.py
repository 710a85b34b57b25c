"""Pub/sub, client-side caching and MONITOR through real clients.

- redis-py's ``pubsub()`` with ``run_in_thread`` and with ``redis.asyncio``, in RESP2 and RESP3;
- redis-py's client-side cache (RESP3 + ``cache_config``, redis-py >= 5.1): a cached GET must see
  another client's write, which only the server's invalidation push can tell it;
- ioredis (Node) subscribe/psubscribe (skipped, with the reason, only when ``node`` is absent;
  scripts/test.sh installs ioredis into the target directory when it is missing);
- ``redis-cli MONITOR`` and ``redis-cli --csv psubscribe``, compared with the same redis-cli
  against a real redis-server.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis

from conftest import REDIS_CLI, ROOT

NODE = shutil.which("node")
NODE_MODULES = Path(os.environ.get("HYPERBLOOM_NODE_DIR") or ROOT / "target" / "compat-node") / "node_modules"


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redispy_pubsub_in_a_thread(hb, protocol):
    r = hb.client(protocol=protocol)
    got = []
    p = r.pubsub()
    p.subscribe(**{"news": lambda m: got.append(("news", m["data"]))})
    p.psubscribe(**{"w*": lambda m: got.append((m["pattern"], m["channel"], m["data"]))})
    t = p.run_in_thread(sleep_time=0.01, daemon=True)
    try:
        assert wait_for(lambda: r.pubsub_numsub("news") == [(b"news", 1)] and r.pubsub_numpat() == 1)
        for i in range(200):
            assert r.publish("news", f"m{i}") == 1
        assert r.publish("weather", "sun") == 1
        assert wait_for(lambda: len(got) == 201)
        assert got[:200] == [("news", f"m{i}".encode()) for i in range(200)]
        assert got[200] == (b"w*", b"weather", b"sun")
    finally:
        t.stop()
        t.join(5)
        p.close()
        r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redispy_asyncio_pubsub(hb, protocol):
    async def main():
        r = redis.asyncio.Redis(host="127.0.0.1", port=hb.port, protocol=protocol)
        p = r.pubsub()
        await p.subscribe("a", "b")
        await p.psubscribe("c*")
        confirmations = [await p.get_message(timeout=5) for _ in range(3)]
        assert [m["type"] for m in confirmations] == ["subscribe", "subscribe", "psubscribe"]
        for ch, msg in [("a", "1"), ("b", "2"), ("cx", "3"), ("zz", "4")]:
            await r.publish(ch, msg)
        got = []
        while len(got) < 3:
            m = await p.get_message(ignore_subscribe_messages=True, timeout=5)
            assert m is not None, got
            got.append((m["type"], m["channel"], m["data"]))
        assert got == [("message", b"a", b"1"), ("message", b"b", b"2"), ("pmessage", b"cx", b"3")]
        await p.unsubscribe()
        await p.punsubscribe()
        await p.aclose()
        await r.aclose()

    asyncio.run(main())


def test_redispy_client_side_cache(hb, monkeypatch):
    try:
        from redis.cache import CacheConfig
    except ImportError:  # redis-py < 5.1
        pytest.skip(f"redis-py {redis.__version__} has no client-side cache (needs >= 5.1)")
    # redis-py >= 6 enables its cache only for servers reporting 7.4+; hyperbloom reports 7.0.15,
    # as the Redis it replaces does. The cache's protocol (CLIENT TRACKING ON, RESP3 invalidate
    # pushes) is Redis 6's, so the gate is lifted to run redis-py's real cache against it.
    from redis import connection as rconn

    if hasattr(rconn, "CacheProxyConnection"):
        monkeypatch.setattr(rconn.CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.0.0")
    cached = redis.Redis(host="127.0.0.1", port=hb.port, protocol=3, cache_config=CacheConfig())
    other = hb.client()
    try:
        other.set("k", "v1")
        assert cached.get("k") == b"v1"
        assert cached.get("k") == b"v1"
        assert cached.get_cache().size == 1
        # Only the invalidation push can tell the cache that this happened.
        other.set("k", "v2")
        assert wait_for(lambda: cached.get("k") == b"v2", timeout=5)
        other.delete("k")
        assert wait_for(lambda: cached.get("k") is None, timeout=5)
        other.set("k2", "x")
        assert cached.get("k2") == b"x"
        other.flushall()
        assert wait_for(lambda: cached.get("k2") is None, timeout=5)
    finally:
        cached.close()
        other.close()


def test_ioredis_subscribe(hb):
    if NODE is None:
        pytest.skip("node is not installed: the ioredis subscribe test needs Node.js")
    if not (NODE_MODULES / "ioredis").exists():
        pytest.fail(f"ioredis not installed in {NODE_MODULES}: scripts/test.sh installs it")
    script = Path(__file__).parent / "node" / "subscribe.js"
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES))
    out = subprocess.run([NODE, str(script), str(hb.port)], capture_output=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr.decode()
    got = json.loads(out.stdout)
    assert got == [
        ["counts", 2, 3],
        ["message", "news", "a"],
        ["pmessage", "n*", "news", "a"],
        ["message", "weather", "b"],
        ["message", "news", "d"],
        ["pmessage", "n*", "news", "d"],
    ]


class Lines:
    """A running redis-cli whose stdout lines are collected by a thread."""

    def __init__(self, server, *args):
        self.p = subprocess.Popen(
            [REDIS_CLI, "-h", "127.0.0.1", "-p", str(server.port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        self.q: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip(b"\n"))

    def take(self, n, timeout=10.0):
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            out.append(self.q.get(timeout=max(0.01, deadline - time.monotonic())))
        return out

    def take_until(self, pred, timeout=10.0):
        out = []
        deadline = time.monotonic() + timeout
        while not out or not pred(out[-1]):
            out.append(self.q.get(timeout=max(0.01, deadline - time.monotonic())))
        return out

    def stop(self):
        self.p.kill()
        self.p.wait(5)


def _monitor_session(server):
    mon = Lines(server, "MONITOR")
    try:
        assert mon.take(1) == [b"OK"]
        with server.raw() as c:
            c.call("SET", "k", 'v with "quotes"\n')
            c.call("AUTH", "nosuchuser", "secret")
            c.call("GET", "k")
            c.call("SELECT", "1")
            c.call("INCR", "n")
        lines = mon.take_until(lambda line: b'"incr" "n"' in line.lower())
    finally:
        mon.stop()
    # The time and the client's port differ between the servers.
    return [re.sub(rb"^\d+\.\d{6} \[(\d+) 127\.0\.0\.1:\d+\]", rb"<t> [\1 <addr>]", line) for line in lines]


def test_redis_cli_monitor(hb, real):
    ours = _monitor_session(hb)
    theirs = _monitor_session(real)
    assert ours == theirs
    assert any(b'"AUTH" "(redacted)" "(redacted)"' in line for line in ours), ours


def _csv_psubscribe(server):
    sub = Lines(server, "--csv", "psubscribe", "ch*", "x")
    try:
        first = sub.take(3)
        c = server.client(protocol=2)
        assert wait_for(lambda: c.pubsub_numpat() == 2)
        c.publish("ch1", "hello")
        c.publish("x", "plain, with comma")
        c.publish("other", "nobody")
        c.publish("chan\"q", "quote")
        c.close()
        return first + sub.take(3)
    finally:
        sub.stop()


def test_redis_cli_csv_psubscribe(hb, real):
    ours = _csv_psubscribe(hb)
    assert ours == _csv_psubscribe(real)
    assert ours[3] == b'"pmessage","ch*","ch1","hello"'

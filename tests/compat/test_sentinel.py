"""Redis Sentinel fails over hyperbloom (issue 12).

A hyperbloom primary with two hyperbloom replicas, one real ``redis-sentinel`` (Debian package,
installed by scripts/test.sh) monitoring them with quorum 1 and short timeouts. Writes acknowledged
with ``WAIT 1`` go in through redis-py's ``Sentinel`` client; the primary is killed with SIGKILL;
Sentinel must promote one replica and point the other at it; every acknowledged write must be on
the new primary; the same redis-py client must find the new primary and keep writing.

What Sentinel sends is captured from the servers' own logs: with ``--loglevel debug`` hyperbloom
logs every command with the client's name, and Sentinel names its links ``sentinel-<id>-cmd`` and
``sentinel-<id>-pubsub``. The capture is checked (the commands a failover needs must be among
them) and written to ``$HB_SENTINEL_CAPTURE`` when that is set.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
import redis
from redis.sentinel import Sentinel

from conftest import HYPERBLOOM_BIN, free_port

SENTINEL = shutil.which("redis-sentinel")


def wait_until(what, f, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = f()
            if last:
                return last
        except (redis.RedisError, OSError) as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Proc:
    def __init__(self, argv, log):
        self.log_path = log
        self.log = open(log, "wb")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def kill9(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.log.close()


# `command id=7 name=sentinel-1a2b3c4d-cmd argv=INFO` (ANSI colours off: stdout is a file).
COMMAND_LINE = re.compile(r"command id=\d+ name=(sentinel-\S*) argv=(.*)$")


def sentinel_commands(log: Path) -> Counter:
    """Commands sent by Sentinel's links, as `NAME [SUBCOMMAND]`, counted."""
    seen = Counter()
    for line in log.read_text(errors="replace").splitlines():
        m = COMMAND_LINE.search(line)
        if not m:
            continue
        words = m.group(2).split()
        if not words:
            continue
        name = words[0].upper()
        if name in ("CLIENT", "CONFIG", "SCRIPT") and len(words) > 1:
            name += " " + words[1].upper()
            if words[1].upper() == "KILL" and len(words) > 3:
                name += " " + " ".join(w.upper() for w in words[2:4])
        elif name in ("SUBSCRIBE", "PUBLISH") and len(words) > 1:
            name += " " + words[1]
        elif name in ("SLAVEOF", "REPLICAOF") and len(words) > 2:
            name += " NO ONE" if words[1].upper() == "NO" else " <host> <port>"
        seen[name] += 1
    return seen


def start_node(work: Path, i: int, port: int, primary_port: int | None) -> Proc:
    d = work / f"n{i}"
    d.mkdir()
    argv = [str(HYPERBLOOM_BIN), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--dir", str(d), "--repl-ping-replica-period", "1", "--loglevel", "debug"]
    if primary_port is not None:
        argv += ["--replicaof", "127.0.0.1", str(primary_port), "--replica-priority", str(100 + i)]
    return Proc(argv, work / f"n{i}.log")


@pytest.mark.skipif(SENTINEL is None, reason="redis-sentinel not installed (scripts/test.sh installs it)")
def test_sentinel_promotes_a_replica_and_redis_py_follows():
    assert HYPERBLOOM_BIN.exists(), f"build the release binary first: {HYPERBLOOM_BIN}"
    work = Path(tempfile.mkdtemp(prefix="hb-sentinel-"))
    procs: list[Proc] = []
    try:
        ports = [free_port() for _ in range(3)]
        for i, port in enumerate(ports):
            procs.append(start_node(work, i, port, None if i == 0 else ports[0]))
        nodes = [redis.Redis(port=p, socket_timeout=5) for p in ports]

        def replicas_online():
            info = nodes[0].info("replication")
            return info.get("connected_slaves") == 2 and all(
                info[f"slave{i}"]["state"] == "online" for i in (0, 1))

        wait_until("two online replicas", replicas_online)

        sport = free_port()
        conf = work / "sentinel.conf"
        conf.write_text(
            f"port {sport}\nbind 127.0.0.1\ndir {work}\n"
            f"sentinel monitor mymaster 127.0.0.1 {ports[0]} 1\n"
            "sentinel down-after-milliseconds mymaster 1000\n"
            "sentinel failover-timeout mymaster 6000\n"
            "sentinel parallel-syncs mymaster 1\n"
        )
        procs.append(Proc([SENTINEL, str(conf)], work / "sentinel.log"))
        sc = redis.Redis(port=sport, socket_timeout=5)
        wait_until("sentinel sees two replicas",
                   lambda: len(sc.execute_command("SENTINEL", "REPLICAS", "mymaster")) == 2)

        sentinel = Sentinel([("127.0.0.1", sport)], socket_timeout=2)
        master = sentinel.master_for("mymaster", socket_timeout=2)
        for i in range(300):
            master.set(f"k{i}", i)
            master.execute_command("BF.ADD", "bf", f"item{i}")
            master.execute_command("PFADD", "hll", f"e{i}")
            if i % 50 == 49:
                assert master.execute_command("WAIT", 1, 5000) >= 1
        assert master.execute_command("WAIT", 1, 5000) >= 1
        acked = 300
        count_before = nodes[0].pfcount("hll")

        procs[0].kill9()

        def promoted():
            addr = sentinel.discover_master("mymaster")
            return addr[1] != ports[0] and addr

        _, new_port = wait_until("Sentinel to promote a replica", promoted, timeout=60)
        assert new_port in (ports[1], ports[2])
        new = nodes[ports.index(new_port)]
        other_port = ports[1] if new_port == ports[2] else ports[2]
        other = nodes[ports.index(other_port)]
        wait_until("the promoted replica to be a master",
                   lambda: new.info("replication")["role"] == "master")
        wait_until("the other replica to follow the new primary",
                   lambda: other.info("replication").get("master_port") == new_port
                   and other.info("replication").get("master_link_status") == "up", timeout=60)

        missing = [i for i in range(acked) if new.get(f"k{i}") != str(i).encode()]
        assert missing == [], f"acknowledged writes missing on the new primary: {missing[:10]}"
        assert all(new.execute_command("BF.EXISTS", "bf", f"item{i}") == 1 for i in range(acked))
        assert new.pfcount("hll") == count_before

        # The same Sentinel-backed client writes to the new primary, and the write replicates.
        wait_until("redis-py to write to the new primary", lambda: master.set("after", "failover"))
        assert new.get("after") == b"failover"
        assert master.execute_command("WAIT", 1, 5000) == 1
        assert other.get("after") == b"failover"
        assert other.execute_command("BF.EXISTS", "bf", "item299") == 1

        sent = Counter()
        for i in range(3):
            sent += sentinel_commands(work / f"n{i}.log")
        capture = os.environ.get("HB_SENTINEL_CAPTURE")
        if capture:
            Path(capture).write_text("".join(f"{n}\t{k}\n" for k, n in sorted(sent.items())))
        print("commands Sentinel sent:", dict(sorted(sent.items())))
        for needed in ("PING", "INFO", "SUBSCRIBE __sentinel__:hello",
                       "PUBLISH __sentinel__:hello", "SLAVEOF NO ONE", "SLAVEOF <host> <port>",
                       "MULTI", "EXEC", "CONFIG REWRITE"):
            assert sent[needed] > 0, f"Sentinel never sent {needed}: {dict(sent)}"
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(work, ignore_errors=True)

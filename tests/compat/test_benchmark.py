"""redis-benchmark runs to completion against hyperbloom without errors or warnings.

redis-benchmark first fetches ``CONFIG GET save`` / ``CONFIG GET appendonly`` (a warning if that
fails), sends PING_INLINE as inline bytes and everything else as multibulk, and stops on an error
reply. Small ``-n`` keeps this a correctness check, not a measurement (scripts/bench-load.sh measures).
"""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REDIS_BENCHMARK, require_tools

LINE = re.compile(r"^\s*([A-Za-z_ ().0-9:-]+?): ([0-9.]+) requests per second")


def bench(server, *args, timeout=300):
    require_tools()
    p = subprocess.run(
        [REDIS_BENCHMARK, "-h", "127.0.0.1", "-p", str(server.port), "-q", *args],
        capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    # -q rewrites a progress line with \r; the final result of each test ends with \n.
    text = p.stdout.decode(errors="replace").replace("\r", "\n")
    results = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            results[m.group(1).strip()] = float(m.group(2))
    return p, text, results


def check(p, text, results, expected):
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, f"exit {p.returncode}\n{text}\n{err}"
    assert "WARNING" not in text + err, text + err
    assert "rror" not in text + err, text + err
    for name in expected:
        assert name in results, f"no result for {name}:\n{text}"
        assert results[name] > 0


@pytest.mark.parametrize("pipeline", ["1", "16"])
def test_ping_set_get(hb, pipeline):
    p, text, results = bench(hb, "-t", "ping,set,get", "-n", "2000", "-P", pipeline)
    check(p, text, results, ["PING_INLINE", "PING_MBULK", "SET", "GET"])
    # Without -r every SET writes the literal key "key:__rand_int__".
    assert len(hb.client(protocol=2).get("key:__rand_int__")) == 3


def test_resp3_and_random_keys(hb):
    p, text, results = bench(hb, "-3", "-t", "set,get", "-n", "2000", "-r", "1000", "-P", "4")
    check(p, text, results, ["SET", "GET"])
    assert 1 <= hb.client(protocol=2).dbsize() <= 1000


def test_custom_command(hb):
    p, text, results = bench(hb, "-n", "2000", "-r", "100", "SET", "k:__rand_int__", "v")
    check(p, text, results, ["SET k:__rand_int__ v"])


@pytest.mark.requires("incr", "mset")
@pytest.mark.parametrize("pipeline", ["1", "16"])
def test_incr_mset(hb, pipeline):
    p, text, results = bench(hb, "-t", "incr,mset", "-n", "2000", "-P", pipeline)
    check(p, text, results, ["INCR", "MSET (10 keys)"])
    assert hb.client(protocol=2).get("counter:__rand_int__") == b"2000"


@pytest.mark.requires("bf.add", "bf.exists")
def test_bloom_commands(hb):
    p, text, results = bench(hb, "-n", "2000", "-r", "100000", "-P", "16", "BF.ADD", "bf", "__rand_int__")
    check(p, text, results, ["BF.ADD bf __rand_int__"])
    p, text, results = bench(hb, "-n", "2000", "-r", "100000", "BF.EXISTS", "bf", "__rand_int__")
    check(p, text, results, ["BF.EXISTS bf __rand_int__"])


@pytest.mark.requires("pfadd", "pfcount")
def test_hll_commands(hb):
    p, text, results = bench(hb, "-n", "2000", "-r", "100000", "-P", "16", "PFADD", "h", "__rand_int__")
    check(p, text, results, ["PFADD h __rand_int__"])
    p, text, results = bench(hb, "-n", "2000", "PFCOUNT", "h")
    check(p, text, results, ["PFCOUNT h"])


@pytest.mark.requires("cf.add", "cf.exists")
def test_cuckoo_commands(hb):
    p, text, results = bench(hb, "-n", "2000", "-r", "100000", "-P", "16", "CF.ADD", "cf", "__rand_int__")
    check(p, text, results, ["CF.ADD cf __rand_int__"])
    p, text, results = bench(hb, "-n", "2000", "-r", "100000", "CF.EXISTS", "cf", "__rand_int__")
    check(p, text, results, ["CF.EXISTS cf __rand_int__"])

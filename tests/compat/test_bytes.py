"""Byte-for-byte: the same command sequence on hyperbloom and on a real redis-server, in RESP2 and
in RESP3, must produce identical reply bytes.

Only commands Redis implements the same way are compared (core commands and PF*). Each sequence is
skipped until hyperbloom has every command it uses. The broader randomized differential test lives
with the Rust integration tests; these fixed sequences are the readable smoke version.
"""

from __future__ import annotations

import pytest


def replies(server, cmds, protocol):
    with server.raw() as c:
        if protocol == 3:
            assert c.call("HELLO", "3").startswith(b"%7\r\n")
        return [c.call(*cmd) for cmd in cmds]


def compare(hb, real, cmds, protocol):
    got = replies(hb, cmds, protocol)
    want = replies(real, cmds, protocol)
    diffs = [(cmd, g, w) for cmd, g, w in zip(cmds, got, want) if g != w]
    assert not diffs, "\n".join(f"{c}: hyperbloom {g!r} != redis {w!r}" for c, g, w in diffs)


def names(cmds):
    """Lower-case command names (``container|sub`` for container commands) used by a sequence."""
    out = set()
    for cmd in cmds:
        name = cmd[0].lower()
        if name in ("client", "config", "command", "object", "memory") and len(cmd) > 1:
            name = f"{name}|{cmd[1].lower()}"
        out.add(name)
    return out


def needs(hb, real, cmds):
    """Skips unless hyperbloom has every command of ``cmds`` that Redis has (the others are there
    on purpose, to compare unknown-command errors)."""
    missing = sorted(n for n in names(cmds) if real.has_command(n) and not hb.has_command(n))
    if missing:
        pytest.skip(f"hyperbloom lacks {', '.join(missing)} (not in main yet)")


CORE = [
    ["PING"],
    ["PING", "x"],
    ["ECHO", b"\x00\r\n\xff"],
    ["SET", "k", "v"],
    ["GET", "k"],
    ["GET", "nope"],
    ["SET", "k"],
    ["GET"],
    ["GETX", "a", "b"],
    ["EXISTS", "k", "k", "nope"],
    ["TYPE", "k"],
    ["TYPE", "nope"],
    ["DEL", "k", "nope"],
    ["DBSIZE"],
    ["SELECT", "1"],
    ["SELECT", "16"],
    ["SELECT", "x"],
    ["SET", "db1", "v"],
    ["DBSIZE"],
    ["SELECT", "0"],
    ["DBSIZE"],
    ["CONFIG", "GET", "databases"],
    ["CONFIG", "GET", "save"],
    ["CONFIG", "GET", "nosuchdirective"],
    ["CONFIG", "NOPE"],
    ["CLIENT", "GETNAME"],
    ["CLIENT", "SETNAME", "bad name"],
    ["CLIENT", "SETNAME", "good"],
    ["CLIENT", "GETNAME"],
    ["MULTI"],
    ["SET", "t", "1"],
    ["GET", "t"],
    ["MULTI"],
    ["EXEC"],
    ["EXEC"],
    ["DISCARD"],
    ["MULTI"],
    ["GET"],
    ["SET", "t", "2"],
    ["EXEC"],
    ["GET", "t"],
    ["WATCH", "t"],
    ["UNWATCH"],
    ["FLUSHDB"],
    ["DBSIZE"],
]

STRINGS = [
    ["SET", "n", "10"],
    ["INCR", "n"],
    ["INCRBY", "n", "9223372036854775800"],
    ["INCRBY", "n", "x"],
    ["DECRBY", "n", "5"],
    ["INCRBYFLOAT", "f", "0.1"],
    ["INCRBYFLOAT", "f", "1e300"],
    ["INCRBYFLOAT", "f", "abc"],
    ["APPEND", "s", b"\x00\xff"],
    ["STRLEN", "s"],
    ["SETRANGE", "s", "5", "x"],
    ["GET", "s"],
    ["GETRANGE", "s", "-3", "-1"],
    ["MSET", "a", "1", "b", "2"],
    ["MSET", "a"],
    ["MGET", "a", "b", "nope"],
    ["SET", "e", "v", "EX", "0"],
    ["SET", "e", "v", "EX", "100", "NX"],
    ["SET", "e", "w", "XX", "GET"],
    ["SET", "e", "w", "KEEPTTL", "EX", "1"],
    ["TTL", "e"],
    ["GETEX", "e", "PERSIST"],
    ["TTL", "e"],
    ["EXPIRE", "e", "10", "NX"],
    ["EXPIRE", "e", "5", "GT"],
    ["EXPIRE", "e", "5", "LT"],
    ["TTL", "e"],
    ["GETDEL", "e"],
    ["GETDEL", "e"],
]

PF = [
    ["PFADD", "h1", "a", "b", "c"],
    ["PFADD", "h1", "a"],
    ["PFADD", "h1"],
    ["PFCOUNT", "h1"],
    ["GET", "h1"],
    ["PFADD", "h2", *[f"e{i}" for i in range(3000)]],
    ["PFCOUNT", "h2"],
    ["GET", "h2"],
    ["PFCOUNT", "h1", "h2", "nope"],
    ["PFMERGE", "h3", "h1", "h2"],
    ["GET", "h3"],
    ["PFCOUNT", "h3"],
    ["SET", "str", "not an hll"],
    ["PFADD", "str", "x"],
    ["PFCOUNT", "str"],
    ["PFMERGE", "h3", "str"],
    ["PFCOUNT"],
    ["PFADD"],
]


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
@pytest.mark.parametrize("name,cmds", [("core", CORE), ("strings", STRINGS), ("pf", PF)],
                         ids=["core", "strings", "pf"])
def test_same_bytes_as_redis(hb, real, protocol, name, cmds):
    needs(hb, real, cmds)
    compare(hb, real, cmds, protocol)


def incrbyfloat_sequence(seed: int, keys: int, per_key: int) -> list[list[str]]:
    """Random INCRBYFLOATs (and the SETs they start from) in every form string2ld takes: integers,
    short and long decimals, exponents, hex, 20+ significant digits, infinities and junk. The
    server takes a 128-bit path for the common forms and an exact big-integer path for the rest;
    both must give Redis's x87 long-double bytes."""
    import random

    rng = random.Random(seed)

    def number() -> str:
        k = rng.random()
        if k < 0.2:
            return str(rng.randint(-10**6, 10**6))
        if k < 0.4:
            return repr(rng.uniform(-1000, 1000))
        if k < 0.55:
            return f"{rng.uniform(-1, 1):.{rng.randint(1, 20)}f}"
        if k < 0.7:
            return f"{rng.uniform(1, 9)}e{rng.randint(-30, 30)}"
        if k < 0.8:
            return rng.choice(["0.1", "0.2", "-0.3", "1e-17", "1e17", "123456789012345678901234",
                               "0.000000000000000001", "5.", "+.5", "1E3", "0x1p-3", "1e4000",
                               "-inf", "abc"])
        if k < 0.9:
            return f"{rng.randint(-10**18, 10**18)}.{rng.randint(0, 10**6)}"
        return repr(rng.uniform(-1e-5, 1e-5))

    cmds = []
    for key in range(keys):
        name = f"f{key}"
        if rng.random() < 0.5:
            cmds.append(["SET", name, number()])
        cmds += [["INCRBYFLOAT", name, number()] for _ in range(per_key)]
        cmds.append(["GET", name])
    return cmds


def test_incrbyfloat_random_bytes(hb, real):
    cmds = incrbyfloat_sequence(seed=15, keys=60, per_key=40)
    needs(hb, real, cmds)
    compare(hb, real, cmds, 2)


def test_inline_and_pipelined_bytes(hb, real):
    """Inline commands and several requests in one write, compared as one reply stream."""
    stream = b"PING\r\nSET a \"x y\"\r\nGET a\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\nECHO 'q'\r\n\r\nDEL a\r\n"
    outs = []
    for server in (hb, real):
        with server.raw() as c:
            c.send_raw(stream)
            outs.append([c.read_reply() for _ in range(6)])
    assert outs[0] == outs[1]


def test_protocol_error_bytes(hb, real):
    outs = []
    for server in (hb, real):
        with server.raw() as c:
            c.send_raw(b"*1\r\n$x\r\n")
            outs.append(c.read_reply())
    assert outs[0] == outs[1]


INTROSPECTION = [
    ["COMMAND", "INFO", "get", "nosuchcommand"],
    ["COMMAND", "INFO", "client|getname"],
]


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
def test_command_info_bytes(hb, real, protocol):
    """COMMAND INFO's shape for unknown names and for subcommands."""
    got = replies(hb, INTROSPECTION, protocol)
    want = replies(real, INTROSPECTION, protocol)
    # Compare only the null/unknown part: the `get` entry's details (ACL categories, tips, key specs)
    # are allowed to differ.
    assert got[0].endswith(want[0][-5:]), (got[0][-10:], want[0][-10:])
    assert got[1].startswith(b"*1\r\n*") and b"client|getname" in got[1]

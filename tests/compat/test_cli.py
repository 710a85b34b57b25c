"""redis-cli against hyperbloom, compared with the same redis-cli against a real redis-server.

redis-cli (Debian's 7.0 build) is the reference user interface: its output is the rendering of the
reply bytes, so identical output on both servers means identical replies as far as a user can see.
Covered: one-shot commands (raw output, as when stdout is not a terminal, and ``--no-raw``, as on a
terminal), RESP3 (``-3``), mass insertion (``--pipe``), and the interactive mode reading commands
from stdin (which also exercises its start-up ``COMMAND DOCS``).
"""

from __future__ import annotations

import pytest

from conftest import require_tools

# One-shot commands that exist in the core server; each list runs in order on an empty server.
CORE_SESSION = [
    ["PING"],
    ["PING", "hello world"],
    ["ECHO", "a\tb"],
    ["SET", "k", "v"],
    ["GET", "k"],
    ["GET", "missing"],
    ["SET", "bin", "\x01\x02 \xff"],
    ["GET", "bin"],
    ["EXISTS", "k", "missing", "k"],
    ["TYPE", "k"],
    ["TYPE", "missing"],
    ["DEL", "k", "missing"],
    ["DBSIZE"],
    ["FOO", "a", "b"],
    ["GET"],
    ["SET", "k"],
    ["SELECT", "99"],
    ["CONFIG", "GET", "databases"],
    ["CONFIG", "GET", "maxclients"],
    ["CLIENT", "GETNAME"],
    ["CLIENT", "FOO"],
    ["MULTI"],
    ["FLUSHDB"],
    ["DBSIZE"],
]

STRINGS_SESSION = [
    ["SET", "n", "10"],
    ["INCR", "n"],
    ["INCRBY", "n", "-20"],
    ["DECR", "n"],
    ["INCR", "missing:counter"],
    ["INCRBYFLOAT", "f", "1.5"],
    ["INCRBYFLOAT", "f", "1e3"],
    ["SET", "s", "abc"],
    ["INCR", "s"],
    ["APPEND", "s", "def"],
    ["STRLEN", "s"],
    ["GETRANGE", "s", "1", "-2"],
    ["MSET", "a", "1", "b", "2"],
    ["MGET", "a", "b", "missing"],
    ["MSETNX", "a", "x", "c", "y"],
    ["SETNX", "a", "z"],
    ["GETSET", "a", "new"],
    ["GETDEL", "a"],
    ["GET", "a"],
    ["SET", "e", "v", "EX", "100"],
    ["TTL", "e"],
    ["EXPIRE", "e", "200", "GT"],
    ["PERSIST", "e"],
    ["TTL", "e"],
    ["TTL", "missing"],
    ["SET", "x", "1", "NX", "XX"],
]

STRINGS_COMMANDS = ("incr", "incrby", "decr", "incrbyfloat", "append", "strlen", "getrange", "mset",
                    "mget", "msetnx", "setnx", "getset", "getdel", "ttl", "expire", "persist")


def run_session(server, session, *flags):
    out = []
    for cmd in session:
        p = server.cli(*flags, *cmd)
        out.append((cmd, p.returncode, p.stdout, p.stderr))
    return out


def assert_same(hb_out, real_out):
    for (cmd, *h), (_, *r) in zip(hb_out, real_out):
        assert h == r, f"redis-cli {' '.join(cmd)}: hyperbloom {h!r} != redis {r!r}"


@pytest.mark.parametrize("mode", [[], ["--no-raw"]], ids=["raw", "formatted"])
def test_one_shot_core(hb, real, mode):
    require_tools()
    assert_same(run_session(hb, CORE_SESSION, *mode), run_session(real, CORE_SESSION, *mode))


@pytest.mark.requires(*STRINGS_COMMANDS)
@pytest.mark.parametrize("mode", [[], ["--no-raw"]], ids=["raw", "formatted"])
def test_one_shot_strings(hb, real, mode):
    assert_same(run_session(hb, STRINGS_SESSION, *mode), run_session(real, STRINGS_SESSION, *mode))


RESP3_SESSION = [
    ["SET", "k", "v"],
    ["GET", "k"],
    ["GET", "missing"],
    ["EXISTS", "k"],
    ["CONFIG", "GET", "databases"],
    ["FOO"],
    ["ECHO", ""],
]


@pytest.mark.parametrize("mode", [[], ["--no-raw"]], ids=["raw", "formatted"])
def test_resp3_one_shot(hb, real, mode):
    """``redis-cli -3`` sends HELLO 3 first; maps, nulls and booleans render per RESP3."""
    assert_same(run_session(hb, RESP3_SESSION, "-3", *mode), run_session(real, RESP3_SESSION, "-3", *mode))
    p = hb.cli("-3", "--no-raw", "CONFIG", "GET", "databases")
    assert p.stdout == b'1# "databases" => "16"\n'


def test_resp3_hello_reports_proto_3(hb):
    p = hb.cli("-3", "HELLO")
    lines = p.stdout.decode().splitlines()
    # Raw rendering of the HELLO map: one "key value" line per field.
    assert "server redis" in lines
    assert "proto 3" in lines
    assert "mode standalone" in lines
    assert "role master" in lines


@pytest.mark.requires("incr", "mget", "pfadd", "pfcount")
def test_resp3_strings_and_hll(hb, real):
    session = [["INCR", "n"], ["MGET", "n", "missing"], ["PFADD", "h", "a", "b"], ["PFCOUNT", "h"]]
    for mode in ([], ["--no-raw"]):
        assert_same(run_session(hb, session, "-3", *mode), run_session(real, session, "-3", *mode))


def test_pipe_mass_insertion(hb):
    """``redis-cli --pipe`` with 100k SETs: every reply accounted for, no errors."""
    require_tools()
    n = 100_000
    data = b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\nkey:%d\r\n$%d\r\nval:%d\r\n"
                    % (len(b"key:%d" % i), i, len(b"val:%d" % i), i) for i in range(n))
    p = hb.cli("--pipe", input=data, timeout=300)
    assert p.returncode == 0, p.stderr
    assert b"errors: 0, replies: %d" % n in p.stdout, p.stdout
    assert hb.cli("DBSIZE").stdout == b"%d\n" % n
    assert hb.cli("GET", "key:99999").stdout == b"val:99999\n"


def test_pipe_reports_errors_like_redis(hb, real):
    """Error replies inside a --pipe stream are counted and echoed the same way."""
    data = b"SET a 1\r\n" + b"*1\r\n$3\r\nFOO\r\n" + b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
    h, r = hb.cli("--pipe", input=data), real.cli("--pipe", input=data)
    assert b"errors: 1, replies: 3" in h.stdout, h.stdout
    assert (h.returncode, h.stdout) == (r.returncode, r.stdout)


INTERACTIVE = b"\n".join([
    b"PING",
    b"SET greeting \"hello world\"",
    b"GET greeting",
    b"GET missing",
    b"EXISTS greeting nope",
    b"TYPE greeting",
    b"DEL greeting",
    b"FOO bar",
    b"SET onlykey",
    b"CONFIG GET databases",
    b"MULTI",
    b"SET a 1",
    b"GET a",
    b"EXEC",
    b"MULTI",
    b"SET a 2",
    b"DISCARD",
    b"GET a",
    b"SELECT 3",
    b"DBSIZE",
    b"ECHO 'single quoted'",
    b"",
])


@pytest.mark.parametrize("mode", [[], ["--no-raw"]], ids=["raw", "formatted"])
def test_interactive_stdin(hb, real, mode):
    """Interactive mode (commands on stdin, as a script or a user would type them)."""
    h, r = hb.cli(*mode, input=INTERACTIVE), real.cli(*mode, input=INTERACTIVE)
    assert h.returncode == r.returncode == 0
    assert h.stdout == r.stdout
    assert h.stderr == r.stderr


@pytest.mark.requires("incr", "expire", "ttl", "mset", "mget")
def test_interactive_stdin_strings(hb, real):
    script = b"\n".join([
        b"MSET a 1 b 2", b"MGET a b c", b"INCR a", b"EXPIRE a 100", b"TTL a", b"TTL b", b"INCR b",
        b"SET f 1.5", b"INCR f", b"",
    ])
    for mode in ([], ["--no-raw"]):
        h, r = hb.cli(*mode, input=script), real.cli(*mode, input=script)
        assert (h.returncode, h.stdout) == (r.returncode, r.stdout)

"""``unixsocket`` / ``unixsocketperm``: hyperbloom on a Unix domain socket, side by side with a real
redis-server configured the same way.

Each test starts its own servers (the session's servers have no socket): hyperbloom and redis-server
with ``--unixsocket DIR/s.sock --unixsocketperm 700``, each under a fresh short directory of /tmp (a
socket path has at most 107 bytes). Clients are redis-py (``unix_socket_path=``), ``redis-cli -s``,
``redis-benchmark -s`` and a raw AF_UNIX socket for exact reply bytes. What both servers print that
names the socket is compared with each one's own path put back to ``<SOCK>``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest
import redis

from conftest import (
    HYPERBLOOM_BIN,
    REDIS_BENCHMARK,
    REDIS_CLI,
    REDIS_SERVER,
    Raw,
    free_port,
    require_tools,
)

PERM = "700"


class UnixRaw(Raw):
    """conftest's ``Raw`` (exact reply bytes) over a Unix domain socket."""

    def __init__(self, path: str, timeout: float = 10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""


class SockServer:
    """hyperbloom (``kind="hb"``) or redis-server (``kind="redis"``) listening on ``self.sock``, and on
    a free TCP port of 127.0.0.1 unless ``tcp`` is false (then ``--port 0``: the socket only)."""

    def __init__(self, kind: str, tcp: bool = True, extra: tuple[str, ...] = (), sock_name: str = "s.sock"):
        if kind == "hb" and not HYPERBLOOM_BIN.exists():
            pytest.fail(f"{HYPERBLOOM_BIN} not found: run `cargo build --release` (scripts/test.sh does)")
        if kind == "redis" and REDIS_SERVER is None:
            pytest.fail("redis-server not found: scripts/test.sh installs it (apt-get install redis-server)")
        self.kind = kind
        self.tcp = tcp
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix=f"hbus-{kind}-", dir="/tmp")
        self.sock = os.path.join(self.dir, sock_name)
        assert len(self.sock) < 100, self.sock
        self.log_path = os.path.join(self.dir, "server.log")
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def argv(self) -> list[str]:
        common = ["--port", str(self.port), "--save", "", "--dir", self.dir,
                  "--unixsocket", self.sock, *self.extra]
        if self.tcp:
            common += ["--bind", "127.0.0.1"]
        if self.kind == "hb":
            return [str(HYPERBLOOM_BIN), *common]
        return [REDIS_SERVER, *common, "--appendonly", "no", "--daemonize", "no"]

    def spawn(self) -> None:
        self.port = free_port() if self.tcp else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True)

    def start(self, attempts: int = 3, timeout: float = 20.0) -> "SockServer":
        """Starts and waits until PING answers over the socket (and over TCP if any). A server that
        exits is restarted (its free TCP port may have been taken meanwhile)."""
        for _ in range(attempts):
            self.spawn()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self._pings():
                    return self
                time.sleep(0.02)
            self.stop()
        pytest.fail(f"{self.kind} did not start on {self.sock}; log:\n{self.log()}")

    def _pings(self) -> bool:
        try:
            with UnixRaw(self.sock, timeout=2) as c:
                if c.call("PING") != b"+PONG\r\n":
                    return False
            if self.tcp:
                with Raw(self.port, timeout=2) as c:
                    return c.call("PING") == b"+PONG\r\n"
            return True
        except OSError:
            return False

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait(self, timeout: float = 10.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.kind} did not exit within {timeout} s; log:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- clients ------------------------------------------------------------------------------

    def unix(self) -> UnixRaw:
        return UnixRaw(self.sock)

    def tcp_raw(self) -> Raw:
        assert self.tcp
        return Raw(self.port)

    def client(self, protocol: int | None = 3, **kw) -> redis.Redis:
        if protocol is not None:
            kw["protocol"] = protocol
        return redis.Redis(unix_socket_path=self.sock, **kw)

    def cli(self, *args: str, input: bytes = b"") -> subprocess.CompletedProcess:
        require_tools()
        return subprocess.run([REDIS_CLI, "-s", self.sock, *args], input=input,
                              capture_output=True, timeout=60)

    def masked(self, data: bytes) -> bytes:
        """``data`` with this server's socket path written ``<SOCK>`` (the length prefix of a bulk
        string holding exactly the path becomes ``$<LEN>``)."""
        path = self.sock.encode()
        data = data.replace(b"$%d\r\n%s\r\n" % (len(path), path), b"$<LEN>\r\n<SOCK>\r\n")
        return data.replace(path, b"<SOCK>")


@pytest.fixture
def pair():
    """hyperbloom and redis-server, each on TCP and on its own socket with ``unixsocketperm 700``."""
    servers = []
    try:
        for kind in ("hb", "redis"):
            s = SockServer(kind, extra=("--unixsocketperm", PERM))
            servers.append(s)
            s.start()
        yield servers[0], servers[1]
    finally:
        for s in servers:
            s.cleanup()


@pytest.fixture
def hb_sock():
    s = SockServer("hb", extra=("--unixsocketperm", PERM))
    try:
        yield s.start()
    finally:
        s.cleanup()


def fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.strip().split(" "))


def bulk_text(reply: bytes) -> str:
    assert reply.startswith(b"$"), reply
    return reply[reply.index(b"\r\n") + 2 : -2].decode()


def tcp_listeners_of(pid: int) -> int:
    """TCP sockets in LISTEN state held by ``pid`` (its fds' inodes in /proc/net/tcp{,6})."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    count = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
                count += 1
    return count


# ---------------------------------------------------------------------------------------------
# The socket file and the configuration
# ---------------------------------------------------------------------------------------------


def test_socket_file_mode_matches_redis(pair):
    hb, real = pair
    listings = []
    for s in pair:
        st = os.stat(s.sock)
        assert stat.S_ISSOCK(st.st_mode), f"{s.kind}: {s.sock} is not a socket"
        assert stat.S_IMODE(st.st_mode) == 0o700, f"{s.kind}: mode {stat.S_IMODE(st.st_mode):o}"
        ls = subprocess.run(["ls", "-l", s.sock], capture_output=True, check=True).stdout.decode()
        listings.append(ls.split()[0])
    assert listings == ["srwx------", "srwx------"]


@pytest.mark.parametrize("perm,mode", [("777", 0o777), ("0640", 0o640), ("600", 0o600)])
def test_other_modes_match_redis(perm, mode):
    servers = [SockServer(kind, tcp=False, extra=("--unixsocketperm", perm)) for kind in ("hb", "redis")]
    try:
        got = []
        for s in servers:
            s.start()
            st = os.stat(s.sock)
            with s.unix() as c:
                shown = c.call("CONFIG", "GET", "unixsocketperm")
            got.append((stat.S_ISSOCK(st.st_mode), stat.S_IMODE(st.st_mode), shown))
        want = (True, mode, b"*2\r\n$14\r\nunixsocketperm\r\n$%d\r\n%s\r\n" % (len(f"{mode:o}"), f"{mode:o}".encode()))
        assert got[1] == want, "redis-server itself"
        assert got[0] == want
    finally:
        for s in servers:
            s.cleanup()


def test_config_get_and_set_match_redis(pair):
    script = [
        ("CONFIG", "GET", "unixsocket"),
        ("CONFIG", "GET", "unixsocketperm"),
        ("CONFIG", "GET", "unixsocket*"),
        ("CONFIG", "SET", "unixsocket", "/tmp/elsewhere.sock"),
        ("CONFIG", "SET", "unixsocketperm", "777"),
        ("CONFIG", "SET", "unixsocketperm", "999"),
        ("CONFIG", "GET", "unixsocket"),
        ("CONFIG", "GET", "unixsocketperm"),
    ]
    out = {}
    for s in pair:
        with s.unix() as c:
            replies = [s.masked(c.call(*cmd)) for cmd in script]
        # CONFIG GET unixsocket* is a map: its order is the server's own; compare as a set of pairs.
        parts = replies[2].split(b"\r\n")
        replies[2] = (parts[0], sorted(zip(parts[1:-1:4], parts[2:-1:4], parts[3:-1:4], parts[4:-1:4])))
        out[s.kind] = replies
    hb, real = out["hb"], out["redis"]
    assert real[0] == b"*2\r\n$10\r\nunixsocket\r\n$<LEN>\r\n<SOCK>\r\n"
    assert real[3] == (b"-ERR CONFIG SET failed (possibly related to argument 'unixsocket') - "
                       b"can't set immutable config\r\n")
    for i, cmd in enumerate(script):
        assert hb[i] == real[i], f"{' '.join(cmd)}: hyperbloom {hb[i]!r}, redis {real[i]!r}"
    assert stat.S_IMODE(os.stat(pair[0].sock).st_mode) == 0o700


def test_defaults_without_a_socket_match_redis(hb, real):
    """The session's servers have no socket: CONFIG GET shows the defaults ("" and 0)."""
    got = {}
    for s in (hb, real):
        with s.raw() as c:
            got[s.name] = (c.call("CONFIG", "GET", "unixsocket"), c.call("CONFIG", "GET", "unixsocketperm"))
    assert got["redis"] == (b"*2\r\n$10\r\nunixsocket\r\n$0\r\n\r\n", b"*2\r\n$14\r\nunixsocketperm\r\n$1\r\n0\r\n")
    assert got["hyperbloom"] == got["redis"]


@pytest.mark.parametrize("value", ["999", "abc", "8", "1000", "-1", "07777"])
def test_bad_unixsocketperm_is_fatal_like_redis(value):
    d = tempfile.mkdtemp(prefix="hbus-bad-", dir="/tmp")
    try:
        args = ["--port", "0", "--save", "", "--unixsocket", os.path.join(d, "s.sock"), "--unixsocketperm", value]
        runs = {}
        for kind, binary in (("hb", str(HYPERBLOOM_BIN)), ("redis", REDIS_SERVER)):
            p = subprocess.run([binary, *args], capture_output=True, timeout=10, stdin=subprocess.DEVNULL, cwd=d)
            runs[kind] = (p.returncode, p.stderr.decode(errors="replace"))
        rc, err = runs["redis"]
        assert rc == 1
        assert f">>> 'unixsocketperm \"{value}\"'" in err
        assert runs["hb"] == runs["redis"]
        assert not os.path.exists(os.path.join(d, "s.sock"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Clients on the socket
# ---------------------------------------------------------------------------------------------


def test_redis_py_over_socket_matches_redis(pair, protocol):
    results = {}
    for s in pair:
        r = s.client(protocol=protocol)
        try:
            out = [
                r.ping(),
                r.set("k", "v"),
                r.get("k"),
                r.get("missing"),
                r.incr("n"),
                r.incrby("n", 41),
                r.mget("k", "n", "missing"),
                r.pfadd("hll", "a", "b", "c", "a"),
                r.pfcount("hll"),
                r.delete("k", "missing"),
                r.exists("k", "n"),
                r.dbsize(),
            ]
            with r.pipeline(transaction=True) as p:
                p.set("t", "1").incr("t").get("t")
                out.append(p.execute())
            results[s.kind] = out
        finally:
            r.close()
    assert results["redis"][2] == b"v"
    assert results["hb"] == results["redis"]


def test_bloom_over_socket_as_over_tcp(hb_sock, protocol):
    kw = {} if protocol is None else {"protocol": protocol}
    over_unix = hb_sock.client(protocol=protocol)
    over_tcp = redis.Redis(host="127.0.0.1", port=hb_sock.port, **kw)
    try:
        def script(r, p):
            return [
                r.execute_command("BF.ADD", f"{p}bf", "x"),
                r.execute_command("BF.ADD", f"{p}bf", "x"),
                r.execute_command("BF.MADD", f"{p}bf", "y", "z", "x"),
                r.execute_command("BF.EXISTS", f"{p}bf", "x"),
                r.execute_command("BF.EXISTS", f"{p}bf", "nope"),
                r.execute_command("BF.MEXISTS", f"{p}bf", "x", "y", "nope"),
                r.pfadd(f"{p}hll", *[f"e{i}" for i in range(100)]),
                r.pfcount(f"{p}hll"),
            ]
        u = script(over_unix, "u:")
        t = script(over_tcp, "t:")
        assert u == t
        assert u[0] in (1, True) and u[1] in (0, False)
        assert u[3] in (1, True) and u[4] in (0, False)
        assert u[7] == 100
        # One keyspace.
        assert over_tcp.execute_command("BF.EXISTS", "u:bf", "z") in (1, True)
        assert over_unix.pfcount("t:hll") == 100
    finally:
        over_unix.close()
        over_tcp.close()


def client_flags(s: SockServer) -> dict[str, object]:
    """What CLIENT INFO / CLIENT LIST say of socket clients in a few states, and of a TCP client."""
    me = f"{s.sock}:0"
    out = {}
    with s.unix() as c, s.unix() as trk, s.unix() as sub, s.unix() as mon, s.tcp_raw() as tcp:
        info = fields(bulk_text(c.call("CLIENT", "INFO")))
        out["addr"] = info["addr"] == me
        out["laddr"] = info["laddr"] == me
        out["plain"] = info["flags"]
        c_id = info["id"]
        # In MULTI (seen by another client: a CLIENT INFO run by EXEC itself is another matter).
        assert c.call("MULTI") == b"+OK\r\n"
        assert c.call("SET", "k", "v") == b"+QUEUED\r\n"
        assert trk.call("CLIENT", "TRACKING", "on") == b"+OK\r\n"
        out["tracking"] = fields(bulk_text(trk.call("CLIENT", "INFO")))["flags"]
        sub_id = sub.call("CLIENT", "ID")[1:-2].decode()
        sub.call("SUBSCRIBE", "ch")
        mon_id = mon.call("CLIENT", "ID")[1:-2].decode()
        assert mon.call("MONITOR") == b"+OK\r\n"
        tcp_info = fields(bulk_text(tcp.call("CLIENT", "INFO")))
        out["tcp"] = tcp_info["flags"]
        out["tcp_addr_is_ip"] = tcp_info["addr"].startswith("127.0.0.1:")
        listing = bulk_text(tcp.call("CLIENT", "LIST"))
        by_id = {f["id"]: f for f in map(fields, listing.splitlines())}
        out["multi"] = by_id[c_id]["flags"]
        out["subscriber"] = by_id[sub_id]["flags"]
        out["monitor"] = by_id[mon_id]["flags"]
        out["socket_clients_listed"] = sum(1 for f in by_id.values() if f["addr"] == me and f["laddr"] == me)
    return out


def test_client_info_and_list_match_redis(pair):
    hb, real = pair
    want = {
        "addr": True, "laddr": True, "plain": "U", "multi": "xU", "tracking": "tU", "tcp": "N",
        "tcp_addr_is_ip": True, "subscriber": "PU", "monitor": "OU", "socket_clients_listed": 4,
    }
    assert client_flags(real) == want, "redis-server itself"
    assert client_flags(hb) == want


def client_states(s: SockServer, transport: str) -> list[object]:
    """CLIENT INFO / LIST flags and types over one transport (``unix`` or ``tcp``): a transaction as
    its own EXEC sees it, CLIENT NO-EVICT, a monitor, a subscriber, the TYPE filters of CLIENT LIST
    and CLIENT KILL. Client ids are replaced by connection names; only fields both servers must
    agree on are kept."""
    connect = s.unix if transport == "unix" else s.tcp_raw
    kept = ("flags", "multi", "multi-mem", "sub", "psub")
    with connect() as c, connect() as obs, connect() as sub, connect() as mon:
        names = {c.call("CLIENT", "ID")[1:-2].decode(): "c"}
        names[obs.call("CLIENT", "ID")[1:-2].decode()] = "obs"
        names[sub.call("CLIENT", "ID")[1:-2].decode()] = "sub"
        names[mon.call("CLIENT", "ID")[1:-2].decode()] = "mon"

        def lines(reply: bytes) -> list[object]:
            texts = re.findall(rb"\$\d+\r\n(id=[^\r]*)\r\n", reply)
            out = []
            for text in texts:
                for line in text.decode().splitlines():
                    f = fields(line)
                    out.append((names.get(f["id"], "?"), *(f"{k}={f[k]}" for k in kept)))
            return out

        out: list[object] = []
        assert c.call("MULTI") == b"+OK\r\n"
        assert c.call("SET", "k", "v") == b"+QUEUED\r\n"
        out.append(lines(obs.call("CLIENT", "LIST", "TYPE", "normal")))
        assert c.call("CLIENT", "INFO") == b"+QUEUED\r\n"
        out.append(lines(c.call("EXEC")))
        out.append(c.call("CLIENT", "NO-EVICT", "on"))
        out.append(lines(c.call("CLIENT", "INFO")))
        out.append(c.call("CLIENT", "NO-EVICT", "off"))
        out.append(lines(c.call("CLIENT", "INFO")))
        sub.call("SUBSCRIBE", "ch")
        assert mon.call("MONITOR") == b"+OK\r\n"
        for kind in ("normal", "pubsub", "replica", "master"):
            out.append((kind, lines(obs.call("CLIENT", "LIST", "TYPE", kind))))
        out.append(obs.call("CLIENT", "KILL", "TYPE", "replica"))
        out.append(obs.call("CLIENT", "KILL", "TYPE", "pubsub"))
        sub.sock.settimeout(5)
        out.append(sub.sock.recv(16))
    return out


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_client_flags_and_types_match_redis(pair, transport):
    hb, real = pair
    want = client_states(real, transport)
    u = "U" if transport == "unix" else ""
    assert want[1] == [("c", f"flags=x{u}", "multi=2", "multi-mem=55", "sub=0", "psub=0")], "redis-server itself"
    assert want[3] == [("c", f"flags={u}e", "multi=-1", "multi-mem=0", "sub=0", "psub=0")], "redis-server itself"
    assert client_states(hb, transport) == want


def test_monitor_names_the_socket_like_redis(pair):
    for s in pair:
        with s.unix() as mon, s.unix() as c, s.tcp_raw() as tcp:
            assert mon.call("MONITOR") == b"+OK\r\n"
            assert c.call("SET", "a", "b") == b"+OK\r\n"
            line = mon.read_reply().decode()
            m = re.fullmatch(r"\+\d+\.\d{6} \[0 unix:(.+)\] \"SET\" \"a\" \"b\"\r\n", line)
            assert m, f"{s.kind}: {line!r}"
            assert m.group(1) == s.sock, f"{s.kind}: {line!r}"
            assert tcp.call("GET", "a") == b"$1\r\nb\r\n"
            line = mon.read_reply().decode()
            assert re.fullmatch(r"\+\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] \"GET\" \"a\"\r\n", line), f"{s.kind}: {line!r}"


def test_client_kill_addr_matches_redis(pair):
    out = {}
    for s in pair:
        addr = f"{s.sock}:0"
        with s.unix() as killer, s.unix() as a, s.unix() as b, s.tcp_raw() as tcp:
            assert a.call("PING") == b"+PONG\r\n" and b.call("PING") == b"+PONG\r\n"
            first = killer.call("CLIENT", "KILL", "ADDR", addr)
            a.sock.settimeout(5)
            b.sock.settimeout(5)
            closed = (a.sock.recv(16), b.sock.recv(16))
            still = killer.call("PING")
            second = tcp.call("CLIENT", "KILL", "ADDR", addr)
            killer.sock.settimeout(5)
            killer_closed = killer.sock.recv(16)
            none_left = tcp.call("CLIENT", "KILL", "ADDR", addr)
            out[s.kind] = (first, closed, still, second, killer_closed, none_left, tcp.call("PING"))
    assert out["redis"][:2] == (b":2\r\n", (b"", b"")), "redis-server itself"
    assert out["hb"] == out["redis"]


def test_redis_cli_s_matches_redis(pair):
    session = [
        ["PING"],
        ["SET", "k", "hello world"],
        ["GET", "k"],
        ["CONFIG", "GET", "unixsocket"],
        ["CONFIG", "GET", "unixsocketperm"],
        ["CONFIG", "SET", "unixsocket", "/tmp/x.sock"],
        ["DBSIZE"],
        ["BOGUS"],
    ]
    outputs = {}
    for s in pair:
        runs = []
        for cmd in session:
            for flags in ([], ["--no-raw"]):
                p = s.cli(*flags, *cmd)
                runs.append((cmd, flags, p.returncode, s.masked(p.stdout), s.masked(p.stderr)))
        # Commands on stdin (the non-interactive REPL).
        p = s.cli(input=b"SET a 1\nINCR a\nGET a\nCONFIG GET unixsocketperm\n")
        runs.append(("stdin", p.returncode, s.masked(p.stdout), s.masked(p.stderr)))
        outputs[s.kind] = runs
    assert outputs["redis"][6][3] == b"unixsocket\n<SOCK>\n", outputs["redis"][6]
    for hb_run, redis_run in zip(outputs["hb"], outputs["redis"]):
        assert hb_run == redis_run


@pytest.mark.parametrize("pipeline", ["1", "16"])
def test_redis_benchmark_over_socket(hb_sock, pipeline):
    require_tools()
    p = subprocess.run(
        [REDIS_BENCHMARK, "-s", hb_sock.sock, "-n", "2000", "-t", "set,get", "-q", "-P", pipeline],
        capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    text = p.stdout.decode(errors="replace").replace("\r", "\n")
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, f"exit {p.returncode}\n{text}\n{err}"
    assert "rror" not in text + err and "WARNING" not in text + err, text + err
    for name in ("SET", "GET"):
        assert re.search(rf"^{name}: [0-9.]+ requests per second", text, re.M), f"no {name} result:\n{text}"
    # It went through the socket: the benchmark's key is there.
    with hb_sock.unix() as c:
        # Without -r every SET writes the literal key "key:__rand_int__" (a 3-byte value).
        assert c.call("STRLEN", "key:__rand_int__") == b":3\r\n"


def test_pipeline_and_large_value_match_redis(pair):
    results = {}
    big = bytes(i * 7 % 251 for i in range(1024 * 1024))
    for s in pair:
        r = s.client(protocol=2)
        try:
            with r.pipeline(transaction=False) as p:
                for i in range(1000):
                    p.set(f"key:{i}", f"value:{i}")
                    p.get(f"key:{i}")
                p.dbsize()
                got = p.execute()
            assert got[:2] == [True, b"value:0"] and got[-1] == 1000, f"{s.kind}: {got[:2]} {got[-1]}"
            assert r.set("big", big) is True
            back = r.get("big")
            assert back == big, f"{s.kind}: the 1 MB value came back as {len(back or b'')} bytes"
            results[s.kind] = (got, r.strlen("big"))
        finally:
            r.close()
    assert results["hb"] == results["redis"]


# ---------------------------------------------------------------------------------------------
# Startup and shutdown
# ---------------------------------------------------------------------------------------------


def test_port_0_socket_only_matches_redis():
    """``port 0`` and a ``unixsocket``: no TCP listener; the port shows as 0. SHUTDOWN over the
    socket ends the server with exit code 0 and removes the socket file."""
    servers = [SockServer(kind, tcp=False) for kind in ("hb", "redis")]
    try:
        seen = {}
        for s in servers:
            s.start()
            listeners = tcp_listeners_of(s.proc.pid)
            with s.unix() as c:
                port = c.call("CONFIG", "GET", "port")
                info = c.call("INFO", "server").decode()
                tcp_port = re.search(r"\r\ntcp_port:(\d+)\r\n", info).group(1)
            p = s.cli("SHUTDOWN", "NOSAVE")
            rc = s.wait()
            seen[s.kind] = (listeners, port, tcp_port, rc, os.path.exists(s.sock), p.returncode)
        assert seen["redis"][:5] == (0, b"*2\r\n$4\r\nport\r\n$1\r\n0\r\n", "0", 0, False), seen["redis"]
        assert seen["hb"] == seen["redis"]
    finally:
        for s in servers:
            s.cleanup()


def test_tcp_listener_check_sees_a_tcp_port(hb_sock):
    """The check of the test above finds a listener where there is one."""
    assert tcp_listeners_of(hb_sock.proc.pid) >= 1


def test_sigterm_removes_the_socket_like_redis():
    servers = [SockServer(kind) for kind in ("hb", "redis")]
    try:
        seen = {}
        for s in servers:
            s.start()
            assert os.path.exists(s.sock)
            os.kill(s.proc.pid, signal.SIGTERM)
            rc = s.wait()
            seen[s.kind] = (rc, os.path.exists(s.sock))
        assert seen["redis"] == (0, False)
        assert seen["hb"] == seen["redis"]
    finally:
        for s in servers:
            s.cleanup()


@pytest.mark.parametrize("what", ["regular-file", "stale-socket"])
def test_a_file_at_the_path_is_replaced_like_redis(what):
    servers = [SockServer(kind, tcp=False, extra=("--unixsocketperm", PERM)) for kind in ("hb", "redis")]
    try:
        seen = {}
        for s in servers:
            if what == "regular-file":
                with open(s.sock, "wb") as f:
                    f.write(b"not a socket")
            else:
                stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                stale.bind(s.sock)
                stale.close()
            assert os.path.exists(s.sock)
            s.start()
            st = os.stat(s.sock)
            with s.unix() as c:
                seen[s.kind] = (stat.S_ISSOCK(st.st_mode), stat.S_IMODE(st.st_mode), c.call("SET", "k", "v"))
        assert seen["redis"] == (True, 0o700, b"+OK\r\n")
        assert seen["hb"] == seen["redis"]
    finally:
        for s in servers:
            s.cleanup()


def test_a_relative_unixsocket_is_under_dir_like_redis():
    """Redis changes its working directory to ``dir`` while reading the configuration, so a relative
    ``unixsocket`` names a file under ``dir`` (not under the directory the server was started in);
    SHUTDOWN removes that file."""
    seen = {}
    for kind, binary in (("hb", str(HYPERBLOOM_BIN)), ("redis", REDIS_SERVER)):
        top = tempfile.mkdtemp(prefix=f"hbus-rel-{kind}-", dir="/tmp")
        start_dir, data = os.path.join(top, "start"), os.path.join(top, "data")
        os.mkdir(start_dir)
        os.mkdir(data)
        with open(os.path.join(top, "server.log"), "wb") as log:
            proc = subprocess.Popen(
                [binary, "--port", "0", "--save", "", "--dir", data, "--unixsocket", "rel.sock"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=start_dir,
            )
        try:
            want = os.path.join(data, "rel.sock")
            deadline = time.monotonic() + 5
            answered = False
            while time.monotonic() < deadline and proc.poll() is None and not answered:
                try:
                    with UnixRaw(want, timeout=2) as c:
                        answered = c.call("PING") == b"+PONG\r\n"
                except OSError:
                    time.sleep(0.02)
            found = sorted(os.path.relpath(os.path.join(d, f), top)
                           for d, _, files in os.walk(top) for f in files if f.endswith(".sock"))
            removed = None
            if answered:
                with UnixRaw(want) as c:
                    c.send_raw(b"SHUTDOWN NOSAVE\r\n")
                proc.wait(timeout=10)
                removed = not os.path.exists(want)
            seen[kind] = (answered, found, removed)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            shutil.rmtree(top, ignore_errors=True)
    assert seen["redis"] == (True, ["data/rel.sock"], True), "redis-server itself"
    assert seen["hb"] == seen["redis"], f"(answered under dir, .sock files, removed): hyperbloom {seen['hb']}, redis {seen['redis']}"


def test_a_socket_in_a_missing_directory_fails_like_redis():
    seen = {}
    for kind in ("hb", "redis"):
        s = SockServer(kind, tcp=False, sock_name="missing/s.sock")
        try:
            s.spawn()
            rc = s.wait()
            log = s.log()
            assert log.strip(), f"{kind} logged nothing"
            seen[kind] = rc
        finally:
            s.cleanup()
    assert seen == {"hb": 1, "redis": 1}

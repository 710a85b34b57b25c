"""Fixtures for the compatibility suite.

The suite drives real Redis tools (redis-cli, redis-benchmark) and redis-py against the hyperbloom
release binary, and where Redis itself implements a command, against a real ``redis-server`` started
beside it, so outputs can be compared byte for byte.

Both servers are started once per session on free ports (never 6379, where a system redis may run),
with ``--save ""`` and a temporary ``dir``, and are stopped at the end of the session. Readiness is
detected by polling PING, never by fixed sleeps. Each test starts from empty servers (FLUSHALL).

Tests that need commands hyperbloom does not have yet are marked ``@pytest.mark.requires("cmd", ...)``:
they are skipped, with the missing names in the skip reason, until the command appears in
hyperbloom's ``COMMAND INFO``; they then run without any change here.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
HYPERBLOOM_BIN = Path(
    os.environ.get("HYPERBLOOM_BIN")
    or Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "release" / "hyperbloom"
)
REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
REDIS_BENCHMARK = shutil.which("redis-benchmark")

_started: list["Server"] = []


def free_port() -> int:
    """A port the kernel considers free right now (the caller retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# Raw RESP: exact reply bytes, for byte-for-byte comparisons.
# ---------------------------------------------------------------------------------------------


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def frame_len(buf: bytes, at: int = 0) -> int | None:
    """End offset of the complete RESP2/RESP3 frame starting at ``at``, or None if incomplete."""
    if at >= len(buf):
        return None
    end = buf.find(b"\r\n", at)
    if end < 0:
        return None
    kind = buf[at : at + 1]
    nxt = end + 2
    if kind in (b"+", b"-", b":", b"_", b"#", b",", b"("):
        return nxt
    n = int(buf[at + 1 : end])
    if kind in (b"$", b"=", b"!"):
        if n < 0:
            return nxt
        stop = nxt + n + 2
        return stop if len(buf) >= stop else None
    if kind in (b"*", b"~", b">", b"%", b"|"):
        if n < 0:
            return nxt
        count = n * 2 if kind in (b"%", b"|") else n
        pos = nxt
        for _ in range(count):
            pos = frame_len(buf, pos)
            if pos is None:
                return None
        if kind == b"|":  # an attribute precedes the reply it describes
            return frame_len(buf, pos)
        return pos
    raise ValueError(f"not a RESP frame: {buf[at:at + 40]!r}")


class Raw:
    """A plain socket that sends commands and returns each reply's exact bytes."""

    def __init__(self, port: int, timeout: float = 30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_reply(self) -> bytes:
        while True:
            n = frame_len(self.buf)
            if n is not None:
                out, self.buf = self.buf[:n], self.buf[n:]
                return out
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"connection closed; have {self.buf!r}")
            self.buf += chunk

    def call(self, *args) -> bytes:
        self.send_raw(encode(*args))
        return self.read_reply()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------------------------
# Server processes
# ---------------------------------------------------------------------------------------------


class Server:
    """A server process on a free port, ready once it answers PING."""

    def __init__(self, name: str, argv_for_port):
        self.name = name
        self.argv_for_port = argv_for_port
        self.dir = tempfile.mkdtemp(prefix=f"compat-{name}-")
        self.log_path = Path(self.dir) / "server.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self._has: dict[str, bool] = {}

    def start(self, attempts: int = 5, timeout: float = 30.0) -> "Server":
        last = ""
        for _ in range(attempts):
            self.port = free_port()
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    self.argv_for_port(self.port, self.dir),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.dir,
                    start_new_session=True,
                )
            if self._wait_ready(timeout):
                _started.append(self)
                return self
            last = self.log_path.read_text(errors="replace")
            self.stop()
        raise RuntimeError(f"{self.name} did not start; last log:\n{last}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- clients -------------------------------------------------------------------------------

    def client(self, protocol: int | None = 3, **kw) -> redis.Redis:
        """redis-py client; ``protocol=None`` leaves redis-py's default."""
        if protocol is not None:
            kw["protocol"] = protocol
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def raw(self) -> Raw:
        return Raw(self.port)

    def has_command(self, name: str) -> bool:
        """True if COMMAND INFO knows ``name`` (``container|sub`` for subcommands)."""
        name = name.lower()
        if name not in self._has:
            container, _, sub = name.partition("|")
            with self.raw() as c:
                reply = c.call("COMMAND", "INFO", container)
            # Unknown: a one-element array holding a null (Redis 7.0 writes `$-1`; accept any null).
            known = not reply.startswith((b"*1\r\n$-1\r\n", b"*1\r\n*-1\r\n", b"*1\r\n_\r\n", b"-"))
            if known and sub:
                # A container's COMMAND INFO lists its subcommands by their full `container|sub` names.
                known = b"\r\n%s\r\n" % name.encode() in reply.lower()
            self._has[name] = known
        return self._has[name]

    def cli(self, *args: str, input: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Runs redis-cli against this server; stdout/stderr as bytes."""
        return subprocess.run(
            [REDIS_CLI, "-h", "127.0.0.1", "-p", str(self.port), *args],
            input=input if input is not None else b"",
            capture_output=True,
            timeout=timeout,
        )

    def flush(self) -> None:
        with self.raw() as c:
            c.call("FLUSHALL")


def _hyperbloom_argv(port: int, workdir: str) -> list[str]:
    return [str(HYPERBLOOM_BIN), "--port", str(port), "--save", "", "--bind", "127.0.0.1", "--dir", workdir]


def _redis_argv(port: int, workdir: str) -> list[str]:
    return [
        REDIS_SERVER, "--port", str(port), "--save", "", "--appendonly", "no", "--daemonize", "no",
        "--bind", "127.0.0.1", "--dir", workdir,
    ]


@atexit.register
def _stop_all() -> None:
    for s in _started:
        s.cleanup()


# ---------------------------------------------------------------------------------------------
# pytest wiring
# ---------------------------------------------------------------------------------------------


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires(*commands): skip unless hyperbloom has all these commands (COMMAND INFO)",
    )


@pytest.fixture(scope="session")
def hb_server():
    if not HYPERBLOOM_BIN.exists():
        pytest.fail(f"{HYPERBLOOM_BIN} not found: run `cargo build --release` (scripts/test.sh does)")
    s = Server("hyperbloom", _hyperbloom_argv).start()
    yield s
    s.cleanup()


@pytest.fixture(scope="session")
def redis_server():
    if REDIS_SERVER is None:
        pytest.fail("redis-server not found: scripts/test.sh installs it (apt-get install redis-server)")
    s = Server("redis", _redis_argv).start()
    yield s
    s.cleanup()


@pytest.fixture
def hb(hb_server, request):
    """hyperbloom, emptied, after checking the test's ``requires`` marker."""
    marker = request.node.get_closest_marker("requires")
    if marker:
        missing = [c for c in marker.args if not hb_server.has_command(c)]
        if missing:
            pytest.skip(f"hyperbloom lacks {', '.join(missing)} (not in main yet)")
    hb_server.flush()
    return hb_server


@pytest.fixture
def real(redis_server):
    """A real redis-server, emptied."""
    redis_server.flush()
    return redis_server


@pytest.fixture(params=[None, 3, 2], ids=["default", "resp3", "resp2"])
def protocol(request) -> int | None:
    """redis-py's protocol argument. None is redis-py 8's default: RESP3 on the wire (HELLO 3) with
    replies shaped as in RESP2 ("legacy responses"); an explicit 3 also gives RESP3-shaped replies
    (maps as dicts, BF.INFO as a dict, ...)."""
    return request.param


@pytest.fixture
def r(hb, protocol):
    """redis-py on hyperbloom, in each protocol mode."""
    client = hb.client(protocol=protocol)
    yield client
    client.close()


def require_tools():
    missing = [n for n, p in (("redis-cli", REDIS_CLI), ("redis-benchmark", REDIS_BENCHMARK)) if p is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: scripts/test.sh installs redis-tools")

"""Throwaway servers for the example: a PostgreSQL cluster in a temp dir and hyperbloom processes.

Nothing here is part of the pattern itself (that is prefilter.py); it is what the example needs to run
anywhere with one command: a free port, `initdb` + `pg_ctl` on a private data directory (as the
`postgres` user when we are root, because PostgreSQL refuses to run as root), and hyperbloom started
from its release binary with a private `--dir` for its RDB snapshots.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, from /proc (10 ms resolution)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    fields = stat[stat.rindex(b")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS


def find_pg_bin() -> Path:
    """Directory of initdb/pg_ctl/postgres: $PG_BIN, then Debian's newest /usr/lib/postgresql/N/bin, then PATH."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if versions:
        return Path(versions[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    raise RuntimeError("PostgreSQL not found: apt-get install postgresql, or set PG_BIN")


class PostgresCluster:
    """A private PostgreSQL cluster: initdb into `root`, pg_ctl start on a free port, stop + delete on exit.

    Tuned for a disposable benchmark database (fsync off, no synchronous commit): the data is generated
    and thrown away. Lookups use TCP on 127.0.0.1 like an application server on the same host would.
    """

    def __init__(self, root: Path, shared_buffers: str = "256MB"):
        self.root = Path(root)
        self.data = self.root / "pgdata"
        self.port = free_port()
        self.bin = find_pg_bin()
        self.shared_buffers = shared_buffers
        self.as_user: list[str] = []
        self.owner = None
        if os.geteuid() == 0:
            try:
                self.owner = pwd.getpwnam("postgres")
            except KeyError as e:
                raise RuntimeError("running as root needs a 'postgres' user (apt-get install postgresql)") from e
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.as_user, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.decode().strip()}")

    def start(self) -> "PostgresCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        if self.owner is not None:
            os.chown(self.root, self.owner.pw_uid, self.owner.pw_gid)
            # The postgres user must be able to reach its directory (temp dirs are created 0700).
            parent = self.root.parent
            while parent != parent.parent and os.stat(parent).st_mode & 0o001 == 0:
                os.chmod(parent, os.stat(parent).st_mode | 0o001)
                parent = parent.parent
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "--no-sync", "-E", "UTF8", "--locale", "C")
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
            f"-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            f"-c shared_buffers={self.shared_buffers} -c max_wal_size=4GB -c checkpoint_timeout=30min "
            f"-c maintenance_work_mem=512MB -c autovacuum=off"
        )
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "postgres.log"),
                  "-o", options, "-w", "-t", "60", "start")
        return self

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                            "-w", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def find_hyperbloom() -> str:
    """$HYPERBLOOM_BIN, else the repository's release build next to this example."""
    if os.environ.get("HYPERBLOOM_BIN"):
        return os.environ["HYPERBLOOM_BIN"]
    repo = Path(__file__).resolve().parents[2]
    target = Path(os.environ.get("CARGO_TARGET_DIR", repo / "target"))
    candidate = target / "release" / "hyperbloom"
    if candidate.exists():
        return str(candidate)
    raise RuntimeError("hyperbloom binary not found: cargo build --release, or set HYPERBLOOM_BIN")


class ServerProcess:
    """A hyperbloom (or redis-server) process on a free port with a private --dir, stopped on exit."""

    def __init__(self, binary: str, workdir: Path, port: int | None = None, extra: list[str] | None = None):
        self.binary = binary
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.extra = extra or []
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / f"server-{self.port}.log"

    def start(self, timeout: float = 120.0) -> float:
        """Starts the server and waits until it answers commands (not -LOADING). Returns the seconds taken."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
                "--save", "", "--appendonly", "no", *self.extra]
        started = time.perf_counter()
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.binary} exited with {self.proc.returncode}; see {self.log_path}")
            try:
                client.execute_command("DBSIZE")  # answers -LOADING until the snapshot is in memory
                break
            except (redis.ConnectionError, redis.BusyLoadingError, redis.ResponseError):
                if time.perf_counter() - started > timeout:
                    raise
                time.sleep(0.002)
        client.close()
        return time.perf_counter() - started

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(port=self.port, **kw)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

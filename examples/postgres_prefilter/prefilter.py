"""The pattern: a Bloom filter in hyperbloom in front of a PostgreSQL `users(email)` table.

This module is the part an application would copy. `example.py` drives it and measures it.

* `warm()` fills a filter from the table: one server-side cursor, rows streamed in batches into
  pipelined `BF.MADD` (or `CF.INSERT` for the cuckoo filter), so neither side holds the table.
* `UserDirectory.lookup()` asks hyperbloom first and goes to PostgreSQL only on "maybe".
* `UserDirectory.add()` writes the filters first, then the row. The order matters: a lookup that runs
  between the two sees a false positive (harmless, the database says "no"); the other order would
  give a false negative for a row that exists.
* `UserDirectory.delete()` deletes the row, then removes it from the cuckoo filter with `CF.DEL`. A
  cuckoo filter may only be asked to delete what was added, or it can drop another item's fingerprint
  (a false negative). Deleting only what `DELETE ... RETURNING` returned guarantees that. A Bloom
  filter cannot delete at all: a deleted row stays a false positive until the next rebuild.
* `health()` reads the fill ratio of every link (`BF.DEBUG`) and predicts the false-positive rate.
  `rebuild()` builds a larger filter under `<key>:next` and swaps it in with `RENAME`, which is
  atomic: a lookup sees the old filter or the new one, never neither. While the new filter is being
  built, `add()` writes to both: its `MULTI` holds `BF.INSERT <key>:next NOCREATE`, a no-op error while
  no rebuild runs, and `RENAME` cannot fall between the two writes.
* `scandump_to_file()` / `loadchunks_from_file()` move a filter to another server (cold start).
* `LocalBloom` is an in-process Bloom filter for application instances that keep their own copy and
  learn each other's additions through pub/sub.
"""

from __future__ import annotations

import hashlib
import math
import struct
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import psycopg
import redis

BATCH = 1000  # items per BF.MADD / CF.INSERT
PIPELINE_DEPTH = 8  # commands per pipeline round trip while warming


# ------------------------------------------------------------------------------------------------
# Warming from the table
# ------------------------------------------------------------------------------------------------

def stream_emails(pg_dsn: str, batch: int = BATCH) -> Iterator[list[str]]:
    """All e-mails of the table, in batches, through a server-side cursor in one snapshot."""
    with psycopg.connect(pg_dsn) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.cursor(name="warm_users") as cur:
            cur.itersize = batch * PIPELINE_DEPTH
            cur.execute("SELECT email FROM users")
            while True:
                rows = cur.fetchmany(batch)
                if not rows:
                    break
                yield [row[0] for row in rows]


def warm(r: redis.Redis, pg_dsn: str, key: str, *, error_rate: float = 0.001, capacity: int,
         kind: str = "bloom", progress: Callable[[int], None] | None = None,
         reserve: bool = True) -> int:
    """Creates `key` and adds every row of the table to it. Returns the number of rows streamed."""
    if reserve:
        if kind == "bloom":
            r.execute_command("BF.RESERVE", key, error_rate, capacity)
        else:
            # Bucket size 2, 8-bit fingerprints: about 2 x 2 / 256 false positives when full. The
            # eviction walk is RedisBloom's deterministic one, so a filter can grow a second
            # sub-filter well before it is full (10 M items in 2^23 buckets did, at 60 % load,
            # with MAXITERATIONS 20 as with 500); lookups then check both.
            r.execute_command("CF.RESERVE", key, capacity)
    add = ("BF.MADD", key) if kind == "bloom" else ("CF.INSERT", key, "NOCREATE", "ITEMS")
    rows = 0
    pipe = r.pipeline(transaction=False)
    queued = 0
    for emails in stream_emails(pg_dsn):
        pipe.execute_command(*add, *emails)
        queued += 1
        rows += len(emails)
        if queued == PIPELINE_DEPTH:
            check_replies(pipe.execute(), kind)
            queued = 0
            if progress:
                progress(rows)
    if queued:
        check_replies(pipe.execute(), kind)
    if progress:
        progress(rows)
    return rows


def check_replies(replies: list, kind: str) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        if kind == "cuckoo" and any(isinstance(x, Exception) or x == -1 for x in reply):
            raise RuntimeError("cuckoo filter is full: reserve a larger capacity")


# ------------------------------------------------------------------------------------------------
# The application's view: lookup, add, delete
# ------------------------------------------------------------------------------------------------

class UserDirectory:
    """Lookups through a filter. `use` selects the filter lookups consult: "bloom" (tables without
    deletes), "cuckoo" (tables with deletes) or None (no filter: every lookup is a query)."""

    def __init__(self, r: redis.Redis, pg: psycopg.Connection, *, key: str = "users",
                 cuckoo_key: str | None = "users:cf", use: str | None = "bloom"):
        self.r = r
        self.pg = pg  # autocommit connection: each lookup is its own short transaction
        self.key = key
        self.next_key = key + ":next"
        self.cuckoo_key = cuckoo_key
        self.use = use
        self.db_queries = 0

    def may_exist(self, email: str) -> bool:
        if self.use == "bloom":
            return self.r.execute_command("BF.EXISTS", self.key, email) == 1
        if self.use == "cuckoo":
            return self.r.execute_command("CF.EXISTS", self.cuckoo_key, email) == 1
        return True

    def lookup(self, email: str) -> int | None:
        """The user's id, or None. PostgreSQL is asked only when the filter says "maybe"."""
        if not self.may_exist(email):
            return None
        self.db_queries += 1
        row = self.pg.execute("SELECT id FROM users WHERE email = %s", (email,)).fetchone()
        return row[0] if row else None

    def add_to_filters(self, emails: list[str]) -> None:
        """Filters first (see the module essay), atomically with the rebuild target `<key>:next`."""
        pipe = self.r.pipeline(transaction=True)
        pipe.execute_command("BF.MADD", self.key, *emails)
        pipe.execute_command("BF.INSERT", self.next_key, "NOCREATE", "ITEMS", *emails)
        if self.cuckoo_key:
            pipe.execute_command("CF.INSERT", self.cuckoo_key, "NOCREATE", "ITEMS", *emails)
        replies = pipe.execute(raise_on_error=False)
        for reply in replies[0:1] + replies[2:]:
            if isinstance(reply, Exception):
                raise reply
        nxt = replies[1]
        if isinstance(nxt, Exception) and "not found" not in str(nxt):
            raise nxt  # "not found" only means no rebuild is running

    def add(self, email: str) -> int | None:
        """Inserts a new user. Returns its id, or None if the e-mail was already taken."""
        self.add_to_filters([email])
        row = self.pg.execute(
            "INSERT INTO users (email) VALUES (%s) ON CONFLICT (email) DO NOTHING RETURNING id", (email,)
        ).fetchone()
        return row[0] if row else None

    def add_many(self, emails: list[str]) -> int:
        """Bulk arrival (an import): one MULTI for the filters, one INSERT for the rows."""
        self.add_to_filters(emails)
        cur = self.pg.execute(
            "INSERT INTO users (email) SELECT unnest(%s::text[]) ON CONFLICT (email) DO NOTHING", (emails,)
        )
        return cur.rowcount

    def delete(self, email: str) -> bool:
        """Deletes a user: the row first, then its cuckoo fingerprint, only if a row was deleted."""
        row = self.pg.execute("DELETE FROM users WHERE email = %s RETURNING id", (email,)).fetchone()
        if row is None:
            return False
        if self.cuckoo_key:
            self.r.execute_command("CF.DEL", self.cuckoo_key, email)
        return True


# ------------------------------------------------------------------------------------------------
# Health: fill ratio, predicted false-positive rate, rebuild + RENAME
# ------------------------------------------------------------------------------------------------

@dataclass
class Link:
    bits: int
    hashes: int
    capacity: int
    size: int
    ratio: float

    @property
    def fill(self) -> float:
        return self.size / self.capacity

    @property
    def predicted_fp(self) -> float:
        """(1 - e^(-k n / m))^k: the chance that k bits of a non-member are all set."""
        return (1.0 - math.exp(-self.hashes * self.size / self.bits)) ** self.hashes


def bf_links(r: redis.Redis, key: str) -> list[Link]:
    """The links of a Bloom filter from BF.DEBUG (`bytes:.. bits:.. hashes:.. capacity:.. size:..`)."""
    lines = r.execute_command("BF.DEBUG", key)
    links = []
    for line in lines[1:]:
        text = line.decode() if isinstance(line, bytes) else line
        f = dict(part.split(":", 1) for part in text.split())
        links.append(Link(int(f["bits"]), int(f["hashes"]), int(f["capacity"]), int(f["size"]),
                          float(f["ratio"])))
    return links


def bf_info(r: redis.Redis, key: str) -> dict[str, int]:
    reply = r.execute_command("BF.INFO", key)
    if isinstance(reply, dict):  # RESP3 map
        items = reply.items()
    else:
        items = zip(reply[::2], reply[1::2])
    return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in items}


def health(r: redis.Redis, key: str) -> dict:
    links = bf_links(r, key)
    info = bf_info(r, key)
    planned = links[0].capacity
    items = sum(link.size for link in links)
    miss = 1.0
    for link in links:
        miss *= 1.0 - link.predicted_fp
    return {
        "items": items,
        "planned_capacity": planned,
        "fill": items / planned,
        "links": [{"capacity": l.capacity, "size": l.size, "fill": l.fill, "bits": l.bits,
                   "hashes": l.hashes, "error": l.ratio, "predicted_fp": l.predicted_fp} for l in links],
        "predicted_fp": 1.0 - miss,
        "bytes": info["Size"],
    }


def rebuild(r: redis.Redis, pg_dsn: str, key: str, *, error_rate: float, capacity: int,
            grace: float = 0.2, progress: Callable[[int], None] | None = None) -> dict:
    """Builds a new filter of `capacity` under `<key>:next` from the table and swaps it in.

    Writers that start after BF.RESERVE also write to `<key>:next` (see UserDirectory.add_to_filters).
    A writer that wrote the filters just before it may commit its row after the snapshot below is
    taken; the grace period (longer than a writer's filter-write-to-commit time) keeps such a row in
    the snapshot. RENAME replaces `key` atomically.
    """
    tmp = key + ":next"
    r.delete(tmp)
    started = time.perf_counter()
    r.execute_command("BF.RESERVE", tmp, error_rate, capacity)
    time.sleep(grace)
    rows = warm(r, pg_dsn, tmp, capacity=capacity, reserve=False, progress=progress)
    built = time.perf_counter()
    r.execute_command("RENAME", tmp, key)
    swapped = time.perf_counter()
    return {"rows": rows, "build_seconds": built - started, "rename_seconds": swapped - built,
            "capacity": capacity}


# ------------------------------------------------------------------------------------------------
# Cold start: SCANDUMP to a file, LOADCHUNK into another server
# ------------------------------------------------------------------------------------------------

DUMP_MAGIC = b"hyperbloom-scandump-1\n"


def scandump_to_file(r: redis.Redis, key: str, path) -> int:
    """Writes the filter's SCANDUMP chunks as (i64 iterator, u32 length, bytes) records. Returns bytes."""
    total = 0
    with open(path, "wb") as f:
        f.write(DUMP_MAGIC)
        cursor = 0
        while True:
            cursor, data = r.execute_command("BF.SCANDUMP", key, cursor)
            if cursor == 0:
                break
            f.write(struct.pack("<qI", cursor, len(data)))
            f.write(data)
            total += len(data)
    return total


def loadchunks_from_file(r: redis.Redis, key: str, path) -> int:
    """Restores a filter written by scandump_to_file with BF.LOADCHUNK. Returns the chunk count."""
    chunks = 0
    with open(path, "rb") as f:
        if f.read(len(DUMP_MAGIC)) != DUMP_MAGIC:
            raise ValueError(f"{path}: not a scandump file")
        while True:
            head = f.read(12)
            if not head:
                break
            if len(head) != 12:
                raise ValueError(f"{path}: truncated record header")
            cursor, length = struct.unpack("<qI", head)
            data = f.read(length)
            if len(data) != length:
                raise ValueError(f"{path}: truncated chunk")
            r.execute_command("BF.LOADCHUNK", key, cursor, data)
            chunks += 1
    return chunks


# ------------------------------------------------------------------------------------------------
# An in-process Bloom filter for application instances
# ------------------------------------------------------------------------------------------------

class LocalBloom:
    """A pure-Python Bloom filter sized like RedisBloom's for (capacity, error_rate).

    Bits per entry -ln(p)/ln(2)^2, k = ceil(ln(2) * bpe), the bit count rounded up to 64; double
    hashing over a 128-bit BLAKE2b digest. Its hash is not RedisBloom's, so it cannot load SCANDUMP
    chunks: instances build it from what they add and what they hear from each other.
    """

    def __init__(self, capacity: int, error_rate: float):
        bpe = -math.log(error_rate) / (math.log(2) ** 2)
        self.bits = max(64, math.ceil(capacity * bpe / 64) * 64)
        self.hashes = math.ceil(math.log(2) * bpe)
        self.array = bytearray(self.bits // 8)
        self.count = 0

    def _positions(self, item: str):
        digest = hashlib.blake2b(item.encode(), digest_size=16).digest()
        a, b = struct.unpack("<QQ", digest)
        for i in range(self.hashes):
            yield (a + i * b) % self.bits

    def add(self, item: str) -> bool:
        new = False
        for pos in self._positions(item):
            byte, bit = divmod(pos, 8)
            if not self.array[byte] & (1 << bit):
                self.array[byte] |= 1 << bit
                new = True
        self.count += new
        return new

    def __contains__(self, item: str) -> bool:
        return all(self.array[p >> 3] & (1 << (p & 7)) for p in self._positions(item))

    def digest(self) -> str:
        return hashlib.sha256(self.array).hexdigest()

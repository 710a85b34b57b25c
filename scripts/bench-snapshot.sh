#!/usr/bin/env bash
# The snapshot's effect on latency (a benchmark, not a test: nothing here asserts a speed).
#
# For each binary given (default: this tree's release build), in ROUNDS interleaved rounds (the
# binary order rotating from round to round, so a burst of load elsewhere on the machine hits
# every column alike): start a server with `appendonly yes`, fill it with ~KEYS string keys
# (redis-benchmark SET with random keys, pipelined) plus a large Bloom filter, a thousand small
# ones and a cuckoo filter, then run an unpipelined 50-client load (CMD, default SET on the same
# random key range, so half the writes overwrite keys the snapshot holds) three times:
#   idle      no snapshot;
#   rewrite   BGREWRITEAOF issued one second into the load;
#   bgsave    BGSAVE issued one second into the load.
# Reported per row: redis-benchmark's rps and p50/p99/max latency, and the time the keyspace lock
# was held to take the snapshot (INFO stats `latest_fork_usec`, our analogue of Redis's fork
# time, when the binary reports it; else the BGSAVE log line "snapshot taken in").
#
# Usage: scripts/bench-snapshot.sh [binary...]
#   KEYS=1000000 N=300000 ROUNDS=3 CMD="SET key:__rand_int__ xxxxxxxxxxxxxxxx"
#   LOGDIR=dir keeps each server's log there
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KEYS=${KEYS:-1000000}
N=${N:-300000}
ROUNDS=${ROUNDS:-3}
CMD=${CMD:-SET key:__rand_int__ xxxxxxxxxxxxxxxx}
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$TARGET/release/hyperbloom")
WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT

cli() { redis-cli -p "$PORT" "$@"; }
info() { cli INFO "$1" | tr -d '\r' | grep "^$2:" | cut -d: -f2; }
wait_zero() { while [ "$(info persistence "$1")" != 0 ]; do sleep 0.05; done; }

start() { # binary
  rm -rf "$WORK/dir"; mkdir -p "$WORK/dir"
  PORT=$((20000 + RANDOM % 20000))
  "$1" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$WORK/dir" --appendonly yes \
    --appendfsync everysec --auto-aof-rewrite-percentage 0 --loglevel notice >"$WORK/log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do cli ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
  redis-benchmark -p "$PORT" -n $((KEYS * 3)) -c 50 -P 16 -r "$KEYS" -q SET key:__rand_int__ xxxxxxxxxxxxxxxx >/dev/null
  cli BF.RESERVE big 0.01 10000000 >/dev/null   # filters: skipped by a server without RedisBloom
  redis-benchmark -p "$PORT" -n 200000 -c 50 -P 16 -r 100000000 -q BF.ADD big __rand_int__ >/dev/null 2>&1 || true
  redis-benchmark -p "$PORT" -n 20000 -c 50 -P 16 -r 1000 -q BF.ADD bf:__rand_int__ __rand_int__ >/dev/null 2>&1 || true
  redis-benchmark -p "$PORT" -n 20000 -c 50 -P 16 -r 100000000 -q CF.ADD cf __rand_int__ >/dev/null 2>&1 || true
  # The fill's own AOF growth is not what we measure: start from a fresh base.
  cli BGREWRITEAOF >/dev/null; sleep 0.2; wait_zero aof_rewrite_in_progress
}
stop() { # round binary
  cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; PID=
  [ -n "${LOGDIR:-}" ] && cp "$WORK/log" "$LOGDIR/server-$1-$2.log"
  return 0
}

load() { # trigger-command-or-empty
  # shellcheck disable=SC2086
  redis-benchmark -p "$PORT" -n "$N" -c 50 -r "$KEYS" --csv $CMD >"$WORK/csv" 2>/dev/null &
  local b=$!
  sleep 1
  [ -n "$1" ] && cli "$1" >/dev/null
  wait $b
  tail -1 "$WORK/csv" | tr -d '"' | cut -d, -f2- | tr , ' '
}
lock_ms() {
  local f; f=$(info stats latest_fork_usec)
  if [ -n "$f" ] && [ "$f" != 0 ]; then echo "scale=3; $f / 1000" | bc
  else grep -o "snapshot taken in [0-9.]* ms" "$WORK/log" | tail -1 | grep -o "[0-9.]*" | head -1 || echo "?"
  fi
}

R=$WORK/results
: >"$R"
for round in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((${#BINS[@]} - 1))); do
    b=$(((k + round) % ${#BINS[@]}))
    start "${BINS[$b]}"
    keys=$(cli DBSIZE)
    echo "$round $b idle $keys $(load "") -" >>"$R"
    echo "$round $b rewrite $keys $(load BGREWRITEAOF) $(wait_zero aof_rewrite_in_progress; lock_ms)" >>"$R"
    echo "$round $b bgsave $keys $(load BGSAVE) $(wait_zero rdb_bgsave_in_progress; lock_ms)" >>"$R"
    stop "$round" "$b"
  done
done
echo "load: $CMD, unpipelined, 50 clients, $N requests; keyspace ~$KEYS strings + filters; $(uptime | sed 's/.*load/load/')"
for b in $(seq 0 $((${#BINS[@]} - 1))); do echo "binary $b: ${BINS[$b]}"; done
echo "round bin phase keys rps avg_ms min_ms p50_ms p95_ms p99_ms max_ms lock_ms"
sort -k2,2n -k3,3 -k1,1n "$R" | column -t

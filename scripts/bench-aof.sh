#!/usr/bin/env bash
# AOF benchmarks (a benchmark, not a test: nothing here asserts a speed).
#
# 1. Pipelined throughput (redis-benchmark -P 16, 50 clients) of SET, BF.ADD and PFADD on a
#    release hyperbloom with the AOF off, appendfsync everysec and appendfsync always, and on
#    redis-server 7.0.15 with appendfsync always, all in the same run.
# 2. The rewrite's effect on latency: BF.ADD p50/p99 without and during a BGREWRITEAOF of a
#    keyspace of ~N string keys plus one large Bloom filter.
# 3. Load speed: the AOF written in (2) loaded at startup (MB/s from the server's log line).
#
# Usage: scripts/bench-aof.sh [requests]
set -euo pipefail
N=${1:-300000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release/hyperbloom
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --bin hyperbloom)
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

start() { # name port args...
  local name=$1 port=$2; shift 2
  mkdir -p "$WORK/$name"
  "$@" --port "$port" --bind 127.0.0.1 --save "" --dir "$WORK/$name" --loglevel notice \
    >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 200); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return; sleep 0.05; done
  echo "$name did not start"; exit 1
}
rps() { # port command...
  local port=$1; shift
  redis-benchmark -p "$port" -n "$N" -c 50 -P 16 -r 100000000 --csv "$@" | tail -1 | cut -d, -f2 | tr -d '"'
}

P0=$((20000 + RANDOM % 10000))
start off $P0 "$BIN" --appendonly no
start everysec $((P0 + 1)) "$BIN" --appendonly yes --appendfsync everysec
start always $((P0 + 2)) "$BIN" --appendonly yes --appendfsync always
start redis-always $((P0 + 3)) redis-server --appendonly yes --appendfsync always

echo "requests/s, pipelined -P 16, 50 clients, $N requests each"
printf "%-8s %12s %12s %12s %14s %8s %8s\n" cmd off everysec always redis-always ev/off al/redis
for cmd in SET BF.ADD PFADD; do
  case $cmd in
    SET) args=(SET key:__rand_int__ value) ;;
    BF.ADD) args=(BF.ADD bf __rand_int__) ;;
    PFADD) args=(PFADD hll __rand_int__) ;;
  esac
  off=$(rps $P0 "${args[@]}"); ev=$(rps $((P0 + 1)) "${args[@]}")
  al=$(rps $((P0 + 2)) "${args[@]}")
  if [ "$cmd" = BF.ADD ]; then rd=n/a; else rd=$(rps $((P0 + 3)) "${args[@]}"); fi
  r1=$(echo "scale=2; $ev / $off" | bc)
  r2=$( [ "$rd" = n/a ] && echo n/a || echo "scale=2; $al / $rd" | bc)
  printf "%-8s %12s %12s %12s %14s %8s %8s\n" "$cmd" "$off" "$ev" "$al" "$rd" "$r1" "$r2"
done

# 2. Rewrite under load (everysec server): fill, then BF.ADD latency without / during a rewrite.
PE=$((P0 + 1))
redis-benchmark -p $PE -n $((N * 3)) -c 50 -P 16 -r 100000000 -q SET fill:__rand_int__ xxxxxxxxxxxxxxxx >/dev/null
redis-cli -p $PE BF.RESERVE big 0.01 50000000 >/dev/null
lat() { redis-benchmark -p $PE -n "$N" -c 50 -r 100000000 --csv BF.ADD big __rand_int__ | tail -1; }
echo "columns: test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
echo "no rewrite:     $(lat)"
redis-cli -p $PE BGREWRITEAOF >/dev/null
echo "during rewrite: $(lat)"
while [ "$(redis-cli -p $PE INFO persistence | tr -d '\r' | grep aof_rewrite_in_progress | cut -d: -f2)" != 0 ]; do sleep 0.1; done
redis-cli -p $PE INFO persistence | tr -d '\r' | grep -E "aof_last_rewrite_time_sec|aof_current_size|aof_base_size"

# 3. Load: restart the everysec server on its directory and read the load line.
redis-cli -p $PE SHUTDOWN NOSAVE >/dev/null 2>&1 || true
sleep 0.5
"$BIN" --port $((P0 + 4)) --bind 127.0.0.1 --save "" --dir "$WORK/everysec" --appendonly yes \
  --loglevel notice >"$WORK/reload.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 600); do grep -q "loaded from append only file" "$WORK/reload.log" && break; sleep 0.1; done
grep "loaded from append only file" "$WORK/reload.log" | sed 's/.*DB loaded/DB loaded/'

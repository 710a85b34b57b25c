#!/usr/bin/env bash
# maxmemory eviction under load, hyperbloom against redis-server (+ RedisBloom when fetched), in
# one run, alternating: each round starts a fresh server of each kind with `--maxmemory` and the
# policy, pipes SETs of random new keys with a TTL (so volatile policies have keys to evict) far
# past the limit, and prints throughput, the server's CPU per request (utime+stime from
# /proc/PID/stat, 10 ms ticks), evicted_keys, used_memory and the keys left.
#
#   scripts/bench-evict.sh                          # allkeys-lru, 3 rounds
#   POLICIES="allkeys-lru allkeys-lfu volatile-ttl allkeys-random" ROUNDS=3 scripts/bench-evict.sh
#
# Server on core 1, redis-benchmark on core 0 (taskset), as `bench_load.py --pin`.
set -euo pipefail
cd "$(dirname "$0")/.."
POLICIES=${POLICIES:-allkeys-lru}
ROUNDS=${ROUNDS:-3}
MAXMEMORY=${MAXMEMORY:-64mb}
REQUESTS=${REQUESTS:-1000000}
PORT=${PORT:-7795}
HB=${HYPERBLOOM:-target/release/hyperbloom}
MODULE=target/refbloom/redisbloom.so
VALUE=$(head -c 100 /dev/zero | tr '\0' 'v')

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
field() { redis-cli -p "$PORT" info "$1" | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}'; }

echo "maxmemory $MAXMEMORY, redis-benchmark -c 50 -P 16 -n $REQUESTS -r 10000000, SET key:<rand> <100 B> EX 100000; $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg)"
echo "| policy | round | server | req/s | CPU µs/req | evicted_keys | used_memory | keys left |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
for policy in $POLICIES; do
  for round in $(seq 1 "$ROUNDS"); do
    order="hyperbloom redis"
    [ $((round % 2)) -eq 0 ] && order="redis hyperbloom"
    for server in $order; do
      if [ "$server" = hyperbloom ]; then
        taskset -c 1 "$HB" --port "$PORT" --save "" --maxmemory "$MAXMEMORY" \
          --maxmemory-policy "$policy" >/dev/null 2>&1 &
      else
        extra=()
        [ -f "$MODULE" ] && extra=(--loadmodule "$PWD/$MODULE")
        taskset -c 1 redis-server --port "$PORT" --save "" --appendonly no \
          --maxmemory "$MAXMEMORY" --maxmemory-policy "$policy" "${extra[@]}" >/dev/null 2>&1 &
      fi
      pid=$!
      for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
      t0=$(cpu_ticks "$pid")
      rps=$(taskset -c 0 redis-benchmark -p "$PORT" -c 50 -P 16 -n "$REQUESTS" -r 10000000 -q \
        SET key:__rand_int__ "$VALUE" EX 100000 2>/dev/null | tr '\r' '\n' |
        grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
      t1=$(cpu_ticks "$pid")
      cpu=$(echo "scale=2; ($t1 - $t0) * 10000 / $REQUESTS" | bc)
      echo "| $policy | $round | $server | $rps | $cpu | $(field stats evicted_keys) | $(field memory used_memory) | $(redis-cli -p "$PORT" dbsize) |"
      redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
      wait "$pid" 2>/dev/null || true
    done
  done
done

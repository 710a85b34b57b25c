#!/usr/bin/env bash
# Persistence benchmarks.
#
# 1. Save/load throughput on the library (no network): 1 GB of Bloom filters (incompressible,
#    filled to capacity) with rdbcompression no/yes, and a million small HLLs:
#       cargo run --release --example bench_persistence -- 1024 1000000 /tmp
# 2. BGSAVE latency impact: a release hyperbloom holding one ~1 GB Bloom filter, redis-benchmark
#    running BF.ADD (random items) without and then with a BGSAVE in progress; p50/p99 from
#    redis-benchmark's CSV, peak RSS (VmHWM) against the data size, BGSAVE duration.
#
# Usage: scripts/bench-persistence.sh [requests] [capacity]
set -euo pipefail
N=${1:-200000}
CAP=${2:-900000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release/hyperbloom
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --bin hyperbloom)
DIR=$(mktemp -d)
PORT=$((20000 + RANDOM % 20000))
"$BIN" --port $PORT --bind 127.0.0.1 --save "" --dir "$DIR" --loglevel warning --enable-debug-command yes &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.05; done
cli() { redis-cli -p $PORT "$@"; }
cli BF.RESERVE bf 0.01 "$CAP" NONSCALING >/dev/null
# Touch every page so the filter is resident (random bits everywhere), like a filter in use.
redis-benchmark -p $PORT -n $((N * 2)) -c 50 -r 1000000000 -q BF.ADD bf __rand_int__ >/dev/null
echo "filter: $(cli BF.INFO bf | sed -n 4p) bytes; RSS $(grep VmRSS /proc/$PID/status)"
bench() {
  redis-benchmark -p $PORT -n "$N" -c 50 -r 1000000000 --csv BF.ADD bf __rand_int__ | tail -1
}
echo "columns: test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
echo "baseline:     $(bench)"
cli BGSAVE >/dev/null
START=$(date +%s.%N)
echo "during BGSAVE: $(bench)"
while [ "$(cli INFO persistence | tr -d '\r' | grep rdb_bgsave_in_progress | cut -d: -f2)" != 0 ]; do sleep 0.05; done
END=$(date +%s.%N)
echo "BGSAVE done, status $(cli INFO persistence | tr -d '\r' | grep rdb_last_bgsave_status); file $(stat -c %s "$DIR/dump.rdb") bytes; at least $(echo "$END - $START" | bc) s"
echo "peak memory: $(grep VmHWM /proc/$PID/status)"
cli CONFIG SET rdbcompression no >/dev/null
T0=$(date +%s.%N); cli SAVE >/dev/null; T1=$(date +%s.%N)
echo "SAVE (rdbcompression no): $(echo "$T1 - $T0" | bc) s for $(stat -c %s "$DIR/dump.rdb") bytes"
T0=$(date +%s.%N); cli DEBUG RELOAD >/dev/null 2>&1 || true; T1=$(date +%s.%N)
echo "DEBUG RELOAD (save + load): $(echo "$T1 - $T0" | bc) s"

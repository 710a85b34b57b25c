#!/bin/bash
# A full SCAN walk as users run it (`redis-cli --scan`: COUNT 10, one step per round trip) over
# KEYS filler strings, on hyperbloom and on redis-server: the server's instructions per key
# returned (valgrind --tool=callgrind, the walk's interval only), then without valgrind the walk's
# wall time and the server's CPU ticks (utime+stime, 1/100 s).
#
#   scripts/bench_scan_walk.sh [HYPERBLOOM_BIN] [KEYS]
#
# Needs valgrind (callgrind_control), redis-server, redis-cli, python3.
set -euo pipefail
BIN=${1:-target/release/hyperbloom}
KEYS=${2:-100000}
PORT=$((20000 + RANDOM % 20000))

start() { # start SERVER [valgrind]
    local cmd=("$1" --port "$PORT" --save '')
    [ "$1" = redis-server ] && cmd+=(--appendonly no)
    if [ "${2:-}" = valgrind ]; then
        valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "${cmd[@]}" >/dev/null 2>&1 &
    else
        "${cmd[@]}" >/dev/null 2>&1 &
    fi
    PID=$!
    until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.2; done
    python3 -c "import sys; n = int(sys.argv[1]); sys.stdout.write(''.join(f'SET key:{i} v\r\n' for i in range(1, n + 1)))" "$KEYS" |
        redis-cli -p "$PORT" --pipe >/dev/null
}
stop() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; }

TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
for server in "$BIN" redis-server; do
    start "$server" valgrind
    callgrind_control -z "$PID" >/dev/null 2>&1
    n=$(redis-cli -p "$PORT" --scan | wc -l)
    callgrind_control -d "$PID" >/dev/null 2>&1
    sleep 1
    ir=$(grep -h '^summary:\|^totals:' "$TMP"/cg.out.1 | head -1 | awk '{print $2}')
    stop; rm -f "$TMP"/cg.out*
    start "$server"
    t0=$(awk '{print $14 + $15}' /proc/"$PID"/stat); s=$(date +%s.%N)
    redis-cli -p "$PORT" --scan >/dev/null
    e=$(date +%s.%N); t1=$(awk '{print $14 + $15}' /proc/"$PID"/stat)
    stop
    printf '%-28s keys %8d  Ir/key %6d  wall %6.2f s  server CPU %4d ticks\n' \
        "$(basename "$server")" "$n" $((ir / n)) "$(echo "$e - $s" | bc)" $((t1 - t0))
done

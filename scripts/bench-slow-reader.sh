#!/usr/bin/env bash
# Slow readers (issue 10 item 5), before vs after vs redis-server, in one run.
#
#   scripts/bench-slow-reader.sh BEFORE_BIN AFTER_BIN [GETS=200000] [SECONDS=6]
#
# For each server (BEFORE_BIN, AFTER_BIN = hyperbloom binaries, and the installed redis-server)
# and for 1 and 4 clients that pipeline GETS x `GET bigkey` (1 MiB value) and never read, a fresh
# server on a free port runs scripts/slow-reader.py: peak RSS while it runs, and the PING latency
# of another client meanwhile. Each server runs under `ulimit -v 8 GB`, so one that holds every
# reply (Redis with its default normal 0 0 0) fails instead of taking the machine: alive=no.
# Then the pipelines that must not regress: redis-benchmark -P 16 (GET/SET) and redis-cli --pipe
# of 1,000,000 SETs. Measurement only; nothing is asserted.
set -u
BEFORE=${1:?before binary}
AFTER=${2:?after binary}
GETS=${3:-200000}
SECS=${4:-6}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() { # name binary port -> prints pid
    local name=$1 bin=$2 port=$3
    if [ "$name" = redis ]; then
        (ulimit -v 8000000; exec redis-server --port "$port" --bind 127.0.0.1 --save "" \
            --appendonly no --dir "$TMP" --loglevel warning >"$TMP/$name.log" 2>&1) &
    else
        (ulimit -v 8000000; exec "$bin" --port "$port" --bind 127.0.0.1 --save "" \
            --dir "$TMP" --loglevel warning >"$TMP/$name.log" 2>&1) &
    fi
    local pid=$!
    for _ in $(seq 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    echo "$pid"
}

stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

echo "# slow readers: $GETS x GET of a 1 MiB value per client, never read; ${SECS}s"
for name in before after redis; do
    case $name in before) bin=$BEFORE ;; after) bin=$AFTER ;; *) bin=redis-server ;; esac
    for clients in 1 4; do
        port=$(free_port)
        pid=$(start "$name" "$bin" "$port")
        printf '%-7s ' "$name"
        python3 "$HERE/slow-reader.py" "$port" "$pid" "$clients" "$GETS" "$SECS"
        stop "$pid"
    done
done

echo "# pipelines: redis-benchmark -P 16 -n 500000 -t set,get -d 100 -q; redis-cli --pipe of 1,000,000 SETs"
python3 - "$TMP/pipe.txt" <<'EOF'
import sys
with open(sys.argv[1], "wb") as f:
    for i in range(1000000):
        k = b"key:%d" % i
        f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nvalue\r\n" % (len(k), k))
EOF
for name in before after redis; do
    case $name in before) bin=$BEFORE ;; after) bin=$AFTER ;; *) bin=redis-server ;; esac
    port=$(free_port)
    pid=$(start "$name" "$bin" "$port")
    bench=$(redis-benchmark -p "$port" -P 16 -n 500000 -t set,get -d 100 -q 2>/dev/null | tr '\r' '\n' | grep -E '^(SET|GET):' | sed 's/ requests per second.*//' | tr '\n' ' ')
    t0=$(date +%s.%N)
    pipe=$(redis-cli -p "$port" --pipe <"$TMP/pipe.txt" 2>&1 | tail -1)
    t1=$(date +%s.%N)
    dbsize=$(redis-cli -p "$port" dbsize)
    printf '%-7s %s | --pipe %.2fs dbsize=%s (%s)\n' "$name" "$bench" "$(echo "$t1 - $t0" | bc)" "$dbsize" "$pipe"
    stop "$pid"
done

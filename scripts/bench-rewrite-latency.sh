#!/usr/bin/env bash
# The AOF rewrite's effect on client-visible latency under load (a benchmark, not a test: nothing
# here asserts a speed), hyperbloom against redis-server in the same run.
#
# For each appendfsync policy (always, everysec) and each server, in ROUNDS interleaved rounds
# (the server order alternating from round to round): start the server with `appendonly yes` and
# no automatic rewrite, fill it with ~KEYS string keys (pipelined SET, then one BGREWRITEAOF so
# the measured rewrites start from a fresh base), then run twice, each for as long as the probe
# (below) takes to make PROBE_ALWAYS or PROBE_EVERYSEC requests:
#   quiet     the load alone;
#   rewrites  the load while BGREWRITEAOF is issued again and again (each as soon as the last
#             one has finished, so a rewrite is in progress, or its switch is, most of the time).
# The load is `redis-benchmark -P 16 -c 50 SET` on the same random key range (so the rewrites'
# snapshots are being overwritten). Alongside it a probe client, one connection, unpipelined
# SETs (`redis-benchmark -c 1`), measures what one ordinary client sees: its p50/p99/max latency
# (redis-benchmark's own histogram). Reported per row: the load's rps (the server's
# total_commands_processed over the probe's run), the probe's rps and latencies in ms, and the
# number of rewrites issued and completed during the phase.
#
# Usage: scripts/bench-rewrite-latency.sh ; KEYS=500000 ROUNDS=3 POLICIES="always everysec"
#   PROBE_ALWAYS=3000 PROBE_EVERYSEC=50000 (probe requests per phase)
#   BIN=path picks hyperbloom's binary; REDIS=path picks redis-server (default: the one on PATH).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${BIN:-$TARGET/release/hyperbloom}
REDIS=${REDIS:-$(command -v redis-server)}
KEYS=${KEYS:-500000}
# Probe requests per phase, by policy: under `always` each write waits for an fsync.
PROBE_ALWAYS=${PROBE_ALWAYS:-3000}
PROBE_EVERYSEC=${PROBE_EVERYSEC:-50000}
ROUNDS=${ROUNDS:-3}
POLICIES=${POLICIES:-always everysec}
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --bin hyperbloom)
WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT

cli() { redis-cli -p "$PORT" "$@"; }
info() { cli INFO persistence | tr -d '\r' | grep "^$1:" | cut -d: -f2; }
wait_rewrite() { while [ "$(info aof_rewrite_in_progress)" != 0 ] || [ "$(info aof_rewrite_scheduled)" = 1 ]; do sleep 0.02; done; }

start() { # server policy
  rm -rf "$WORK/dir"; mkdir -p "$WORK/dir"
  PORT=$((20000 + RANDOM % 20000))
  local bin=$BIN
  [ "$1" = redis ] && bin=$REDIS
  "$bin" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$WORK/dir" --appendonly yes \
    --appendfsync "$2" --auto-aof-rewrite-percentage 0 --loglevel notice >"$WORK/log-$1" 2>&1 &
  PID=$!
  for _ in $(seq 200); do cli ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
  redis-benchmark -p "$PORT" -n $((KEYS * 2)) -c 50 -P 16 -r "$KEYS" -q SET key:__rand_int__ xxxxxxxxxxxxxxxx >/dev/null
  cli BGREWRITEAOF >/dev/null; sleep 0.1; wait_rewrite
}
stop() { cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; PID=; }

cmds() { cli INFO stats | tr -d '\r' | grep "^total_commands_processed:" | cut -d: -f2; }
now() { date +%s.%N; }

phase() { # rewrites(0/1) probe-requests -> "load_rps probe columns... rewrites"
  # The load runs until the probe has made its PROBE_ALWAYS or PROBE_EVERYSEC requests.
  redis-benchmark -p "$PORT" -n 100000000 -c 50 -P 16 -r "$KEYS" --csv \
    SET key:__rand_int__ xxxxxxxxxxxxxxxx >"$WORK/load.csv" 2>/dev/null &
  local l=$!
  sleep 0.5
  redis-benchmark -p "$PORT" -n "$2" -c 1 -r "$KEYS" --csv SET probe:__rand_int__ x \
    >"$WORK/probe.csv" 2>/dev/null &
  local p=$! n=0 t0 c0 t1 c1
  t0=$(now); c0=$(cmds)
  if [ "$1" = 1 ]; then
    while kill -0 $p 2>/dev/null; do
      cli BGREWRITEAOF >/dev/null 2>&1 || true
      sleep 0.05; wait_rewrite; n=$((n + 1))
    done
  fi
  wait $p || true
  t1=$(now); c1=$(cmds)
  kill $l 2>/dev/null || true; wait $l 2>/dev/null || true
  local probe; probe=$(tail -1 "$WORK/probe.csv" | tr -d '"' | cut -d, -f2- | tr , ' ')
  # The load is stopped (no summary of its own): its rate is the server's command
  # count over the probe's run (the probe's own commands included, a small share).
  echo "$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" 'BEGIN {printf "%d", (b - a) / (e - s)}') $probe $n"
}

R=$WORK/results
: >"$R"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $("$REDIS" --version | cut -d' ' -f3); $BIN"
for policy in $POLICIES; do
  for round in $(seq "$ROUNDS"); do
    order=(hyperbloom redis)
    [ $((round % 2)) = 0 ] && order=(redis hyperbloom)
    for server in "${order[@]}"; do
      start "$server" "$policy"
      for rw in 0 1; do
        name=quiet; [ $rw = 1 ] && name=rewrites
        n=$PROBE_EVERYSEC; [ "$policy" = always ] && n=$PROBE_ALWAYS
        echo "$policy $server $name $round $(phase $rw $n)" >>"$R"
      done
      stop
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "columns: policy server phase round load_rps, the probe: rps avg_ms min_ms p50_ms p95_ms p99_ms max_ms, rewrites completed"
sort -k1,1 -k3,3 -k2,2 -k4,4n "$R" | column -t

#!/usr/bin/env bash
# Pub/sub benchmark (issue 14; a benchmark, not a test: nothing here asserts a speed).
#
# hyperbloom (release) and redis-server 7.0.15 side by side, in the same run, ROUNDS rounds
# (default 5), the server order alternating from round to round so a burst of load from elsewhere
# on the machine hits both alike. Reported: the median over the rounds of each figure.
#   1. PUBLISH throughput to 1, 10 and 100 subscribers of one channel (32-byte payload, one
#      publisher pipelining 64 PUBLISH): publish/s as the publisher sees it, and deliveries/s until
#      the last subscriber has every message.
#   2. Delivery latency of a message to 100 subscribers: one PUBLISH every GAP_US microseconds
#      (default 1000), LAT_N messages (default 2000); p50/p99/p99.9 over every (message,
#      subscriber) pair, measured by examples/bench_pubsub.rs (send time in the payload).
#
# Usage: scripts/bench-pubsub.sh ; ROUNDS=n, N=messages for (1) (default 100000; /10 for 100 subs)
set -euo pipefail
ROUNDS=${ROUNDS:-5}
N=${N:-100000}
LAT_N=${LAT_N:-2000}
GAP_US=${GAP_US:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release/hyperbloom
GEN=$TARGET/release/examples/bench_pubsub
(cd "$ROOT" && cargo build --release --quiet --bin hyperbloom --example bench_pubsub)
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # name port args...
  local name=$1 port=$2; shift 2
  mkdir -p "$WORK/$name"
  "$@" --port "$port" --bind 127.0.0.1 --save "" --dir "$WORK/$name" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 200); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return; sleep 0.05; done
  echo "$name did not start"; exit 1
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'; }
field() { tr ' ' '\n' | grep "^$1=" | cut -d= -f2; }

HB_PORT=$(free_port); start hyperbloom "$HB_PORT" "$BIN"
RD_PORT=$(free_port); start redis "$RD_PORT" redis-server --appendonly no
echo "hyperbloom $("$BIN" --version 2>/dev/null || echo '?') on $HB_PORT | $(redis-server --version | cut -d' ' -f1-3) on $RD_PORT | $(nproc) cores | rounds $ROUNDS"

for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then order="hb rd"; else order="rd hb"; fi
  for s in $order; do
    port=$HB_PORT; [[ $s == rd ]] && port=$RD_PORT
    for subs in 1 10 100; do
      n=$N; (( subs == 100 )) && n=$((N / 10))
      "$GEN" throughput "$port" "$subs" "$n" >>"$WORK/$s.tp.$subs"
    done
    "$GEN" latency "$port" 100 "$LAT_N" "$GAP_US" >>"$WORK/$s.lat"
  done
done

printf '\n%-34s %14s %14s %8s\n' "median of $ROUNDS rounds" hyperbloom redis-7.0.15 ratio
row() { # label hb rd
  printf '%-34s %14s %14s %8s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
}
for subs in 1 10 100; do
  for f in publish_per_s delivered_per_s; do
    row "$f, $subs subscriber(s)" "$(field $f <"$WORK/hb.tp.$subs" | median)" "$(field $f <"$WORK/rd.tp.$subs" | median)"
  done
done
for f in p50_us p99_us p999_us max_us; do
  row "latency to 100 subs, $f" "$(field $f <"$WORK/hb.lat" | median)" "$(field $f <"$WORK/rd.lat" | median)"
done

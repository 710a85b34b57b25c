#!/usr/bin/env bash
# RDB (dump.rdb) load speed at startup, hyperbloom against redis-server 7 on the same file (a
# benchmark, not a test: nothing here asserts a speed).
#
# Each data set is generated once in redis-server (with RedisBloom loaded, so Bloom filters are
# RedisBloom's own bytes) and SAVEd; then each server is started ROUNDS times, alternating, on a
# fresh copy of that dump.rdb, and the time is the server's own log line "DB loaded from disk:
# X seconds" (both print it). Reported: the file size, the median seconds of each server, MB/s,
# and the median of the per-round ratios redis/hyperbloom (above 1: hyperbloom loads faster).
#   strings   1M small strings (DEBUG POPULATE: key:N -> value:N padded to 16 bytes), a tenth with a TTL
#   mix       300k strings, 100k small HLLs, 20k small Bloom filters (RedisBloom's default size)
#   bigbloom  four Bloom filters of 20M capacity at 0.001 (~36 MB each), 400k items in each
#
# Usage: scripts/bench-rdb-load.sh [set...] ; ROUNDS=n (default 3); BIN=path picks the binary;
#   KEEP=dir keeps the generated files there (and reuses them on the next run).
set -euo pipefail
ROUNDS=${ROUNDS:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${BIN:-$TARGET/release/hyperbloom}
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --bin hyperbloom)
MODULE=$("$ROOT/scripts/fetch-redisbloom.sh")
SETS=("$@")
[ ${#SETS[@]} -gt 0 ] || SETS=(strings mix bigbloom)
WORK=$(mktemp -d)
KEEP=${KEEP:-}
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
PORT=$((20000 + RANDOM % 10000))

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

generate() { # set -> path of its dump.rdb
  local set=$1 dir
  dir=${KEEP:-$WORK}/gen-$set
  if [ -s "$dir/dump.rdb" ]; then echo "$dir/dump.rdb"; return; fi
  mkdir -p "$dir"
  redis-server --loadmodule "$MODULE" --port $PORT --bind 127.0.0.1 --save "" --dir "$dir" \
    --enable-debug-command yes >"$dir/gen.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
  local c=(redis-cli -p $PORT)
  case $set in
    strings)
      "${c[@]}" DEBUG POPULATE 1000000 key 16 >/dev/null
      for i in $(seq 0 10 999999); do echo "PEXPIRE key:$i 86400000"; done | "${c[@]}" --pipe >/dev/null ;;
    mix)
      "${c[@]}" DEBUG POPULATE 300000 key 16 >/dev/null
      redis-benchmark -p $PORT -n 400000 -r 100000 -c 50 -P 16 -q PFADD hll:__rand_int__ __rand_int__ >/dev/null
      redis-benchmark -p $PORT -n 100000 -r 20000 -c 50 -P 16 -q BF.ADD bf:__rand_int__ __rand_int__ >/dev/null ;;
    bigbloom)
      for i in 0 1 2 3; do
        "${c[@]}" BF.RESERVE big:$i 0.001 20000000 NONSCALING >/dev/null
        redis-benchmark -p $PORT -n 400000 -r 1000000000 -c 50 -P 16 -q BF.ADD big:$i __rand_int__ >/dev/null
      done ;;
    *) echo "unknown set $set" >&2; exit 1 ;;
  esac
  "${c[@]}" SAVE >/dev/null
  "${c[@]}" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait $PID 2>/dev/null || true; PID=
  echo "$dir/dump.rdb"
}

loadtime() { # kind rdb port -> seconds (a fresh port per start: a server just killed may hold the last)
  local kind=$1 rdb=$2 port=$3 log=$WORK/load.log
  rm -rf "$WORK/load"; mkdir -p "$WORK/load"; cp "$rdb" "$WORK/load/dump.rdb"; : >"$log"
  if [ "$kind" = hyperbloom ]; then
    "$BIN" --port $port --bind 127.0.0.1 --save "" --dir "$WORK/load" --loglevel notice >"$log" 2>&1 &
  else
    redis-server --loadmodule "$MODULE" --port $port --bind 127.0.0.1 --save "" --dir "$WORK/load" \
      --loglevel notice >"$log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 1200); do grep -q "DB loaded from disk" "$log" && break; sleep 0.05; done
  kill $PID 2>/dev/null; wait $PID 2>/dev/null || true; PID=
  grep -o "DB loaded from disk: [0-9.]*" "$log" | awk '{print $NF}' | grep . \
    || { echo "$kind did not report a load of $rdb (port $port):" >&2; tail -5 "$log" >&2; exit 1; }
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(redis-server --version | cut -d' ' -f3); $BIN"
printf "%-9s %8s %10s %10s %10s %10s %8s   %s\n" set MB hb_sec redis_sec hb_MB/s redis_MB/s ratio "per-round redis/hb"
for set in "${SETS[@]}"; do
  rdb=$(generate "$set")
  mb=$(stat -c %s "$rdb" | awk '{printf "%.1f", $1/1e6}')
  hbs=(); rds=(); rs=()
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
      h=$(loadtime hyperbloom "$rdb" $((PORT + 2 * round))); r=$(loadtime redis "$rdb" $((PORT + 2 * round + 1)))
    else
      r=$(loadtime redis "$rdb" $((PORT + 2 * round + 1))); h=$(loadtime hyperbloom "$rdb" $((PORT + 2 * round)))
    fi
    hbs+=("$h"); rds+=("$r"); rs+=("$(awk -v h="$h" -v r="$r" 'BEGIN {printf "%.2f", r / (h > 0 ? h : 0.001)}')")
  done
  hb=$(printf '%s\n' "${hbs[@]}" | median); rd=$(printf '%s\n' "${rds[@]}" | median)
  ratio=$(printf '%s\n' "${rs[@]}" | median)
  awk -v n="$set" -v mb="$mb" -v hb="$hb" -v rd="$rd" -v q="$ratio" -v per="${rs[*]}" 'BEGIN {
    printf "%-9s %8s %10s %10s %10.1f %10.1f %8s   %s\n", n, mb, hb, rd, mb/(hb>0?hb:0.001), mb/(rd>0?rd:0.001), q, per }'
  echo "  rounds: hyperbloom ${hbs[*]} ; redis ${rds[*]}"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

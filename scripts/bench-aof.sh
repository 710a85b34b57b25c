#!/usr/bin/env bash
# AOF benchmarks (a benchmark, not a test: nothing here asserts a speed).
#
# 1. Pipelined throughput (redis-benchmark -P 16, 50 clients) of SET, BF.ADD and PFADD on a
#    release hyperbloom with the AOF off, appendfsync everysec and appendfsync always, and on
#    redis-server 7.0.15 with appendfsync always, all in the same run. ROUNDS rounds (default 3),
#    interleaved: each round runs every command on every server, the server order rotating from
#    round to round, so a burst of load from elsewhere on the machine hits all columns alike.
#    Reported: the median over the rounds of each column, and the median of the per-round ratios.
# 2. The rewrite's effect on latency: BF.ADD p50/p99 without and during a BGREWRITEAOF of a
#    keyspace of ~3N string keys plus one large Bloom filter.
# 3. Load speed: the AOF written in (2) loaded at startup (MB/s from the server's log line).
#
# The Redis column loads RedisBloom 2.6.12 (scripts/fetch-redisbloom.sh) so BF.ADD has a reference
# too; REDIS_MODULE=path picks another module, REDIS_MODULE=none runs plain Redis (no BF.ADD there).
#
# Usage: scripts/bench-aof.sh [requests] ; ROUNDS=n for more rounds; SKIP_REWRITE=1 for 1 only.
set -euo pipefail
N=${1:-300000}
ROUNDS=${ROUNDS:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release/hyperbloom
[ -x "$BIN" ] || (cd "$ROOT" && cargo build --release --bin hyperbloom)
REDIS_MODULE=${REDIS_MODULE:-$("$ROOT/scripts/fetch-redisbloom.sh")}
REDIS_ARGS=()
[ "$REDIS_MODULE" != none ] && REDIS_ARGS=(--loadmodule "$REDIS_MODULE")
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
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }

P0=$((20000 + RANDOM % 10000))
declare -A PORT=([off]=$P0 [everysec]=$((P0 + 1)) [always]=$((P0 + 2)) [redis]=$((P0 + 3)))
start off ${PORT[off]} "$BIN" --appendonly no
start everysec ${PORT[everysec]} "$BIN" --appendonly yes --appendfsync everysec
start always ${PORT[always]} "$BIN" --appendonly yes --appendfsync always
start redis ${PORT[redis]} redis-server "${REDIS_ARGS[@]}" --appendonly yes --appendfsync always

R=$WORK/results   # lines: round cmd server rps
: >"$R"
SERVERS=(off everysec always redis)
for round in $(seq "$ROUNDS"); do
  for cmd in SET BF.ADD PFADD; do
    case $cmd in
      SET) args=(SET key:__rand_int__ value) ;;
      BF.ADD) args=(BF.ADD bf __rand_int__) ;;
      PFADD) args=(PFADD hll __rand_int__) ;;
    esac
    for k in 0 1 2 3; do
      s=${SERVERS[$(((k + round) % 4))]}
      [ "$s" = redis ] && [ "$cmd" = BF.ADD ] && [ "$REDIS_MODULE" = none ] && continue
      echo "$round $cmd $s $(rps ${PORT[$s]} "${args[@]}")" >>"$R"
    done
  done
done
val() { awk -v r="$1" -v c="$2" -v s="$3" '$1==r && $2==c && $3==s {print $4}' "$R"; }
echo "requests/s, pipelined -P 16, 50 clients, $N requests each, median of $ROUNDS interleaved rounds"
printf "%-8s %10s %10s %10s %12s %8s %8s   %s\n" cmd off everysec always redis-always ev/off al/redis "per-round ev/off ; al/redis"
for cmd in SET BF.ADD PFADD; do
  cols=()
  for s in "${SERVERS[@]}"; do
    vals=$(for r in $(seq "$ROUNDS"); do val "$r" "$cmd" "$s"; done)
    m=$( [ -n "$vals" ] && echo "$vals" | median || echo n/a)
    cols+=("$m")
  done
  r1s=(); r2s=()
  for r in $(seq "$ROUNDS"); do
    r1s+=("$(echo "scale=3; $(val "$r" "$cmd" everysec) / $(val "$r" "$cmd" off)" | bc)")
    if [ "$cmd" != BF.ADD ] || [ "$REDIS_MODULE" != none ]; then
      r2s+=("$(echo "scale=3; $(val "$r" "$cmd" always) / $(val "$r" "$cmd" redis)" | bc)")
    fi
  done
  r1=$(printf "%s\n" "${r1s[@]}" | median)
  r2=$( [ ${#r2s[@]} -eq 0 ] && echo n/a || printf "%s\n" "${r2s[@]}" | median)
  printf "%-8s %10s %10s %10s %12s %8s %8s   %s ; %s\n" "$cmd" "${cols[@]}" "$r1" "$r2" \
    "${r1s[*]}" "${r2s[*]:-n/a}"
done
[ "${SKIP_REWRITE:-0}" = 1 ] && exit 0

# 2. Rewrite under load (everysec server): fill, then BF.ADD latency without / during a rewrite.
PE=${PORT[everysec]}
redis-benchmark -p $PE -n $((N * 3)) -c 50 -P 16 -r 100000000 -q SET fill:__rand_int__ xxxxxxxxxxxxxxxx >/dev/null
redis-cli -p $PE BF.RESERVE big 0.01 50000000 >/dev/null
lat() { redis-benchmark -p $PE -n "$N" -c 50 -r 100000000 --csv BF.ADD big __rand_int__ | tail -1; }
echo "columns: test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms"
echo "no rewrite:     $(lat)"
redis-cli -p $PE BGREWRITEAOF >/dev/null
echo "during rewrite: $(lat)"
while [ "$(redis-cli -p $PE INFO persistence | tr -d '\r' | grep aof_rewrite_in_progress | cut -d: -f2)" != 0 ]; do sleep 0.1; done
redis-cli -p $PE INFO persistence | tr -d '\r' | grep -E "aof_last_rewrite_time_sec|aof_current_size|aof_base_size"

# 3. Load speed, hyperbloom against redis-server on copies of the same directories:
#    - "commands": the `always` server's directory from (1), an empty base and every command of
#      the run in one incremental file (what a server that never rewrote replays);
#    - "preamble": the `everysec` server's directory after the rewrite in (2), an RDB-preamble
#      base plus the commands written during the rewrite.
#    Each server is started ROUNDS times on a fresh copy, alternating; the time is the server's own
#    "DB loaded from append only file: X seconds" line (both print it), median over the rounds.
for s in always everysec; do redis-cli -p ${PORT[$s]} SHUTDOWN NOSAVE >/dev/null 2>&1 || true; done
sleep 0.5
loadtime() { # server-kind dir port -> seconds
  local kind=$1 dir=$2 port=$3 log
  rm -rf "$WORK/load"; mkdir -p "$WORK/load"; cp -a "$dir" "$WORK/load/appendonlydir"; log=$WORK/load.log
  if [ "$kind" = hyperbloom ]; then
    "$BIN" --port "$port" --bind 127.0.0.1 --save "" --dir "$WORK/load" --appendonly yes --loglevel notice >"$log" 2>&1 &
  else
    redis-server "${REDIS_ARGS[@]}" --port "$port" --bind 127.0.0.1 --save "" --dir "$WORK/load" --appendonly yes --loglevel notice >"$log" 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1200); do grep -q "loaded from append only file" "$log" && break; sleep 0.05; done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  grep -o "loaded from append only file: [0-9.]*" "$log" | awk '{print $NF}' | grep . \
    || { echo "$kind did not report a load of $dir:" >&2; tail -3 "$log" >&2; exit 1; }
}
echo "load speed (median of $ROUNDS, MB/s = directory size / load time)"
printf "%-9s %10s %14s %14s %12s %12s %8s\n" dir MB hb_sec redis_sec hb_MB/s redis_MB/s ratio
for d in always:commands everysec:preamble; do
  dir=$WORK/${d%%:*}/appendonlydir
  mb=$(du -sb "$dir" | awk '{printf "%.1f", $1/1e6}')
  hbs=(); rds=()
  for round in $(seq "$ROUNDS"); do
    hbs+=("$(loadtime hyperbloom "$dir" $((P0 + 4)))")
    rds+=("$(loadtime redis "$dir" $((P0 + 5)))")
  done
  hb=$(printf '%s\n' "${hbs[@]}" | median); rd=$(printf '%s\n' "${rds[@]}" | median)
  awk -v n="${d#*:}" -v mb="$mb" -v hb="$hb" -v rd="$rd" 'BEGIN {
    printf "%-9s %10s %14s %14s %12.1f %12.1f %8.2f\n", n, mb, hb, rd, mb/hb, mb/rd, rd/hb }'
  echo "  rounds: hyperbloom ${hbs[*]} ; redis ${rds[*]}"
done

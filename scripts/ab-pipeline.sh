#!/usr/bin/env bash
# scripts/ab-pipeline.sh BEFORE_BIN AFTER_BIN
# Best-of-N A/B (noise on a shared machine only slows a run down): one server per binary, GET and SET -P 16 (-d 100, 200,000 requests) rounds alternating, 8 each; prints the best and every run.
BEFORE=${1:?before binary}
AFTER=${2:?after binary}
declare -A port pid
for name in before after; do
  case $name in before) bin=$BEFORE;; after) bin=$AFTER;; esac
  p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  $bin --port $p --bind 127.0.0.1 --save "" --dir "${TMPDIR:-/tmp}" --loglevel warning >/dev/null 2>&1 &
  pid[$name]=$!; port[$name]=$p
  for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.05; done
  redis-cli -p $p set key:__rand_int__ x >/dev/null
done
for t in get set; do
for round in $(seq 8); do
  for name in before after; do
    r=$(redis-benchmark -p ${port[$name]} -P 16 -n 200000 -t $t -d 100 -q 2>/dev/null | tr '\r' '\n' | grep -E '^(SET|GET): [0-9]' | awk '{print $2}')
    echo "$t $name $r"
  done
done
done | awk '{k=$1" "$2; if ($3>best[k]) best[k]=$3; all[k]=all[k]" "int($3)} END {for (k in best) print k, "best", best[k], "runs:", all[k]}' | sort
for name in before after; do kill ${pid[$name]}; done; wait 2>/dev/null

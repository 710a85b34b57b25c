#!/usr/bin/env bash
# Full-sync time and peak memory for a ~1 GB Bloom filter, hyperbloom primary -> hyperbloom replica.
# Usage: scripts/bench-repl-fullsync.sh [capacity] [adds]   (release binary; ephemeral ports)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${HYPERBLOOM_BIN:-target/release/hyperbloom}
CAP=${1:-800000000}
ADDS=${2:-200000}
work=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P=$(port); R=$(port)
mkdir "$work/p" "$work/r"
"$BIN" --port "$P" --save '' --dir "$work/p" --loglevel warning & ppid=$!
"$BIN" --port "$R" --save '' --dir "$work/r" --loglevel warning & rpid=$!
trap 'kill $ppid $rpid 2>/dev/null; rm -rf "$work"' EXIT
until redis-cli -p "$P" ping >/dev/null 2>&1 && redis-cli -p "$R" ping >/dev/null 2>&1; do sleep 0.05; done
redis-cli -p "$P" BF.RESERVE big 0.01 "$CAP" >/dev/null
redis-benchmark -p "$P" -q -n "$ADDS" -r 100000000 -c 20 -P 16 BF.ADD big __rand_int__ >/dev/null
echo "primary used_memory: $(redis-cli -p "$P" info memory | grep '^used_memory:' | tr -d '\r')"
echo "primary before sync: $(grep -E "VmRSS|VmHWM" /proc/$ppid/status | tr "\n" " ")"
start=$(date +%s.%N)
redis-cli -p "$R" REPLICAOF 127.0.0.1 "$P" >/dev/null
until redis-cli -p "$R" info replication | grep -q 'master_link_status:up'; do sleep 0.05; done
end=$(date +%s.%N)
echo "full sync: $(echo "$end - $start" | bc) s"
echo "primary VmHWM (peak RSS): $(grep VmHWM /proc/$ppid/status)"
echo "replica VmHWM (peak RSS): $(grep VmHWM /proc/$rpid/status)"
echo "replica used_memory: $(redis-cli -p "$R" info memory | grep '^used_memory:' | tr -d '\r')"
[[ "$(redis-cli -p "$P" BF.INFO big SIZE)" == "$(redis-cli -p "$R" BF.INFO big SIZE)" ]] && echo "BF.INFO SIZE equal"

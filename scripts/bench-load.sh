#!/usr/bin/env bash
# Load benchmark: redis-benchmark against hyperbloom (release build) and a real redis-server, alternating,
# with -c 50 -P 16 and -P 1; prints median requests/s and the ratio hyperbloom/redis per test.
#
#   scripts/bench-load.sh                  # -n 100000, 3 rounds
#   scripts/bench-load.sh --quick          # -n 20000: a smoke run
#   scripts/bench-load.sh -n 200000 -r 5 --only 'SET|GET|PF'
#   scripts/bench-load.sh --pin                 # server on core 1, client on core 0; server CPU µs/request
#   scripts/bench-load.sh --callgrind -P 16,1   # instructions/request under valgrind (load-independent)
#
# See scripts/bench_load.py --help for every option. Needs redis-server and redis-tools (Debian
# packages; scripts/test.sh installs them) and python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case " $* " in
    *" -h "*|*" --help "*) ;;
    *) cargo build --release --quiet ;;
esac
exec python3 scripts/bench_load.py "$@"

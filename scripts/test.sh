#!/usr/bin/env bash
# Runs every hyperbloom test: the Rust unit and integration tests, then the compatibility suite that
# drives the real redis-cli, redis-benchmark and redis-py against the release binary (and, for
# side-by-side comparisons, against a real redis-server).
#
# It works on a fresh Debian machine with a Rust toolchain: what the tests need and is missing is
# installed quietly and idempotently (redis-server and redis-tools through apt when redis-server or
# redis-cli is absent, redis-sentinel when it is absent, postgresql when no initdb is found; a Python venv with redis-py, psycopg and
# pytest under the cargo target directory).
#
# Usage: scripts/test.sh [--no-compat] [--only-compat] [--pgo] [-- extra pytest args]
# --pgo also builds the profile-guided binary (scripts/build-pgo.sh; needs llvm-profdata) and runs
# the compat suite against it.
# Environment: CARGO_TARGET_DIR (honoured), HYPERBLOOM_VENV (venv location override).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
VENV=${HYPERBLOOM_VENV:-$TARGET/compat-venv}
REQUIREMENTS=$ROOT/tests/compat/requirements.txt
EXAMPLE_REQUIREMENTS=$ROOT/examples/postgres_prefilter/requirements.txt

run_cargo=1
run_compat=1
run_pgo=0
pytest_extra=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --no-compat) run_compat=0 ;;
        --only-compat) run_cargo=0 ;;
        --pgo) run_pgo=1 ;;
        --) shift; pytest_extra=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done

started=$(date +%s)
step() { printf '\n==> [%4ds] %s\n' "$(( $(date +%s) - started ))" "$*"; }

# ---------------------------------------------------------------------------------------------
# 1. System packages (only what is missing).
# ---------------------------------------------------------------------------------------------
if [[ $run_compat == 1 ]]; then
    missing=()
    # /etc/redis/redis.conf (Debian's stock file, tests/config_redis_conf.rs) comes with redis-server.
    { command -v redis-server >/dev/null 2>&1 && [[ -f /etc/redis/redis.conf ]]; } \
        || missing+=(redis-server)
    { command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1; } \
        || missing+=(redis-tools)
    # tests/compat/test_sentinel.py: a real Sentinel fails over hyperbloom.
    command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
    # tests/unix_socket.rs reads the socket's listen backlog with ss.
    command -v ss >/dev/null 2>&1 || missing+=(iproute2)
    # tests/aof_fsync.rs watches the server's fdatasync calls through strace.
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    # The PostgreSQL example (examples/postgres_prefilter) creates its own throwaway cluster.
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
    # Debian's python3 has the venv module but not ensurepip until python3-venv is installed.
    if [[ ! -x $VENV/bin/python ]] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        missing+=(python3-venv)
    fi
    if [[ ${#missing[@]} -gt 0 ]]; then
        step "installing ${missing[*]} with apt-get"
        if ! command -v apt-get >/dev/null 2>&1; then
            echo "scripts/test.sh: need ${missing[*]} and apt-get is not available" >&2
            exit 1
        fi
        sudo=()
        [[ $(id -u) == 0 ]] || sudo=(sudo)
        export DEBIAN_FRONTEND=noninteractive
        "${sudo[@]}" apt-get update -qq >/dev/null
        "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    redis-server --version

    # -----------------------------------------------------------------------------------------
    # 2. Python venv with redis-py and pytest (re-installed only when requirements.txt changes).
    # -----------------------------------------------------------------------------------------
    stamp=$VENV/.requirements.sha256
    want=$(cat "$REQUIREMENTS" "$EXAMPLE_REQUIREMENTS" | sha256sum | cut -d' ' -f1)
    if [[ ! -x $VENV/bin/python ]] || [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
        step "preparing the Python venv $VENV"
        mkdir -p "$(dirname "$VENV")"
        [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            --no-input -r "$REQUIREMENTS" -r "$EXAMPLE_REQUIREMENTS"
        echo "$want" >"$stamp"
    fi
    "$VENV/bin/python" -c 'import sys, redis, pytest, psycopg; print("python", sys.version.split()[0], "| redis-py", redis.__version__, "| psycopg", psycopg.__version__, "| pytest", pytest.__version__)'

    # -----------------------------------------------------------------------------------------
    # 2b. Node packages for tests/compat/test_pubsub.py (ioredis), into the target directory and
    #     only when missing. Without node the test skips and says why.
    # -----------------------------------------------------------------------------------------
    NODE_DIR=${HYPERBLOOM_NODE_DIR:-$TARGET/compat-node}
    export HYPERBLOOM_NODE_DIR=$NODE_DIR
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
        if [[ ! -d $NODE_DIR/node_modules/ioredis ]]; then
            step "installing ioredis into $NODE_DIR"
            mkdir -p "$NODE_DIR"
            npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent ioredis@5
        fi
        echo "node $(node --version) | ioredis $(node -p "require('$NODE_DIR/node_modules/ioredis/package.json').version")"
    else
        echo "node/npm not installed: tests/compat/test_pubsub.py::test_ioredis_subscribe will skip"
    fi
fi

# ---------------------------------------------------------------------------------------------
# 3. Build the release binary (what the compat suite runs), then every cargo test (unit,
#    integration, doc) in the `ci` profile: release optimisation without link-time optimisation,
#    which would re-optimise the whole program for each of the ~45 test binaries (Cargo.toml).
# ---------------------------------------------------------------------------------------------
step "cargo build --release"
cargo build --release --quiet
if [[ $run_cargo == 1 ]]; then
    step "cargo test --profile ci"
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    set +e
    cargo test --profile ci --quiet 2>&1 | tee "$log"
    cargo_rc=${PIPESTATUS[0]}
    set -e
    # One line for the whole cargo run, summed over every test binary's "test result:" line.
    awk '/^test result:/ {
            for (i = 1; i <= NF; i++) {
                if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1);
                if ($(i) ~ /^ignored;?$/) g += $(i-1)
            }
            n++
         }
         END { printf "cargo summary: %d passed, %d failed, %d ignored (%d test binaries)\n", p, f, g, n }' "$log"
    if [[ $cargo_rc != 0 ]]; then
        echo "scripts/test.sh: cargo test failed (exit $cargo_rc)" >&2
        exit "$cargo_rc"
    fi
fi

# ---------------------------------------------------------------------------------------------
# 4. The compatibility suite (real redis-cli, redis-benchmark, redis-py; real redis-server beside).
# ---------------------------------------------------------------------------------------------
if [[ $run_compat == 1 ]]; then
    step "compat suite (pytest tests/compat)"
    export HYPERBLOOM_BIN=$TARGET/release/hyperbloom
    "$VENV/bin/python" -m pytest -q -rsxX -p no:cacheprovider tests/compat "${pytest_extra[@]}"

    # -----------------------------------------------------------------------------------------
    # 5. The PostgreSQL example at 50,000 rows: real PostgreSQL, the release binary (~25 s).
    # -----------------------------------------------------------------------------------------
    step "example: Bloom filter in front of PostgreSQL (pytest examples/postgres_prefilter)"
    "$VENV/bin/python" -m pytest -q -rsxX -p no:cacheprovider examples/postgres_prefilter
fi

# ---------------------------------------------------------------------------------------------
# 6. Optional: the profile-guided build (an experiment, docs/benchmarks.md "Profile-guided build") answers
#    the compat suite as the plain one does.
# ---------------------------------------------------------------------------------------------
if [[ $run_pgo == 1 ]]; then
    step "profile-guided build (scripts/build-pgo.sh) and the compat suite against it"
    scripts/build-pgo.sh
    HYPERBLOOM_BIN=$ROOT/target/pgo/hyperbloom \
        "$VENV/bin/python" -m pytest -q -rsxX -p no:cacheprovider tests/compat "${pytest_extra[@]}"
fi

step "all tests passed in $(( $(date +%s) - started ))s"

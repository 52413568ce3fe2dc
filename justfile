# fxpay's tasks. `just` itself comes with the dev dependencies (the rust-just package), so on
# a fresh machine: `bash scripts/setup && .venv/bin/just --list`. `bash scripts/test` (what CI
# runs) sets up and then calls the recipes below; `bash scripts/demo` needs none of them.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Arguments reach the commands as "$@", quoting kept (`just pytest -k "quote and not async"`).
set positional-arguments

py := ".venv/bin/python"
pytest := py + " -m pytest -q -p no:cacheprovider"

# Lists the recipes.
default:
    @{{ just_executable() }} --list

# Creates .venv, installs the dev dependencies and builds fxpay into it (--release, --wheel).
setup *args:
    bash scripts/setup "$@"

# Every static check: Rust format, clippy, import circles, the core's pub items, the free-threaded 3.14 compile, ruff (lint and format), import contracts, mypy (also at 3.10), stubtest, the generated model stubs, pyright.
lint:
    @echo "== cargo fmt --check"
    cargo fmt --check
    @echo "== cargo clippy"
    cargo clippy --workspace --all-targets -- -D warnings
    @echo "== import circles between Rust files"
    python3 scripts/check_circles
    @echo "== the core's front door: at most 180 pub items (scripts/check_front_door)"
    python3 scripts/check_front_door
    @echo "== free-threaded CPython 3.14: the binding compiles (PYO3_CONFIG_FILE, Py_GIL_DISABLED, gil_used = false)"
    bash scripts/check_free_threaded
    @echo "== ruff"
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    @echo "== import contracts (lint-imports)"
    PYTHONPATH=python .venv/bin/lint-imports --no-cache --no-logo
    @echo "== type checks"
    {{ py }} -m mypy.stubtest fxpay._fxpay
    @echo "== the model classes of _fxpay.pyi are what scripts/gen_stubs.py writes from the Rust field lists"
    {{ py }} scripts/gen_stubs.py --check
    .venv/bin/mypy --strict python/fxpay examples
    @echo "== the 3.10 floor (mypy --python-version 3.10; ruff's target-version is py310, abi3audit runs in wheel-check)"
    .venv/bin/mypy --python-version 3.10 python/fxpay
    .venv/bin/pyright --pythonpath {{ py }} examples

# The Rust tests, the examples and the Python suite (arguments go to pytest, e.g. `just test -n 4 tests/python/oauth`).
test *args: test-rust examples
    @echo "== pytest"
    {{ pytest }} "$@"

# The Rust tests, and the loom models of the bridge's wake-up protocol and the exit gate.
test-rust: && loom
    @echo "== cargo test"
    cargo test --workspace

# The bridge's wake-up protocol (crates/fxpay-core/src/wakeup.rs) and the exit gate (gate.rs) under loom, every interleaving (about 10 s once built).
loom:
    @echo "== loom: crates/fxpay-core/tests/wakeup_loom.rs, gate_loom.rs"
    cargo test -p fxpay-core --features loom --test wakeup_loom --test gate_loom

# Runs every example against the embedded sandbox.
examples:
    @echo "== examples"
    for ex in examples/*.py; do echo "-- $ex"; {{ py }} "$ex"; done

# The Python suite only (arguments go to pytest).
pytest *args:
    @echo "== pytest"
    {{ pytest }} "$@"

# The chaos harness at full size (tests/chaos/README.md): 10,000 keyed payments over the served sandbox, redis-server, PostgreSQL and SQLite, under 50 faults of a seeded nemesis; fails if any payment reference is booked twice (arguments go to it: `just chaos --seed 7 --keep`).
chaos *args:
    @echo "== chaos: 10,000 keys, 50 faults (tests/chaos/chaos_support.py)"
    {{ py }} tests/chaos/chaos_support.py --keys 10000 --faults 50 "$@"

# The fork stress harness at full size (tests/stress/README.md): 3,000 forks on each journal (memory, SQLite, redis-server, PostgreSQL) while 8 threads make keyed calls; fails if any child hangs or fails (arguments go to it: `just stress --journal redis --forks 500`).
stress *args:
    @echo "== stress: 3,000 forks per journal, 8 threads making keyed calls (tests/stress/fork_stress.py)"
    nice -n 10 {{ py }} tests/stress/fork_stress.py --forks 3000 "$@"

# Builds the docs site into site/ (mkdocs, strict).
docs:
    @echo "== docs"
    bash scripts/docs

# The benchmark (bench/run.py; `just bench --quick` is the CI gate). Use a release build: `just setup --release`.
bench *args:
    {{ py }} bench/run.py "$@"

# Books a quote and a deal against the embedded sandbox (examples/demo.py).
demo:
    {{ py }} examples/demo.py

# Checks the release wheel in dist/ (auditwheel, abi3audit, clean venvs, the sdist) and the release workflow.
wheel-check:
    @echo "== wheel"
    bash scripts/check_wheel dist/fxpay-*.whl
    bash scripts/check_workflows

# A user's install, as the README says: the wheel of dist/ with an extra (`notebook`) in a fresh venv, and a snippet of docs/payouts.md run there.
install-check:
    @echo "== install from the wheel into a fresh venv (the README's Install)"
    bash scripts/install_check

# What CI runs once `just setup --wheel` has built and installed the release wheel (arguments go to pytest).
ci *args: lint test-rust examples && docs wheel-check install-check test-313 bench-gate
    @echo "== pytest (-n 2; in a random order, pytest-randomly)"
    {{ pytest }} -n 2 "$@"

# The Python suite on CPython 3.13, built from Debian's source by scripts/pythons (cached outside the checkout), with the release wheel of dist/ (arguments go to pytest).
test-313 *args:
    #!/usr/bin/env bash
    set -euo pipefail
    echo "== pytest on CPython 3.13 (scripts/pythons), the abi3 wheel of dist/"
    py313=$(bash scripts/pythons)
    venv=$(dirname "$(dirname "$py313")")/venv   # beside the interpreter, outside the checkout
    [ -x "$venv/bin/python" ] || "$py313" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps dist/fxpay-*.whl
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 "$@"   # in parallel: this is the second full run of just ci

# The benchmark's CI gate: fails only if blocking fxpay is slower than httpx.Client.
bench-gate:
    @echo "== benchmark (--quick, one TLS pair; fails if blocking fxpay is slower than httpx.Client or fxpay over TLS fails)"
    {{ py }} bench/run.py --quick

"""No crash at interpreter exit on the fallback path (issue 25).

On an event loop without ``add_reader`` (Windows' proactor loop) awaitables are resolved
through ``loop.call_soon_threadsafe``, called on a runtime thread. An interpreter that exits
while calls are still running used to crash now and then (SIGSEGV, SIGABRT, "Fatal Python
error: PyGILState_Release ... runtime state: finalizing"): a runtime thread took the GIL while
the interpreter was finalizing. fxpay's threads now take it only through a gate that an
``atexit`` hook closes before finalization starts (crates/fxpay-python/src/exit_gate.rs).

Each run is one interpreter (exit_worker.py) that ends with 64 calls in flight; the test
reads every exit status and stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

WORKER = Path(__file__).with_name("exit_worker.py")
RUNS = int(os.environ.get("FXPAY_EXIT_RUNS", "300"))
IN_FLIGHT = 64


def _one_life(_: int) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, str(WORKER), str(IN_FLIGHT)], capture_output=True, text=True, timeout=60, check=False)
    return p.returncode, p.stdout, p.stderr


def test_300_exits_with_calls_in_flight_on_a_loop_without_add_reader() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        lives = list(pool.map(_one_life, range(RUNS)))
    crashed = [(code, err) for code, out, err in lives if code != 0 or err.strip() or out.strip() != "ok"]
    by_code: dict[int, int] = {}
    for code, _ in crashed:
        by_code[code] = by_code.get(code, 0) + 1
    print(f"{RUNS} exits, {len(crashed)} crashed or wrote to stderr, by exit status: {by_code}")
    assert not crashed, f"{len(crashed)} of {RUNS} exits failed (exit status: count {by_code}); the first: {crashed[0][0]}: {crashed[0][1][-2000:]}"

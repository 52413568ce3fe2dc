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

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

WORKER = Path(__file__).with_name("exit_worker.py")
RUNS = int(os.environ.get("FXPAY_EXIT_RUNS", "300"))
IN_FLIGHT = 64


def _one_life(*extra: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, str(WORKER), str(IN_FLIGHT), *extra], capture_output=True, text=True, timeout=60, check=False)
    return p.returncode, p.stdout, p.stderr


def _lives(runs: int, *extra: str) -> list[tuple[int, str, str]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda _: _one_life(*extra), range(runs)))


def test_300_exits_with_calls_in_flight_on_a_loop_without_add_reader() -> None:
    lives = _lives(RUNS)
    crashed = [(code, err) for code, out, err in lives if code != 0 or err.strip() or out.strip() != "ok"]
    by_code: dict[int, int] = {}
    for code, _ in crashed:
        by_code[code] = by_code.get(code, 0) + 1
    print(f"{RUNS} exits, {len(crashed)} crashed or wrote to stderr, by exit status: {by_code}")
    first = crashed[0] if crashed else (0, "")
    assert not crashed, f"{len(crashed)} of {RUNS} exits failed (exit status: count {by_code}); the first: {first[0]}: {first[1][-2000:]}"


GATE_SCRIPT = r"""
import asyncio, atexit, json, logging, threading, time
from fxpay.testing import Sandbox

sb = Sandbox()
client = sb.client()
qid = client.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
entered = threading.Event()
slow = [False]
lines = []
left = []


class Handler(logging.Handler):
    # handle, not emit: no handler lock held while it sleeps (logging.shutdown, another exit
    # hook, would wait for that lock and hide whether fxpay's hook waits).
    def handle(self, record):
        lines.append(record.getMessage())
        if slow[0]:
            entered.set()
            time.sleep(0.5)
            left.append(time.monotonic())
        return True


log = logging.getLogger("fxpay")
log.setLevel(logging.DEBUG)
log.addHandler(Handler())
log.propagate = False


async def one():
    return (await client.get_quote_async(qid)).id


# An awaitable's attempt is logged by the runtime thread that ran it.
assert asyncio.run(one()) == qid and lines, lines
# The exit hooks run while that thread is inside Python (the handler sleeps, the GIL released):
# fxpay's hook waits for it to leave.
slow[0] = True
t = threading.Thread(target=lambda: asyncio.run(one()))
t.start()
entered.wait(10)
atexit._run_exitfuncs()
hooks_done = time.monotonic()
t.join(10)
# The hooks returned after the handler had left Python (its thread was inside the gate).
waited_for_it = bool(left) and hooks_done >= left[0]
# Then the gate is closed: a call still works (the default loop's path needs no Python on the
# runtime thread), and no line is logged from the runtime thread any more.
slow[0] = False
before = len(lines)
ok = asyncio.run(one()) == qid
print(json.dumps({"waited_for_it": waited_for_it, "after_close": len(lines) - before, "ok": ok}))
"""


def test_the_exit_gate_waits_for_threads_inside_python_and_lets_none_in_after() -> None:
    """The exit gate on its own (crates/fxpay-python/src/exit_gate.rs), run through
    ``atexit._run_exitfuncs()``: its hook waits for a runtime thread that is inside Python
    (a DEBUG handler of the ``fxpay`` logger, asleep), and once closed no runtime thread
    attaches (the next awaitable's log line is not written). Without the wait, a thread
    could wake into a finalizing interpreter; without the flag, it could enter one."""
    p = subprocess.run([sys.executable, "-c", GATE_SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["ok"]
    assert got["waited_for_it"], got
    assert got["after_close"] == 0, got

"""A lock of a journal held by another thread of the parent when the process forks: the
child's first keyed call on the inherited journal must not wait for it (API.md: journals work
in a child forked while other threads of the parent were inside a claim or a commit).

Found by the fork stress harness (tests/stress/README.md): 1 child in 3,000 forks hung with
`MemoryJournal`, its pool thread waiting in `MemoryJournal.claim` for `self._lock`, which a
parent thread held at the fork. Here the parent holds the lock on purpose, so the fork always
lands in it."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import fxpay


def _child_call_with_lock_held(journal: Any, lock: Any, sandbox: Any) -> int | None:
    """Forks while a parent thread holds `lock`; the child makes one keyed call on a fresh
    client with the inherited journal. The child's exit code, or None if it hung (killed
    after 20 s)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert held.wait(10)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:
            code = 1
            try:
                c = sandbox.client(journal=journal)
                c.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="child")
                entry = journal.get("child")
                code = 0 if entry is not None and entry.state == "done" else 2
            finally:
                os._exit(code)
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
            time.sleep(0.02)
    finally:
        release.set()
        t.join(10)


def test_a_child_forked_while_a_thread_holds_the_memory_journals_lock_does_not_hang(fxpay_sandbox: Any) -> None:
    journal = fxpay.MemoryJournal()
    assert _child_call_with_lock_held(journal, journal._lock, fxpay_sandbox) == 0, "the child hung on the parent's lock"


def test_a_child_forked_while_a_thread_holds_the_sqlite_journals_lock_does_not_hang(fxpay_sandbox: Any, tmp_path: Path) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    assert _child_call_with_lock_held(journal, journal._lock, fxpay_sandbox) == 0, "the child hung on the parent's lock"

"""Forks made while a parent thread holds a journal's lock, and the child's keyed call on the
inherited journal (tests/python/journal/test_journal_fork_locks.py and
test_journal_group_commit.py)."""

from __future__ import annotations

import os
import threading
from decimal import Decimal
from typing import Any

from conftest import fork_quietly, wait_child


def _child_call_with_lock_held(journal: Any, lock: Any, sandbox: Any, *, by_this_thread: bool = False) -> int | None:
    """Forks while a parent thread holds `lock`; the child makes one keyed call on a fresh
    client with the inherited journal. The child's exit code, or None if it hung (killed
    after 20 s). `by_this_thread`: the forking thread holds it (an `RLock` held by another
    thread of the parent may pass for the child's own: the child's first new thread can reuse
    that thread's stack, and with it its thread id)."""
    if by_this_thread:
        assert lock.acquire(timeout=10)
        try:
            return _fork_and_call(journal, sandbox)
        finally:
            lock.release()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert held.wait(10)
    try:
        return _fork_and_call(journal, sandbox)
    finally:
        release.set()
        t.join(10)


def _fork_and_call(journal: Any, sandbox: Any, key: str = "child", also_done: tuple[str, ...] = ()) -> int | None:
    """Forks; the child makes one keyed call under `key` with the inherited journal and exits
    0 when `key` and every key of `also_done` read done there (2 otherwise, 1 if it raised).
    The child's exit code, or None if it hung."""
    pid = fork_quietly()
    if pid == 0:
        code = 1
        try:
            c = sandbox.client(journal=journal)
            c.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key=key)
            entries = [journal.get(k) for k in (key, *also_done)]
            code = 0 if all(e is not None and e.state == "done" for e in entries) else 2
        finally:
            os._exit(code)
    return wait_child(pid)

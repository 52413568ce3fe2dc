"""A journal's methods run on threads Python does not own (the runtime's blocking pool). Each
such thread keeps one Python thread state while it lives, and the state is deleted when the
thread ends: no state is made and deleted per call (that churn held CPython's thread-list lock
while a Python thread could fork, and left a 3.11 child hung in `PyOS_AfterFork_Child`), and
none is left behind by a thread that ended.

What shows it: a `threading.local` lives in the thread state. A value set by one call is seen
by the next call on the same thread only if the state was kept, and the value is freed when the
state is deleted."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

import fxpay


class Marker:
    """A value a test can watch die."""


class WatchedJournal(fxpay.MemoryJournal):
    """A MemoryJournal whose `claim` notes, per call, its thread and whether that thread's
    `threading.local` already held a marker."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()
        self.seen: list[tuple[int, bool]] = []
        self.markers: list[weakref.ref[Marker]] = []
        self.guard = threading.Lock()

    def claim(self, entry: fxpay.JournalEntry) -> fxpay.JournalEntry | None:
        had = getattr(self.local, "marker", None) is not None
        if not had:
            marker = Marker()
            self.local.marker = marker
            with self.guard:
                self.markers.append(weakref.ref(marker))
        with self.guard:
            self.seen.append((threading.get_ident(), had))
        return super().claim(entry)


def test_a_pool_thread_keeps_its_state_between_calls_and_frees_it_when_it_ends(fxpay_sandbox: Any) -> None:
    journal = WatchedJournal()
    calls = 0
    with fxpay_sandbox.client(journal=journal) as c:
        # At least 12 calls, and on until a pool thread has run two claims. A pool thread
        # that ran a call's last journal step wakes the caller first and marks itself idle
        # after; the woken caller can take that thread's core at once, make its next call and
        # hand its claim to a thread started for it, before the first one is back (tokio's
        # blocking pool starts a thread when none is idle). With the other xdist worker busy
        # on the second core, 12 calls in a row got 12 threads (CPython 3.13 in CI). The
        # pause after each call gives the pool thread its core back; the test is about what
        # a reused thread finds, not how often tokio reuses one.
        while calls < 12 or len({ident for ident, _ in journal.seen}) == calls:
            assert calls < 200, f"no pool thread was reused in {calls} calls: {journal.seen}"
            c.create_quote(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key=f"q{calls}")
            calls += 1
            time.sleep(0.005)
    caller = threading.get_ident()
    assert len(journal.seen) == calls
    assert all(ident != caller for ident, _ in journal.seen), "claim ran on the calling thread"
    # Every call after a thread's first one finds the marker its first call left: the
    # thread's state was kept, not made anew.
    first: set[int] = set()
    for ident, had in journal.seen:
        assert had == (ident in first), f"thread {ident}: marker {'seen' if had else 'lost'}: {journal.seen}"
        first.add(ident)
    assert len(first) < calls, f"no pool thread was reused: {journal.seen}"
    assert len(journal.markers) == len(first)
    # The pool's idle threads end after 2 s; each one's state is deleted then, and with it the
    # thread's `threading.local` values.
    deadline = time.monotonic() + 15
    while any(m() is not None for m in journal.markers):
        assert time.monotonic() < deadline, "a pool thread's state outlived its thread"
        time.sleep(0.1)

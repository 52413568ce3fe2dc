"""A lock of a journal held by another thread of the parent when the process forks: the
child's first keyed call on the inherited journal must not wait for it (API.md: journals work
in a child forked while other threads of the parent were inside a claim or a commit).

Found by the fork stress harness (tests/stress/README.md): 1 child in 3,000 forks hung with
`MemoryJournal`, its pool thread waiting in `MemoryJournal.claim` for `self._lock`, which a
parent thread held at the fork. Here the parent holds the lock on purpose, so the fork always
lands in it."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import fork_quietly, wait_child
from fork_support import _child_call_with_lock_held, _fork_and_call
from journal_support import RedisServer, redis_server
from postgres_support import PostgresServer, postgres_server, table_name

__all__ = ["postgres_server", "redis_server"]


def _memory_journal(tmp_path: Path) -> fxpay.MemoryJournal:
    return fxpay.MemoryJournal()


def _sqlite_journal(tmp_path: Path) -> fxpay.SqliteJournal:
    return fxpay.SqliteJournal(tmp_path / "j.db")


def _memory_child_key_is_its_own(e: Any) -> None:
    assert e is None, "a child's claim is its own"


def _sqlite_child_key_is_on_disk(e: Any) -> None:
    # Its claim is on disk; its result waited in the child, which ended with
    # `os._exit` (no exit hook ran): the key reads pending, its holder gone.
    assert e is not None
    assert e.state in ("pending", "done"), e


@pytest.mark.parametrize(
    ("make_journal", "check_child_key"),
    [
        pytest.param(_memory_journal, _memory_child_key_is_its_own, id="MemoryJournal"),
        pytest.param(_sqlite_journal, _sqlite_child_key_is_on_disk, id="SqliteJournal"),
    ],
)
def test_a_journals_child_forked_while_threads_make_keyed_calls_neither_hangs_nor_loses_its_call(
    fxpay_sandbox: Any, tmp_path: Path, make_journal: Callable[[Path], Any], check_child_key: Callable[[Any], None]
) -> None:
    """Both journals keep their state in Rust (issue 56): their locks are not Python objects to
    hold here. MemoryJournal: a child never takes the parent's lock over, it makes its own from
    the copy the forking thread took in the fork hook (fxpay-core's `journal/memory.rs` test
    forks while a thread holds the lock, every time); the child's claims are its own.
    SqliteJournal: a child never uses its parent's connection, queue or waiting results, it
    makes its own, and no thread of the parent is inside SQLite at the fork (the fork gate,
    fxpay-core's `journal/sqlite/fork_gate.rs`); the child's claim is on the shared file. Here:
    the fork hook is wired (the child reads what the parent wrote before the fork), and forks
    made while two threads keep making keyed calls on the journal neither hang nor lose the
    child's own call."""
    journal = make_journal(tmp_path)
    parent = fxpay_sandbox.client(journal=journal)
    parent.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="before")
    stop = threading.Event()
    made = [0, 0]

    def calls(n: int) -> None:
        while not stop.is_set():
            parent.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key=f"t{n}-{made[n]}")
            made[n] += 1

    threads = [threading.Thread(target=calls, args=(n,), daemon=True) for n in (0, 1)]
    for t in threads:
        t.start()
    try:
        while min(made) < 3:
            time.sleep(0.01)
        for i in range(10):
            code = _fork_and_call(journal, fxpay_sandbox, key=f"child-{i}", also_done=("before",))
            assert code == 0, f"fork {i}: the child hung (None) or its journal was wrong (2)"
            check_child_key(journal.get(f"child-{i}"))
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert min(made) >= 3


# The results that wait for their journal's next commit (`fxpay._later`, RedisJournal's and
# PostgresJournal's): a child forked while a parent thread holds one of their locks makes its
# own (issue 55, found by mutation testing: without the child's fresh `_Later` state each of
# these hung the child).


@pytest.fixture(params=["redis client", "postgres callable"])
def python_journal(request: pytest.FixtureRequest) -> Any:
    """A journal whose storage is Python's: over a redis-py client, or over a callable
    returning psycopg connections. Its results wait in `fxpay._later` (one made from a URL
    keeps them in Rust, per process: tests/python/journal/test_journal_one_flush.py)."""
    if request.param == "redis client":
        import redis

        server: RedisServer = request.getfixturevalue("redis_server")
        journal: Any = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix=f"forks{time.monotonic_ns()}:")
        journal.create()
        return journal
    import psycopg

    pg: PostgresServer = request.getfixturevalue("postgres_server")
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(pg.conninfo), table=table_name())
    journal.create_table()
    return journal


def test_a_child_forked_while_a_thread_holds_the_waiting_results_lock_does_not_hang(fxpay_sandbox: Any, python_journal: Any) -> None:
    assert _child_call_with_lock_held(python_journal, python_journal._later.lock, fxpay_sandbox) == 0, "the child hung on the parent's lock"


def test_a_child_forked_while_a_thread_holds_the_lock_that_makes_waiting_results_does_not_hang(
    fxpay_sandbox: Any, python_journal: Any
) -> None:
    from fxpay._later import _Later

    assert _child_call_with_lock_held(python_journal, _Later.made, fxpay_sandbox) == 0, "the child hung on the parent's lock"


def test_a_child_forked_while_the_forking_thread_holds_the_flushers_condition_does_not_hang(
    fxpay_sandbox: Any, python_journal: Any
) -> None:
    from fxpay._later import _Later

    assert _child_call_with_lock_held(python_journal, _Later.due, fxpay_sandbox, by_this_thread=True) == 0, (
        "the child hung on the parent's lock"
    )


def _closes_in_another_thread(journal: Any) -> bool:
    """Whether ``journal.close()`` on a new thread ends within 20 s."""
    t = threading.Thread(target=journal.close, daemon=True)
    t.start()
    t.join(20)
    return not t.is_alive()


def test_after_a_fork_another_thread_closes_a_journal_in_the_parent_and_in_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock the forking thread holds across a fork (against a connection closed by
    another thread meanwhile) is taken before it and given back in the parent (no fork hook
    fails), and made anew in the child: a journal closed on another thread afterwards does
    not wait for it forever."""
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    assert journal.get("k") is None  # opens its connection
    hook_errors: list[Any] = []  # what a failing fork hook reports
    monkeypatch.setattr(sys, "unraisablehook", hook_errors.append)
    pid = fork_quietly()
    if pid == 0:
        code = 1
        try:
            assert journal.get("k") is None
            code = 0 if _closes_in_another_thread(journal) else 2
        finally:
            os._exit(code)
    assert [str(e.exc_value) for e in hook_errors] == []
    closed = _closes_in_another_thread(journal)
    _, status = os.waitpid(pid, 0)
    assert closed, "the parent's close waited for the fork's lock"
    assert os.waitstatus_to_exitcode(status) == 0, "the child's close waited for the fork's lock"


def _registers_in_another_thread() -> bool:
    """Whether a new journal (which registers with the fork registry, under its lock) is made
    on a new thread within 10 s."""
    made: list[fxpay.MemoryJournal] = []
    t = threading.Thread(target=lambda: made.append(fxpay.MemoryJournal()), daemon=True)
    t.start()
    t.join(10)
    return not t.is_alive() and len(made) == 1


def _freed_when_dropped(refs: list[weakref.ref[fxpay.MemoryJournal]]) -> bool:
    """Whether the journals behind ``refs``, dropped by the program, are freed."""
    gc.collect()
    return all(r() is None for r in refs)


def test_after_a_fork_the_registry_holds_nothing_in_the_parent_or_the_child(tmp_path: Path) -> None:
    """The fork registry's lock, taken by the forking thread before the fork, is given back in
    the parent and made anew in the child: another thread registers a new journal afterwards
    without waiting for ever. And the objects it held for the fork (each before paired with its
    after) are let go once the fork is made, in both: a journal the program drops afterwards is
    freed then, not at the next fork."""
    journals = [fxpay.MemoryJournal(), fxpay.SqliteJournal(tmp_path / "j.db")]
    refs = [weakref.ref(j) for j in journals]
    pid = fork_quietly()
    del journals
    if pid == 0:
        code = 1
        try:
            code = 0 if _freed_when_dropped(refs) else 2
            code = code or (0 if _registers_in_another_thread() else 3)
        finally:
            os._exit(code)
    freed = _freed_when_dropped(refs)
    registered = _registers_in_another_thread()
    child = wait_child(pid, 40)
    assert freed, "the parent still holds the journals it held for the fork"
    assert registered, "another thread of the parent waited for the fork's lock"
    assert child != 2, "the child still holds the journals it held for the fork"
    assert child != 3, "another thread of the child waited for the fork's lock"
    assert child == 0, f"the child ended with {child}"

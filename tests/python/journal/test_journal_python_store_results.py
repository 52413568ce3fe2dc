"""A keyed call's result under a journal whose storage is Python's (a ``RedisJournal`` over a
redis-py client, a ``PostgresJournal`` over a connection callable): it waits for the next
commit, like the core's stores' results, and (issue 55's mutation run of
``JournalBase._swap_ready``, five survivors):

- the flusher is woken for it: another connection reads it ``done`` within moments, with no
  other call of the process and before the process exits;
- what ``get`` reads is what a swap compares with: a swap of the entry ``get`` returned
  succeeds while the result still waits, because that result is written first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import fxpay
import fxpay._later as fxpay_later
from fxpay._later import _Later

from conftest import need
from journal_support import RedisServer, journal_over_python, quote, read_until, redis_server
from postgres_support import PostgresServer, postgres_server, table_name

__all__ = ["postgres_server", "redis_server"]


@pytest.fixture(params=["redis client", "postgres callable"])
def python_journals(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """The journal under test, and one more over the same storage (another connection)."""
    if request.param == "redis client":
        server: RedisServer = request.getfixturevalue("redis_server")
        where, name = server.url, f"py{time.monotonic_ns()}:"
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        where, name = pg.conninfo, table_name()
    journal = journal_over_python(request.param, where, name)
    journal.create()
    other = journal_over_python(request.param, where, name)
    try:
        yield journal, other
    finally:
        journal.close()
        other.close()


def test_the_result_is_written_within_moments_with_no_other_call(fxpay_sandbox: Any, python_journals: tuple[Any, Any]) -> None:
    journal, other = python_journals
    with fxpay_sandbox.client(journal=journal) as c:
        quote_id = quote(c, "alone")
        # The call's own journal reads its result at once (it waits here)...
        mine = journal.get("alone")
        assert mine is not None
        assert (mine.state, mine.result) == ("done", quote_id)
        # ...and the flusher writes it within moments (50 ms, fxpay._later.RESULT_DELAY): no
        # other claim carries it and the process does not exit.
        deadline = time.monotonic() + 10
        while (seen := other.get("alone")) is None or seen.state != "done":
            assert seen is not None, "the claim is gone"
            assert seen.state == "pending", seen
            assert time.monotonic() < deadline, "the result was never written"
            time.sleep(0.02)
        assert seen.result == quote_id
        # Once written, nothing of it is left waiting or in flight in this process.
        while journal._later.entries():
            assert time.monotonic() < deadline, "the result written is still held as on its way"
            time.sleep(0.02)
        # Nor is the journal left on the flusher's list of journals to write.
        while any(j is journal for _, j in _Later.waiting):
            assert time.monotonic() < deadline, "the journal written stays on the flusher's list"
            time.sleep(0.02)


def test_a_swap_of_what_get_read_succeeds_while_the_result_still_waits(fxpay_sandbox: Any, python_journals: tuple[Any, Any]) -> None:
    journal, other = python_journals
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "swapped")
        # Right after the call (the flusher writes 50 ms later): the result still waits.
        read = journal.get("swapped")
        assert read is not None
        assert read.state == "done"
        data = json.loads(read.to_json())
        data["result"] = "replaced"
        replaced = fxpay.JournalEntry.from_json(json.dumps(data))
        assert journal.swap(read, replaced), "get read done; the swap found something else stored"
    stored = other.get("swapped")
    assert stored is not None
    assert (stored.state, stored.result) == ("done", "replaced")


def _written(other: Any, key: str, result: str) -> fxpay.JournalEntry:
    """``key``'s entry once the flusher has written ``result`` (as ``other`` reads it); until
    then ``other`` reads its claim, nothing else."""

    def read() -> tuple[str, str | None] | None:
        e = other.get(key)
        return None if e is None else (e.state, e.result)

    read_until(read, ("done", result), meanwhile=("pending", None))
    done = other.get(key)
    assert done is not None
    return done


def _waiting_again(journal: Any, admin: Any, table: str, done: fxpay.JournalEntry) -> None:
    """``done``'s claim put back in the table and its result waiting in ``journal`` again, as
    right after its call (before the flusher's commit)."""
    claim = {**json.loads(done.to_json()), "state": "pending", "result": None}
    admin.execute(f'UPDATE "{table}" SET state = %s, result = NULL, data = %s WHERE key = %s', ("pending", json.dumps(claim), done.key))
    assert journal._later.defer(done.key, json.dumps(claim), done, done.to_json())


def test_a_postgres_result_whose_commit_failed_is_written_once_the_server_answers(
    fxpay_sandbox: Any, postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The flusher's commit of a waiting result fails (the journal's connection gone, no new
    one to be had): the result waits again, and is tried again ``RETRY_DELAY`` later until
    the server answers, with no other call to carry it."""
    psycopg = need("psycopg")
    down = threading.Event()
    tried_while_down = threading.Event()

    def connect() -> Any:
        if down.is_set():
            tried_while_down.set()
            raise psycopg.OperationalError("no connection to be had (the test's outage)")
        return psycopg.connect(postgres_server.conninfo, application_name="fxpay-retry-test")

    table = table_name()
    journal = fxpay.PostgresJournal(connect, table=table)
    journal.create()
    other = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table)
    try:
        with fxpay_sandbox.client(journal=journal) as c:
            quote_id = quote(c, "k")
        done = _written(other, "k", quote_id)
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            _waiting_again(journal, admin, table, done)
            down.set()
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'fxpay-retry-test'")
            caplog.set_level(logging.DEBUG, logger="fxpay")
            _Later.wake(journal)  # the flusher's turn: no connection, the result waits again
            assert tried_while_down.wait(10), "the flusher never tried the result"
            stored = other.get("k")
            assert stored is not None
            assert stored.state == "pending"
            down.clear()
        deadline = time.monotonic() + 10
        while (stored := other.get("k")) is None or stored.state != "done":
            assert time.monotonic() < deadline, "the result was not tried again once the server answered"
            time.sleep(0.02)
        assert stored.to_json() == done.to_json()
        failed = [r for r in caplog.records if "writing the results waiting failed" in r.getMessage()]
        assert failed, "the failed commit was not logged"
        assert failed[0].exc_info, "logged without the driver's error"
    finally:
        journal.close()
        other.close()


@contextlib.contextmanager
def _commit_held_by_a_lock(sandbox: Any, server: PostgresServer, name: str) -> Iterator[tuple[Any, Any, Any, fxpay.JournalEntry]]:
    """A keyed call's result, written and then made to wait again in this process; the
    flusher's commit of it in flight, held by another session's lock on the key's row.
    Yields the journal (its sessions named ``name``), another journal of the same table, the
    session holding the lock (let go by its ``rollback()``) and the result as written."""
    psycopg = need("psycopg")
    table = table_name()
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(server.conninfo, application_name=name), table=table)
    journal.create()
    other = fxpay.PostgresJournal(lambda: psycopg.connect(server.conninfo), table=table)
    try:
        with sandbox.client(journal=journal) as c:
            quote_id = quote(c, "k")
        done = _written(other, "k", quote_id)
        with psycopg.connect(server.conninfo, autocommit=True) as admin, psycopg.connect(server.conninfo) as locker:
            _waiting_again(journal, admin, table, done)
            locker.execute(f'SELECT 1 FROM "{table}" WHERE key = %s FOR UPDATE', ("k",))  # held until rollback
            _Later.wake(journal)
            deadline = time.monotonic() + 10
            while not admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'", (name,)
            ).fetchone():
                assert time.monotonic() < deadline, "the flusher's commit never waited on the row's lock"
                time.sleep(0.02)
            yield journal, other, locker, done
    finally:
        journal.close()
        other.close()


def test_flush_all_returns_once_the_flushers_commit_in_flight_has_landed(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    """``flush_all`` (a payout's end, the exit's) writes every result waiting, and one the
    flusher's commit already carries counts: it returns only once that commit landed, so
    that another session reads the result done the moment it returns (the CI run of
    2026-12-02 saw it return while the flusher's commit was still in flight)."""
    with _commit_held_by_a_lock(fxpay_sandbox, postgres_server, "fxpay-flush-all") as (_, other, locker, done):
        flushed = threading.Event()
        flushing = threading.Thread(target=lambda: (fxpay_later.flush_all(), flushed.set()))
        flushing.start()
        assert not flushed.wait(0.5), "flush_all returned while the flusher's commit was in flight"
        stored = other.get("k")
        assert stored is not None
        assert stored.state == "pending"
        locker.rollback()
        assert flushed.wait(10), "flush_all did not return once the commit landed"
        flushing.join()
        # The moment it returned, the result is on disk.
        stored = other.get("k")
        assert stored is not None
        assert stored.to_json() == done.to_json()


def test_a_result_whose_commit_waits_on_a_lock_reads_done_here_meanwhile(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    """While the flusher's commit of a result is in flight (here: held by another session's
    lock on the key's row), the store still holds the claim ``pending``; this process reads
    the result on its way, ``done``, not that claim. (Issue 55's mutation run of
    ``_later.py``: ``_Later.get`` reading only the results not yet taken by a commit.)"""
    with _commit_held_by_a_lock(fxpay_sandbox, postgres_server, "fxpay-in-flight") as (journal, other, locker, done):
        stored = other.get("k")
        assert stored is not None
        assert stored.state == "pending", "the store holds the claim while its result's commit waits"
        mine = journal.get("k")
        assert mine is not None
        assert (mine.state, mine.result) == ("done", done.result), "this process read its own result's claim"
        locker.rollback()
        deadline = time.monotonic() + 10
        while (stored := other.get("k")) is None or stored.state != "done":
            assert time.monotonic() < deadline, "the result was not written once the lock was let go"
            time.sleep(0.02)
        assert stored.to_json() == done.to_json()

"""A PostgreSQL journal knows itself (issue 52): an emptied, dropped-and-made-again, copied or
shadowed table is refused, never taken for a new journal; ``migrate fxpay_journal zero``
refuses while keys are unsettled; a restarted server's stale pooled connections fail no call.

Before, each of these sent 20 of 20 booked payments again: ``TRUNCATE``, a ``DROP`` followed
by a deploy-time ``create_table()``, and an unqualified table name meeting a schema named
after the role.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need
from journal_support import requests_to
from postgres_support import PostgresServer, postgres_server, sql, table_name

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

QUOTES = "POST /v1/payments/quotes"
KEYS = 20


def quote(c: fxpay.Client, key: str) -> str:
    return c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD", idempotency_key=key)


def book(c: fxpay.Client) -> None:
    for i in range(KEYS):
        quote(c, f"k{i}")


def again_sends_nothing(sb: Any, c: fxpay.Client, match: str) -> None:
    before = requests_to(sb, QUOTES)
    for i in range(KEYS):
        with pytest.raises(fxpay.JournalError, match=match) as e:
            quote(c, f"k{i}")
        assert "Nothing was sent" in str(e.value)
    assert requests_to(sb, QUOTES) == before


# The core's store, and psycopg's (a parameter only libpq reads keeps the journal in Python).
STORES = pytest.mark.parametrize("store", ["", " gssencmode=disable"], ids=["core", "psycopg"])


@STORES
def test_opening_never_creates_the_journal(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    table = table_name()
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table)
    with fxpay_sandbox.client(journal=journal) as c:
        with pytest.raises(fxpay.JournalError, match="opening a journal never creates one"):
            quote(c, "k")
        # A table made by hand (or by an older fxpay) without its identity row: refused too.
        columns = "key text PRIMARY KEY, seq bigint, state text NOT NULL, result text, data text NOT NULL, updated_at timestamptz"
        sql(postgres_server, f'CREATE TABLE "{table}" ({columns})')
        with pytest.raises(fxpay.JournalError, match="without a journal's identity row"):
            quote(c, "k")
        assert requests_to(fxpay_sandbox, QUOTES) == 0
        assert journal.create() is True  # gives the table its identity (an upgrade)
        assert journal.create() is False
        qid = quote(c, "k")
        assert quote(c, "k") == qid
    assert requests_to(fxpay_sandbox, QUOTES) == 1


def live_journal(server: PostgresServer, store: str) -> fxpay.PostgresJournal:
    """A journal made by a deploy step (``create()``), and the live process's own journal
    object, which opens it on first use (it did not make it)."""
    made = fxpay.PostgresJournal(server.conninfo + store, table=table_name())
    made.create()
    return fxpay.PostgresJournal(server.conninfo + store, table=made.table)


@STORES
def test_a_truncate_under_a_live_process_is_caught_at_the_next_claim(
    fxpay_sandbox: Any, postgres_server: PostgresServer, store: str
) -> None:
    journal = live_journal(postgres_server, store)
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
        sql(postgres_server, f'TRUNCATE "{journal.table}"')
        again_sends_nothing(fxpay_sandbox, c, "identity row is gone")
        with pytest.raises(fxpay.JournalError, match="identity row is gone"):
            journal.unknown()
    with fxpay_sandbox.client(journal=fxpay.PostgresJournal(postgres_server.conninfo + store, table=journal.table)) as c:
        again_sends_nothing(fxpay_sandbox, c, "without a journal's identity row")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


@STORES
def test_a_drop_and_a_deploy_time_create_is_not_the_live_process_journal(
    fxpay_sandbox: Any, postgres_server: PostgresServer, store: str
) -> None:
    journal = live_journal(postgres_server, store)
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
        sql(postgres_server, f'DROP TABLE "{journal.table}"')
        fxpay.PostgresJournal(postgres_server.conninfo + store, table=journal.table).create_table()  # a deploy step
        again_sends_nothing(fxpay_sandbox, c, "now holds another journal")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


@STORES
def test_a_schema_named_after_the_role_never_shadows_the_journal(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    table = table_name()
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table)
    assert journal.create() is True
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
    # Later a schema named after the role appears ("$user" comes first on the search path).
    sql(postgres_server, "CREATE SCHEMA IF NOT EXISTS postgres")
    try:
        again = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table)
        assert again.create() is False  # the journal the search path finds: no new, empty table
        assert sql(postgres_server, "SELECT to_regclass(%s)::text", f'postgres."{table}"') == [(None,)]
        with fxpay_sandbox.client(journal=again) as c:
            before = requests_to(fxpay_sandbox, QUOTES)
            for i in range(KEYS):
                quote(c, f"k{i}")  # replayed
            assert requests_to(fxpay_sandbox, QUOTES) == before
        # A copy in that schema (made by hand) shadows the name: refused, not taken for the journal.
        sql(postgres_server, f'CREATE TABLE postgres."{table}" AS SELECT * FROM public."{table}"')
        shadowed = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table)
        with fxpay_sandbox.client(journal=shadowed) as c, pytest.raises(fxpay.JournalError, match=f"made in 'public.{table}'"):
            quote(c, "k0")
    finally:
        sql(postgres_server, "DROP SCHEMA postgres CASCADE")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


def _create(conninfo: str, table: str, q: Any, i: int) -> None:
    import functools

    import psycopg

    # Half the processes open it from the connection string (the core's store), half over a
    # callable (psycopg's, in Python): both read the identity the race left.
    j = fxpay.PostgresJournal(conninfo if i % 2 else functools.partial(psycopg.connect, conninfo), table=table)
    assert (j._store is None) == (i % 2 == 0)
    made = j.create()
    q.put((j._identity(), made))


def test_create_is_safe_to_race_from_many_processes(postgres_server: PostgresServer) -> None:
    table = table_name()
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_create, args=(postgres_server.conninfo, table, q, i)) for i in range(8)]
    for p in procs:
        p.start()
    told = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sql(postgres_server, f'SELECT count(*) FROM "{table}"') == [(1,)]
    ids = {ident for ident, _ in told}
    assert ids == {row for (row,) in sql(postgres_server, f"SELECT data FROM \"{table}\" WHERE state = 'journal'")}, ids
    assert sorted(made for _, made in told) == [False] * 7 + [True], told  # one made it; seven found it


@STORES
def test_create_holds_its_advisory_lock_until_it_commits(postgres_server: PostgresServer, store: str) -> None:
    """``create()`` is one transaction under its advisory lock: a create held up inside it
    (here by a table lock) still holds the lock, so a second create waits for the first to
    commit instead of running its DDL beside it."""
    psycopg = need("psycopg")
    made = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    made.create()
    held = psycopg.connect(postgres_server.conninfo)
    try:
        held.execute(f'LOCK TABLE "{made.table}" IN ACCESS EXCLUSIVE MODE')
        told: list[object] = []
        again = fxpay.PostgresJournal(postgres_server.conninfo + store, table=made.table)
        t = threading.Thread(target=lambda: told.append(again.create()))
        t.start()
        waiting: list[Any] = []
        deadline = time.monotonic() + 30
        while not waiting:
            assert t.is_alive(), f"create() did not wait for the table lock: {told}"
            assert time.monotonic() < deadline, "create() never waited for the table lock"
            waiting = sql(
                postgres_server,
                "SELECT pid FROM pg_locks WHERE locktype = 'relation' AND NOT granted AND relation = to_regclass(%s)",
                f'"{made.table}"',
            )
            time.sleep(0.01)
        ((pid,),) = waiting
        advisory = sql(postgres_server, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = %s", pid)
        assert advisory == [(1,)], "create() let go of its advisory lock before it committed"
    finally:
        held.rollback()
        held.close()
    t.join(30)
    assert told == [False]


@STORES
def test_a_drop_after_create_is_caught_by_the_process_that_ran_create(
    fxpay_sandbox: Any, postgres_server: PostgresServer, store: str
) -> None:
    """The journal ``create()`` made (or found) is the one its process opened: dropped and made
    again by another process before this one's first call, it is refused, not taken anew."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    assert journal.create() is True
    sql(postgres_server, f'DROP TABLE "{journal.table}"')
    assert fxpay.PostgresJournal(postgres_server.conninfo + store, table=journal.table).create() is True
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.JournalError, match="now holds another journal"):
        quote(c, "k")
    assert requests_to(fxpay_sandbox, QUOTES) == 0


class _CountingLock:
    """A lock that counts the threads that came to take it (to know two wait on it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.came = 0

    def __enter__(self) -> None:
        self.came += 1
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_two_threads_opening_the_journal_at_once_both_use_it(postgres_server: PostgresServer) -> None:
    """Two threads that find the journal not yet opened both wait to open it: the first opens
    it, the second finds it opened under the lock and uses the same one."""
    made = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    made.create()
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=made.table)
    gate = _CountingLock()
    journal._open_lock = gate  # type: ignore[assignment]
    got: list[object] = []
    with gate.lock:
        threads = [threading.Thread(target=lambda: got.append(_get_or_error(journal))) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while gate.came < 2:
            assert time.monotonic() < deadline, "the two threads did not both come to open the journal"
            time.sleep(0.01)
    for t in threads:
        t.join(30)
    assert got == [None, None]


def _get_or_error(journal: fxpay.PostgresJournal) -> object:
    try:
        return journal.get("k")
    except Exception as e:  # told back to the test
        return e


def test_a_restarted_server_fails_none_of_the_next_calls(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """The pool's connections are stale after a restart: each is checked as it is taken (the
    server's goodbye is readable on an idle connection), and made anew, so no call fails."""
    server = PostgresServer()
    server.start()
    try:
        journal = fxpay.PostgresJournal(server.conninfo, table=table_name())
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            # Fill the pool: 8 threads at once use every connection it may hold.
            threads = [threading.Thread(target=quote, args=(c, f"warm-{i}")) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            server.stop("fast")
            server.start()
            failed = []
            for i in range(10):
                try:
                    quote(c, f"after-{i}")
                except fxpay.JournalError as e:
                    failed.append(str(e))
            assert failed == []
    finally:
        server.remove()


def test_python_m_fxpay_journal_create_on_postgres(postgres_server: PostgresServer) -> None:
    table = table_name()
    url = f"postgresql://postgres@127.0.0.1:{postgres_server.port}/postgres"
    run = lambda: subprocess.run(  # noqa: E731 - twice, the same command
        [sys.executable, "-m", "fxpay", "journal", "create", url, "--table", table], capture_output=True, text=True, timeout=60
    )
    first, second = run(), run()
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert "created" in first.stdout
    assert "already" in second.stdout

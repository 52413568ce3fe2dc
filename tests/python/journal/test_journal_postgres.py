"""PostgresJournal against a real PostgreSQL server: races between processes, a crash of the
server mid-run, failing closed, the caller's transactions, threads and fork.

The calls every journal shares (replay, reuse, in progress, unknown, resolve, a lost answer)
run on PostgreSQL in test_journal_calls.py, through its ``journal`` fixture."""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay
import fxpay._later as fxpay_later

from conftest import all_at_once, fork_quietly, make_beneficiary, need, wait_child
from journal_support import QUOTES, deal_args, pending_entry, quote, read_until, requests_to
from postgres_support import PostgresServer, backend_pid, make_postgres_journal, postgres_server, setting, sql, table_name

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

WORKER = Path(__file__).with_name("payout_worker.py")
DEALS = "POST /v1/payments/deals"


@pytest.fixture
def journal(postgres_server: PostgresServer) -> fxpay.PostgresJournal:
    return make_postgres_journal(postgres_server)


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of the test's own, that it may stop."""
    server = PostgresServer()
    server.start()
    yield server
    server.remove()


def rows(bid: str, n: int, prefix: str = "race") -> list[dict[str, Any]]:
    return [
        {
            "key": f"{prefix}-{i}",
            "buy_currency": "USD",
            "buy_amount": str(Decimal(20 + i)),
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": f"{prefix.upper()}-{i}",
        }
        for i in range(n)
    ]


def booked_refs(sb: Any) -> collections.Counter[str]:
    return collections.Counter(b["payReference"] for d in sb.deals() for b in d["beneficiaries"])


def test_two_processes_racing_on_100_keys_book_100_deals(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    table = table_name()
    fxpay.PostgresJournal(postgres_server.conninfo, table=table).create_table()
    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    table_rows = rows(bid, 100)
    cfg = {
        "base_url": fxpay_sandbox.base_url,
        "client_id": fxpay_sandbox.client_id,
        "client_secret": fxpay_sandbox.client_secret,
        "journal": f"postgres:{postgres_server.conninfo}|{table}",
        "rows": table_rows,
        "start_at": time.time() + 2.0,  # both start together, whatever their import time
    }
    argv = [sys.executable, str(WORKER), json.dumps(cfg)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    refs = booked_refs(fxpay_sandbox)
    # Without the journal each process would book its own 100: 200.
    assert sum(refs.values()) == 100
    assert set(refs) == {r["pay_reference"] for r in table_rows}
    assert sum(o.get("booked", 0) for o in outs) == 100
    for o in outs:
        assert set(o) <= {"booked", "replayed", "unknown"}


def test_the_server_crashing_mid_run_fails_closed_and_loses_no_claimed_key(fxpay_sandbox: Any, own_server: PostgresServer) -> None:
    journal = make_postgres_journal(own_server, timeout=2.0)
    with fxpay_sandbox.client(journal=journal) as c:
        bid = c.create_beneficiary(make_beneficiary())
        table_rows = rows(bid, 40, "crash")
        results: list[dict[str, Any]] = []
        reported = threading.Event()
        crashed = threading.Event()

        def progress(p: fxpay.PayoutProgress) -> None:
            if p.done == 10:
                reported.set()
                crashed.wait(30)  # the rest of the table runs while the server is down

        # Paced: rows start at most 8 a second, so the rows that end before the crash are
        # bounded by the time it takes, whether the progress callback holds the rows or not
        # (pay_out runs it off the rows' path).
        rate = 8

        def pay() -> None:
            results.extend(c.pay_out(table_rows, funding_source="Own account", concurrency=2, progress=progress, max_rate=rate))

        runner = threading.Thread(target=pay, daemon=True)
        runner.start()
        assert reported.wait(60)
        reported_at = time.monotonic()
        # Every key claimed so far, read before the crash.
        with need("psycopg").connect(own_server.conninfo) as conn:
            before = dict(conn.execute(f'SELECT key, data FROM "{journal.table}" WHERE state <> %s', ("journal",)).fetchall())
        assert len(before) >= 20  # 10 rows done, two keys each (quote, deal)
        own_server.stop("immediate")  # a crash: no checkpoint, the restart replays the WAL
        later = math.ceil((time.monotonic() - reported_at) * rate) + 1  # rows that may have started meanwhile
        crashed.set()
        time.sleep(0.5)  # the requests in flight when it stopped end (the sandbox answers in ms)
        sent = fxpay_sandbox.stats()["requests"]
        with pytest.raises(fxpay.JournalError):
            c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="while-down")
        with pytest.raises(fxpay.JournalError):
            journal.get("crash-0/deal")
        runner.join(60)
        assert not runner.is_alive()
        assert fxpay_sandbox.stats()["requests"] == sent  # the rows started while down sent nothing
        assert len(results) == 40
        assert {r["status"] for r in results} <= {"booked", "refused", "unknown"}
        refused = [r for r in results if r["status"] == "refused"]
        assert len(refused) >= 40 - 10 - 2 - later  # all but the 10 done, the 2 in flight, and those started meanwhile
        assert all("journal" in r["error"] for r in refused)
        own_server.start()
        # No key is lost: each is there, in the state it had or a later one.
        for key, data in before.items():
            now = journal.get(key)
            assert now is not None, key
            then = fxpay.JournalEntry.from_json(data)
            if then.state == "done":
                assert now.to_json() == data
        # Running the table again books the rest, each row at most once.
        again = c.pay_out(table_rows, funding_source="Own account", progress=False)
        assert {r["status"] for r in again} <= {"booked", "replayed", "unknown"}
        assert sum(r["status"] == "replayed" for r in again) >= 10
        refs = booked_refs(fxpay_sandbox)
        assert max(refs.values()) == 1
        # Every deal booked is a row booked or replayed, or one left unknown: a deal that was
        # in flight when the server died may be booked while its key could not say so.
        known = {r["pay_reference"] for r in again if r["status"] in ("booked", "replayed")}
        assert known <= set(refs)
        assert len(refs) <= len(known) + sum(r["status"] == "unknown" for r in again)


def test_a_server_that_is_down_fails_closed_and_sends_nothing(fxpay_sandbox: Any, own_server: PostgresServer) -> None:
    journal = make_postgres_journal(own_server, timeout=2.0)
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        own_server.stop()
        before = fxpay_sandbox.stats()["requests"]
        started = time.monotonic()
        with pytest.raises(fxpay.JournalError) as e:
            c.create_deal(**args, idempotency_key="down")
        assert time.monotonic() - started < 10
        assert isinstance(e.value, fxpay.IdempotencyError)
        assert fxpay_sandbox.stats()["requests"] == before
        with pytest.raises(fxpay.JournalError):
            journal.unknown()
        own_server.start()
        deal = c.create_deal(**args, idempotency_key="down")
        assert c.create_deal(**args, idempotency_key="down") == deal
        assert requests_to(fxpay_sandbox, DEALS) == 1


def _server_processes(server: PostgresServer) -> list[int]:
    """The postmaster of ``server`` and every process it started."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    found = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == postmaster:
            found.append(int(stat.parent.name))
    return found


def test_a_server_that_stops_answering_fails_closed_within_the_timeout(fxpay_sandbox: Any, own_server: PostgresServer) -> None:
    """Every process of the server stopped (SIGSTOP): the kernel still takes the statement's
    bytes, and nothing answers. The call fails closed after ``timeout`` and a second more, not
    never; once the server runs again, the next call goes through on a new connection."""
    journal = make_postgres_journal(own_server, timeout=1.0)
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="warm")
        before = fxpay_sandbox.stats()["requests"]
        stopped = _server_processes(own_server)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(fxpay.JournalError, match="did not answer within"):
                c.create_deal(**args, idempotency_key="stalled")
            took = time.monotonic() - started
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        assert 1.5 <= took < 10, took
        assert fxpay_sandbox.stats()["requests"] == before  # nothing sent
        deal = c.create_deal(**args, idempotency_key="after")
        assert journal.get("after").result == deal.deal_id  # type: ignore[union-attr]


def test_a_statement_timeout_fails_closed_and_sends_nothing(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    psycopg = need("psycopg")
    journal = make_postgres_journal(postgres_server, timeout=0.5)
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        # Another session (a long migration, say) holds the table.
        other = psycopg.connect(postgres_server.conninfo)
        other.execute(f'LOCK TABLE "{journal.table}" IN ACCESS EXCLUSIVE MODE')
        before = fxpay_sandbox.stats()["requests"]
        started = time.monotonic()
        with pytest.raises(fxpay.JournalError, match="statement timeout"):
            c.create_deal(**args, idempotency_key="locked")
        assert 0.4 < time.monotonic() - started < 5
        assert fxpay_sandbox.stats()["requests"] == before
        other.rollback()
        other.close()
        c.create_deal(**args, idempotency_key="locked")
        assert requests_to(fxpay_sandbox, DEALS) == 1


# The core's store, and psycopg's (a parameter only libpq reads keeps the journal in Python).
STORES = pytest.mark.parametrize("store", ["", " gssencmode=disable"], ids=["core", "psycopg"])


@STORES
def test_a_read_only_server_fails_closed_and_sends_nothing(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    table = make_postgres_journal(postgres_server).table
    # What a hot standby (or a primary put in read-only mode) answers to every session.
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store + " options='-c default_transaction_read_only=on'", table=table)
    assert (journal._store is None) == bool(store)
    said = r"read-only \(transaction_read_only is on\); the journal needs the primary"
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        before = fxpay_sandbox.stats()["requests"]
        with pytest.raises(fxpay.JournalError, match=said):
            c.create_deal(**args, idempotency_key="ro")
        with pytest.raises(fxpay.JournalError, match=said):
            journal.get("ro")
        assert fxpay_sandbox.stats()["requests"] == before


@STORES
def test_a_session_without_synchronous_commit_gets_it_back(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    """A connection string (or a server default) that turns ``synchronous_commit`` off would
    let a claim's commit return before it is on disk: the journal turns it on again in each
    of its sessions."""
    table = make_postgres_journal(postgres_server).table
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store + " options='-c synchronous_commit=off'", table=table)
    assert (journal._store is None) == bool(store)
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "k")
    assert setting(journal, "synchronous_commit") == "on"


def test_a_callable_that_gives_no_connection_is_a_configuration_error(fxpay_sandbox: Any) -> None:
    """Said as the setting it is where the journal is used by hand; a keyed call fails closed
    with it (the journal's error, naming it), nothing sent."""
    journal = fxpay.PostgresJournal(lambda: object(), table=table_name())
    said = r"conninfo\(\) returned object, not a DB-API connection$"
    with pytest.raises(fxpay.ConfigurationError, match="^" + said):
        journal.create_table()
    before = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.JournalError, match="ConfigurationError: " + said):
        quote(c, "k")
    assert requests_to(fxpay_sandbox, QUOTES) == before


def test_a_missing_table_fails_closed_and_says_how_to_make_it(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    journal = fxpay.PostgresJournal(postgres_server.conninfo, table=table_name())
    with fxpay_sandbox.client(journal=journal) as c:
        before = fxpay_sandbox.stats()["requests"]
        with pytest.raises(fxpay.JournalError, match=r"PostgresJournal\(conninfo\)\.create\(\)"):
            c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="q")
        assert fxpay_sandbox.stats()["requests"] == before
        journal.create_table()
        journal.create_table()  # again: nothing to do
        qid = c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="q")
        assert journal.get("q").result == qid  # type: ignore[union-attr]


def test_the_callers_transaction_neither_holds_nor_undoes_a_claim(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    psycopg = need("psycopg")
    journal = make_postgres_journal(postgres_server)
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        # The application's own transaction, open around the call, then rolled back (an
        # exception after the payment, in Django's atomic() or a SQLAlchemy session).
        app = psycopg.connect(postgres_server.conninfo)
        app.execute("CREATE TEMP TABLE orders (id int)")
        app.execute("INSERT INTO orders VALUES (1)")
        deal = c.create_deal(**args, idempotency_key="in-tx")
        # Committed already: another session sees the key (its claim, within moments its
        # result) while the caller's transaction is open.
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as third:
            read_until(
                lambda: third.execute(f'SELECT state FROM "{journal.table}" WHERE key = %s', ("in-tx",)).fetchone(),
                ("done",),
                meanwhile=("pending",),
            )
        app.rollback()
        app.close()
        assert journal.get("in-tx").result == deal.deal_id  # type: ignore[union-attr]
        assert c.create_deal(**args, idempotency_key="in-tx") == deal
        assert requests_to(fxpay_sandbox, DEALS) == 1


def test_a_connection_factory_in_a_transaction_is_used_in_autocommit(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    psycopg = need("psycopg")
    table = make_postgres_journal(postgres_server).table
    made: list[Any] = []

    def connect() -> Any:
        conn = psycopg.connect(postgres_server.conninfo)  # not in autocommit: DB-API's default
        conn.execute("SELECT 1")  # a transaction already open
        made.append(conn)
        return conn

    journal = fxpay.PostgresJournal(connect, table=table)
    with fxpay_sandbox.client(journal=journal) as c:
        qid = c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="f")
    assert len(made) == 1
    assert made[0].autocommit
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as other:
        read_until(lambda: other.execute(f'SELECT result FROM "{table}" WHERE key = %s', ("f",)).fetchone(), (qid,), meanwhile=(None,))


def test_many_threads_share_a_few_connections(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    psycopg = need("psycopg")
    name = table_name()
    journal = fxpay.PostgresJournal(f"{postgres_server.conninfo} application_name={name}", table=name)
    journal.create_table()
    seen: list[int] = []
    done = threading.Event()

    def sessions() -> None:  # the journal's sessions on the server, while the threads run
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            while not done.is_set():
                seen.append(admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()[0])
                time.sleep(0.005)

    watcher = threading.Thread(target=sessions)
    watcher.start()
    try:
        with fxpay_sandbox.client(journal=journal) as c:
            c._payments_token()  # the token first: its request is not under a key
            ids = all_at_once(16, lambda: c.create_beneficiary(make_beneficiary(), idempotency_key=f"b{threading.get_ident()}"))
            assert len(set(ids)) == 16
            assert fxpay_sandbox.stats()["beneficiaries"] == 16
            # One key from 16 threads at once: one request, the others in progress or replayed.
            outcomes: collections.Counter[str] = collections.Counter()

            def same() -> None:
                try:
                    c.create_beneficiary(make_beneficiary(), idempotency_key="one")
                    outcomes["ok"] += 1
                except fxpay.InProgressError:
                    outcomes["in progress"] += 1

            all_at_once(16, same)
            assert fxpay_sandbox.stats()["beneficiaries"] == 17
            assert sum(outcomes.values()) == 16
    finally:
        done.set()
        watcher.join(10)
    assert 1 <= max(seen) <= journal.max_connections == 4  # a few, never one per thread


FORK_SCRIPT = textwrap.dedent(
    """
    import gc, json, os, sys, threading, time
    import psycopg
    import fxpay


    # A DB-API connection that, like psycopg2's, says goodbye to the server (libpq's
    # PQfinish) when it is deleted, in whatever process deletes it.
    class FinishesOnDelete:

        def __init__(self):
            self._c = psycopg.connect(sys.argv[1])

        def __getattr__(self, name):
            return getattr(self._c, name)

        def __setattr__(self, name, value):
            if name == "_c":
                object.__setattr__(self, name, value)
            else:
                setattr(self._c, name, value)

        def __del__(self):
            self._c.pgconn.finish()


    if sys.argv[4] == "psycopg":
        journal = fxpay.PostgresJournal(sys.argv[1], table=sys.argv[2])
    else:
        journal = fxpay.PostgresJournal(FinishesOnDelete, table=sys.argv[2])
    native = journal._store is not None  # the core's store (else psycopg's, in Python)
    if native:
        backend = lambda: int(journal._store.diagnostic("backend"))
    else:
        backend = lambda: journal._run("probe", ("SELECT pg_backend_pid()", ()))[1][0][0]
    parent_backend = backend()
    held, release = threading.Event(), threading.Event()
    if native:
        # Another thread is inside a claim when the process forks: it holds a connection
        # and leads its commit, waiting for the table's lock, which a session of the test
        # holds until after the fork.
        locker = psycopg.connect(sys.argv[1])
        locker.execute(f'LOCK TABLE "{sys.argv[2]}" IN ACCESS EXCLUSIVE MODE')
        other = fxpay.JournalEntry.from_json(sys.argv[3].replace('"from-child"', '"from-parent"'))
        def inside():
            held.set()
            journal.claim(other)
        t = threading.Thread(target=inside)
        t.start()
        held.wait()
        with psycopg.connect(sys.argv[1], autocommit=True) as look:
            while not look.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                time.sleep(0.01)
        threading.Timer(1.0, locker.commit).start()  # in the parent, after the fork
    else:
        # Another thread is inside a call (it holds the journal's lock) when the process forks.
        def inside():
            with journal._lock:
                held.set()
                release.wait()
        t = threading.Thread(target=inside)
        t.start()
        held.wait()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = {}
        try:
            out["claim"] = journal.claim(fxpay.JournalEntry.from_json(sys.argv[3])) is None
            out["child_backend"] = backend()
            out["child_backend_again"] = backend()
            journal.close()
            del journal  # the child lets go of the journal, and of what it inherited
            gc.collect()
        except BaseException as e:
            out["error"] = repr(e)
        os.write(w, json.dumps(out).encode())
        os.close(w)
        sys.exit(0)  # an ordinary exit: finalisers run
    os.close(w)
    os.waitpid(pid, 0)
    child = json.loads(os.read(r, 65536))
    release.set()
    t.join()
    print(json.dumps({**child, "parent_backend": parent_backend, "parent_after": backend()}))
    """
)


@pytest.mark.parametrize("connection", ["psycopg", "finishes-on-delete"])
def test_a_child_forked_while_a_thread_is_inside_a_call_has_its_own_connection(
    fxpay_sandbox: Any, postgres_server: PostgresServer, journal: fxpay.PostgresJournal, tmp_path: Path, connection: str
) -> None:
    with fxpay_sandbox.client(journal=journal) as c:
        c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="template")
    template = journal.get("template")
    assert template is not None
    entry = template.to_json().replace('"template"', '"from-child"')
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    argv = [sys.executable, str(script), postgres_server.conninfo, journal.table, entry, connection]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:  # a child that hangs (a lock it inherited held) must not outlive the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == 0, stderr
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out.get("error") is None, out
    assert out["claim"] is True
    assert out["child_backend"] != out["parent_backend"]  # a connection of its own
    assert out["child_backend_again"] == out["child_backend"]  # kept for its next statement
    assert out["parent_after"] == out["parent_backend"]  # the parent's session outlived the child
    assert journal.get("from-child") is not None


def test_wrong_types_and_values_are_refused() -> None:
    with pytest.raises(TypeError, match="conninfo"):
        fxpay.PostgresJournal(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="table"):
        fxpay.PostgresJournal("host=127.0.0.1", table=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout"):
        fxpay.PostgresJournal("host=127.0.0.1", timeout="5")  # type: ignore[arg-type]
    for bad in ("", "fx journal", 'x"; DROP TABLE y; --', "a.b.c", "1abc", "x" * 51, "s.", "é"):
        with pytest.raises(fxpay.ConfigurationError, match="table"):
            fxpay.PostgresJournal("host=127.0.0.1", table=bad)
    for t in (0, -1, float("nan"), float("inf")):
        with pytest.raises(fxpay.ConfigurationError, match=r"^timeout must be a finite number of seconds more than 0, got "):
            fxpay.PostgresJournal("host=127.0.0.1", timeout=t)
    with pytest.raises(fxpay.ConfigurationError, match="conninfo") as e:
        fxpay.PostgresJournal("host=127.0.0.1 password=s3cret dbname")
    assert "s3cret" not in str(e.value)
    fxpay.PostgresJournal("host=127.0.0.1", timeout=1e12)  # longer than PostgreSQL can count: its longest
    j = fxpay.PostgresJournal("host=127.0.0.1 port=9", table="app.fxpay_journal")  # nothing connects yet
    for each in (j, fxpay.PostgresJournal("host=127.0.0.1 port=9 gssencmode=disable")):  # the core's store, psycopg's
        with pytest.raises(TypeError, match="key"):
            each.get(5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="entry"):
            each.claim("x")  # type: ignore[arg-type]
        assert isinstance(each, fxpay.Journal)


def test_a_table_name_is_checked_in_python_for_a_journal_over_a_callable() -> None:
    """A journal over a callable (Django, SQLAlchemy) has no core store to check its table's
    name: the Python side refuses a bad one itself, before any connection is made."""
    for bad in ("", "fx journal", 'x"; DROP TABLE y; --', "a.b.c", "1abc", "x" * 51, "s.", "é"):
        with pytest.raises(fxpay.ConfigurationError, match="table"):
            fxpay.PostgresJournal(lambda: None, table=bad)
    assert fxpay.PostgresJournal(lambda: None, table="app.fxpay_journal").table == "app.fxpay_journal"


@pytest.mark.parametrize(
    ("conninfo", "core"),
    [
        ("host=127.0.0.1 port=9", "host=127.0.0.1 port=9"),
        ("host=127.0.0.1 port=9 sslmode=disable", "host=127.0.0.1 port=9 sslmode=disable"),
        # No TLS asked for, to a host elsewhere: the core connects as libpq would.
        ("host=db.internal port=9 sslmode=disable", "host=db.internal port=9 sslmode=disable"),
        # An empty value is libpq's default (here `prefer`, on loopback), not a value.
        ("host=127.0.0.1 port=9 sslmode=''", "host=127.0.0.1 port=9"),
        # libpq's `allow` on loopback: it tries without TLS first, and the core never uses TLS.
        ("host=127.0.0.1 port=9 sslmode=allow", "host=127.0.0.1 port=9 sslmode=prefer"),
        ("host=/tmp port=9 sslmode=prefer", "host=/tmp port=9 sslmode=prefer"),
        # libpq's default `prefer` to a host elsewhere, or to an address given beside a
        # loopback name (`hostaddr` is where libpq connects): it may use TLS, so libpq connects.
        ("host=db.internal port=9", None),
        ("host=localhost hostaddr=10.1.2.3 port=9", None),
        # TLS asked for: only libpq (psycopg) makes that connection.
        ("host=127.0.0.1 port=9 sslmode=require", None),
        # A parameter the core does not read.
        ("host=127.0.0.1 port=9 sslrootcert=/nowhere/ca.pem", None),
        # No host: libpq's default socket folder, which only libpq knows.
        ("port=9", None),
    ],
)
def test_which_connection_strings_the_core_connects_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, conninfo: str, core: str | None
) -> None:
    """A connection string the core connects with as libpq would (else psycopg's store, in
    Python): the parameters it reads, a host, no TLS beyond loopback's ``prefer``."""
    need("psycopg")
    from fxpay.journals import postgres as pj

    for env in ("PGHOST", "PGHOSTADDR", "PGSSLMODE", "PGPASSFILE", "PGSERVICE", "PGSSLROOTCERT"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pgpass yet
    monkeypatch.setenv("PGUSER", "fxpay")
    want = None if core is None else f"{core} user=fxpay"
    got = pj._core_conninfo(pj._conninfo_dict(conninfo))
    assert (got is None) == (want is None), got
    if want is not None:
        assert pj._conninfo_dict(got or "") == pj._conninfo_dict(want)
    # A password file libpq would read (~/.pgpass): the core does not, so libpq connects,
    # unless the string gives the password itself.
    (tmp_path / ".pgpass").write_text("127.0.0.1:9:*:fxpay:secret\n")
    assert pj._core_conninfo(pj._conninfo_dict("host=127.0.0.1 port=9")) is None
    assert pj._core_conninfo(pj._conninfo_dict("host=127.0.0.1 port=9 password=x")) is not None
    # No user given, none in PGUSER: libpq's default, the operating system's user name.
    monkeypatch.delenv("PGUSER")
    monkeypatch.setenv("LOGNAME", "os-user")
    got = pj._core_conninfo(pj._conninfo_dict("host=127.0.0.1 port=9 password=x"))
    assert pj._conninfo_dict(got or "").get("user") == "os-user", got


def test_table_ddl_and_conninfo_of_are_what_migrations_and_frameworks_get() -> None:
    """``table_ddl`` (the Django migrations', and the docs' for those who migrate by hand):
    the table, its two indexes and its identity row, the name quoted and checked.
    ``conninfo_of`` (a framework's database settings): libpq's keys only, empty ones left
    out."""
    need("psycopg")
    from fxpay.journals import postgres as pj

    ddl = pj.table_ddl("app.Journal")
    assert len(ddl) == 4
    assert ddl[0].startswith('CREATE TABLE IF NOT EXISTS "app"."Journal" (')
    assert '"Journal_result"' in ddl[1]
    assert '"Journal_open"' in ddl[2]
    assert ddl[3].startswith('INSERT INTO "app"."Journal"')
    assert 'to_regclass(\'"app"."Journal"\')' in ddl[3]
    with pytest.raises(fxpay.ConfigurationError, match="table"):
        pj.table_ddl("a.b.c")
    settings = {"dbname": "shop", "user": "it's", "host": "", "port": 5432, "password": None, "isolation_level": 1}
    assert pj._conninfo_dict(pj.conninfo_of(settings)) == {"dbname": "shop", "user": "it's", "port": "5432"}


def test_the_documented_module_path_names_the_journal_packages_own_objects() -> None:
    """``fxpay.postgres_journal`` (the path the docs and older migrations name) holds the
    objects of ``fxpay.journals.postgres``, where the journal lives: the same, not copies."""
    import fxpay.postgres_journal as documented
    from fxpay.journals import postgres

    assert documented.__all__ == postgres.__all__
    for name in postgres.__all__:
        assert getattr(documented, name) is getattr(postgres, name), name
    assert fxpay.PostgresJournal is postgres.PostgresJournal


def test_what_a_database_error_and_an_identity_row_say() -> None:
    """A driver's error with its SQLSTATE (psycopg's ``sqlstate``, psycopg2's ``pgcode``)
    gets the step that fixes it; an identity row's table is read only from a JSON object."""
    need("psycopg")
    from fxpay.journals import postgres as pj

    class DriverError(Exception):
        def __init__(self, message: str, **codes: str) -> None:
            super().__init__(message)
            for k, v in codes.items():
                setattr(self, k, v)

    missing = pj._explain(DriverError("no table", sqlstate="42P01"), "app.j")
    assert missing == "DriverError: no table (make the table 'app.j' with journal.create_table(), or the Django migration)"
    read_only = pj._explain(DriverError("read-only", pgcode="25006"), "app.j")
    assert read_only == "DriverError: read-only (the server is read-only: the journal needs the primary)"
    assert pj._explain(DriverError("other", sqlstate="40001"), "app.j") == "DriverError: other"
    assert pj._identity_table('{"journal": "fxpay-journal:1", "table": "public.j"}') == "public.j"
    for text in ("not json", "[1]", '{"table": 5}', "{}"):
        assert pj._identity_table(text) is None, text


@STORES
def test_a_schema_qualified_table(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    """Made in the schema named, which is not on the search path."""
    psycopg = need("psycopg")
    schema = table_name()
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=f"{schema}.Journal")
    journal.create_table()
    with fxpay_sandbox.client(journal=journal) as c:
        qid = c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="s")
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as conn:
        read_until(
            lambda: conn.execute(f'SELECT result FROM "{schema}"."Journal" WHERE state <> %s', ("journal",)).fetchall(),
            [(qid,)],
            meanwhile=[(None,)],
        )


def test_a_server_with_synchronous_commit_off_gets_it_on_for_the_journal(postgres_server: PostgresServer) -> None:
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " options='-c synchronous_commit=off'", table=table_name())
    journal.create_table()
    assert journal._store is not None  # the core's store
    assert setting(journal, "synchronous_commit") == "on"


@STORES
def test_a_hot_standby_fails_closed_and_sends_nothing(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    primary = make_postgres_journal(postgres_server)
    with fxpay_sandbox.client(journal=primary) as c:
        qid = c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="before")
    standby = PostgresServer(standby_of=postgres_server)  # a replica, as after a wrong failover or DNS name
    standby.start()
    try:
        journal = fxpay.PostgresJournal(standby.conninfo + store, table=primary.table)
        assert (journal._store is None) == bool(store)
        with fxpay_sandbox.client(journal=journal) as c:
            before = fxpay_sandbox.stats()["requests"]
            for key in ("before", "new"):  # not even a replay is read from a replica: it may lag
                with pytest.raises(fxpay.JournalError, match=r"read-only \(a replica in recovery\); the journal needs the primary"):
                    c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key=key)
            assert fxpay_sandbox.stats()["requests"] == before
        with need("psycopg").connect(standby.conninfo) as conn:  # the replica has the key: it is the journal that refuses
            assert conn.execute(f'SELECT result FROM "{primary.table}" WHERE state <> %s', ("journal",)).fetchall() == [(qid,)]
    finally:
        standby.remove()


def test_a_connection_closed_while_idle_is_made_anew_not_failed(
    fxpay_sandbox: Any, postgres_server: PostgresServer, journal: fxpay.PostgresJournal
) -> None:
    psycopg = need("psycopg")
    journal.ping_after = 0.2  # the core's store: 1 s, fixed
    with fxpay_sandbox.client(journal=journal) as c:
        c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="first")
        backend = backend_pid(journal)
        # The server ends the idle session (idle_session_timeout, a restart, a firewall).
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (backend,)).fetchone() == (True,)
        time.sleep(1.3)
        qid = c.create_quote(buy_currency="AUD", buy_amount="6", sell_currency="USD", idempotency_key="after-idle")
        assert journal.get("after-idle").result == qid  # type: ignore[union-attr]
        assert backend_pid(journal) != backend


def test_over_a_callable_a_session_the_server_ended_is_made_anew_and_a_live_one_kept(
    fxpay_sandbox: Any, postgres_server: PostgresServer
) -> None:
    """A journal over a callable (Django, SQLAlchemy: no core store) looks for the server's
    goodbye on a pooled connection before it uses it. One whose session the server ended
    while it sat idle (an administrator's terminate, a restart) is made anew: the call neither
    fails nor reads as unknown. A live one is kept: no new session per call."""
    psycopg = need("psycopg")
    sessions: list[int] = []
    made_here: list[Any] = []

    def connect() -> Any:
        conn = psycopg.connect(postgres_server.conninfo)
        sessions.append(conn.info.backend_pid)
        made_here.append(conn)
        return conn

    journal = fxpay.PostgresJournal(connect, table=table_name())
    journal.create()
    journal.ping_after = 3600.0  # the goodbye's check alone: no ping before a statement
    # One connection, so that a session made during the calls is one made anew: with more,
    # the flusher writing a result while the next call claims takes a second one, and
    # whether the two overlap is the scheduler's choice (seen on a loaded host).
    journal.max_connections = 1
    args = {"buy_currency": "AUD", "buy_amount": "5", "sell_currency": "USD"}
    with fxpay_sandbox.client(journal=journal) as c:
        for i in range(5):
            c.create_quote(**args, idempotency_key=f"warm-{i}")
        made = len(sessions)
        for i in range(5):
            c.create_quote(**args, idempotency_key=f"kept-{i}")
        assert len(sessions) == made, "a live pooled connection was made anew"
        # The results waiting are written now: the flusher then has no statement to run, and
        # the next claim is the first to take a connection whose session ended.
        fxpay_later.flush_all()
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            for pid in sessions:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            deadline = time.monotonic() + 10
            while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (sessions,)).fetchone() != (0,):
                assert time.monotonic() < deadline, "the sessions did not end"
                time.sleep(0.02)
        qid = c.create_quote(**args, idempotency_key="after-terminate")
    entry = journal.get("after-terminate")
    assert entry is not None
    assert (entry.state, entry.result) == ("done", qid)
    assert len(sessions) > made
    # The connections whose session ended are closed on this side too (not left to the
    # garbage collector, which psycopg warns about).
    assert [conn.closed for conn in made_here[:made]] == [True] * made


def test_over_a_callable_a_missing_journal_is_refused_with_what_to_do(postgres_server: PostgresServer) -> None:
    """A journal over a callable has no core store: the Python side refuses a missing table
    itself, and says how a journal is made once and why a lost one is restored, not made
    again."""
    psycopg = need("psycopg")
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table_name())
    with pytest.raises(fxpay.JournalError, match="opening a journal never creates one") as e:
        journal.get("k")
    text = str(e.value)
    assert "python -m fxpay journal create URL" in text
    assert "restore it from a backup first" in text
    assert text.endswith("Nothing was sent.")


def test_a_goodbye_is_looked_for_only_where_it_can_be_asked() -> None:
    """The check for a server's goodbye on an idle pooled connection: False for a driver with
    no usable socket (no ``fileno``, or not a descriptor), False for a socket with nothing to
    read, True once there is something."""
    from fxpay.journals.postgres import _closed_by_server

    class NoSocket:
        pass

    class Socket:
        def __init__(self, fd: object) -> None:
            self.fd = fd

        def fileno(self) -> object:
            return self.fd

    assert _closed_by_server(NoSocket()) is False
    assert _closed_by_server(Socket(None)) is False
    assert _closed_by_server(Socket("3")) is False
    assert _closed_by_server(Socket(-1)) is False
    r, w = os.pipe()
    try:
        assert _closed_by_server(Socket(r)) is False
        os.write(w, b"E")
        assert _closed_by_server(Socket(r)) is True
    finally:
        os.close(r)
        os.close(w)


def test_a_forked_childs_inherited_socket_is_pointed_at_dev_null_and_nothing_else() -> None:
    """In a forked child, an inherited connection's descriptor is pointed at /dev/null (so
    nothing the child does with it reaches the parent's session), with no descriptor left
    open for it; a driver with no usable socket (no ``fileno``, or not a descriptor) is left
    alone, without an error: the child's fork handler must not fail. (Checked in a fresh
    interpreter: in the suite's process, the collector and other tests' threads open and
    close descriptors at any moment.)"""
    code = textwrap.dedent(
        """
        import os
        from fxpay.journals.postgres import _detach

        class NoSocket:
            pass

        class Socket:
            def __init__(self, fd):
                self.fd = fd

            def fileno(self):
                return self.fd

        def open_fds():
            return {int(n) for n in os.listdir("/proc/self/fd")}

        r, w = os.pipe()
        before = open_fds()
        for stand_in in (NoSocket(), Socket(None), Socket(str(w)), Socket(-1)):
            _detach(stand_in)
            assert os.readlink(f"/proc/self/fd/{w}").startswith("pipe:"), stand_in
        _detach(Socket(w))
        assert os.readlink(f"/proc/self/fd/{w}") == os.devnull
        assert open_fds() == before, ("a descriptor was left open (or one closed) by the detach", before, open_fds())
        assert os.readlink(f"/proc/self/fd/{r}").startswith("pipe:"), "another descriptor was touched"
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr


class _NoAutocommit:
    """A DB-API connection whose driver has no ``autocommit``: the journal commits each
    statement itself."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def cursor(self) -> Any:
        return self._conn.cursor()

    def commit(self) -> None:
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()

    def close(self) -> None:
        self._conn.close()

    def fileno(self) -> int:
        return int(self._conn.fileno())


def test_over_a_driver_without_autocommit_each_statement_is_committed(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    """A driver with no ``autocommit`` gets each of the journal's statements committed: the
    claim is on the server, seen by another session, before the request is sent, and the
    result after."""
    psycopg = need("psycopg")
    table = table_name()
    journal = fxpay.PostgresJournal(lambda: _NoAutocommit(psycopg.connect(postgres_server.conninfo)), table=table)
    assert journal.create() is True
    with fxpay_sandbox.client(journal=journal) as c:
        qid = c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="k")
        fxpay_later.flush_all()
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as other:
        rows = other.execute(f'SELECT state, result FROM "{table}" WHERE key = %s', ("k",)).fetchall()
    assert rows == [("done", qid)]


@pytest.mark.parametrize(
    ("extra", "timeout", "connect_timeout", "tcp_user_timeout"),
    [("", 2.5, "3", "2500"), ("", 0.5, "2", "500"), (" connect_timeout=7 tcp_user_timeout=900", 2.5, "7", "900")],
)
def test_a_connection_string_only_libpq_reads_keeps_the_journal_on_psycopg_with_its_timeouts(
    fxpay_sandbox: Any, postgres_server: PostgresServer, extra: str, timeout: float, connect_timeout: str, tcp_user_timeout: str
) -> None:
    """A parameter fxpay's core does not read (``gssencmode``) keeps the journal's storage on
    psycopg, in Python: its keyed calls claim, record and replay there. Its connections get
    the journal's connect timeout (whole seconds, at least 2) and TCP user timeout (the
    journal's, in ms), unless the connection string sets its own."""
    need("psycopg")
    journal = fxpay.PostgresJournal(f"{postgres_server.conninfo} gssencmode=disable{extra}", table=table_name(), timeout=timeout)
    journal.create_table()
    assert journal._store is None  # psycopg's, not the core's
    before = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c:
        first = quote(c, "k")
        assert quote(c, "k") == first  # replayed
    assert requests_to(fxpay_sandbox, QUOTES) == before + 1
    done = journal.get("k")
    assert done is not None
    assert (done.state, done.result) == ("done", first)
    with journal._lock:
        params = [c.conn.info.get_parameters() for c in journal._idle]
    assert params
    for p in params:
        assert (p.get("connect_timeout"), p.get("tcp_user_timeout")) == (connect_timeout, tcp_user_timeout)
    journal.close()


@pytest.mark.parametrize("given", ["callable", "libpq-only string"])
def test_two_journals_of_two_databases_keep_their_results_apart(fxpay_sandbox: Any, postgres_server: PostgresServer, given: str) -> None:
    """A keyed call's result waits for the next commit in a waiting room per place (Python's
    storage: over a callable, or a connection string only libpq reads). A journal over a
    callable is a place of its own, one over a string its string's: two of one table name
    in two databases each write their own result to their own database."""
    psycopg = need("psycopg")
    table = table_name()
    names = [f"apart{time.monotonic_ns()}{n}" for n in "ab"]
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
    conninfos = [postgres_server.conninfo.replace("dbname=postgres", f"dbname={name}") for name in names]
    try:
        journals = []
        for conninfo in conninfos:
            if given == "callable":
                journal = fxpay.PostgresJournal(lambda conninfo=conninfo: psycopg.connect(conninfo), table=table)
            else:
                journal = fxpay.PostgresJournal(f"{conninfo} gssencmode=disable", table=table)
            journal.create_table()
            assert journal._store is None
            journals.append(journal)
        results = []
        for journal, key in zip(journals, "ab", strict=True):
            with fxpay_sandbox.client(journal=journal) as c:
                results.append(quote(c, key))
        for journal in journals:
            journal.close()  # writes the results waiting
        for conninfo, key, result in zip(conninfos, "ab", results, strict=True):
            with psycopg.connect(conninfo) as conn:
                rows = conn.execute(f"SELECT key, state, result FROM \"{table}\" WHERE state <> 'journal'").fetchall()
            assert rows == [(key, "done", result)]
    finally:
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_psycopgs_pool_waits_for_a_connection_given_back_and_fails_closed_after_the_timeout(postgres_server: PostgresServer) -> None:
    """A journal in Python keeps at most ``max_connections`` per process: a call that finds
    them all busy waits for one given back (made no other), and fails closed after the
    journal's timeout if none is."""
    psycopg = need("psycopg")
    table = table_name()
    brief = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table, timeout=0.5)
    brief.create_table()
    brief.max_connections = 1
    busy = brief._checkout("test")
    started = time.monotonic()
    with pytest.raises(fxpay.JournalError, match=r"^PostgresJournal\.get\(\) failed: its 1 connections were busy for 0\.5 s$"):
        brief.get("k")
    assert 0.45 < time.monotonic() - started < 5
    brief._checkin(busy)
    brief.close()
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table, timeout=30.0)
    journal.max_connections = 1
    held = journal._checkout("test")
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(journal.get("k")))
    reader.start()
    time.sleep(0.1)
    assert reader.is_alive(), "it did not wait for the busy connection"
    journal._checkin(held)  # given back: the waiting call takes it
    reader.join(5)
    assert got == [None]
    assert len(journal._mine) == 1  # no second connection was made
    # A connection dropped (its call failed) frees its place: a waiting call makes a new one.
    held = journal._checkout("test")
    reader = threading.Thread(target=lambda: got.append(journal.get("k")))
    reader.start()
    time.sleep(0.1)
    assert reader.is_alive(), "it did not wait for the busy connection"
    journal._discard(held)
    reader.join(5)
    assert not reader.is_alive(), "the waiting call was not told of the place freed"
    assert got == [None, None]
    journal.close()


def test_a_failed_statement_drops_its_connection_and_frees_its_place_in_psycopgs_pool(postgres_server: PostgresServer) -> None:
    """A statement that fails (any error: a transaction may be left open) is a JournalError
    naming the driver's error; its connection is closed, its session ends, and its place in
    the pool is free: with one connection allowed, the next call makes a new one at once."""
    psycopg = need("psycopg")
    name = table_name()
    conninfo = f"{postgres_server.conninfo} application_name={name}"
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(conninfo), table=name, timeout=30.0)
    journal.create_table()
    journal.max_connections = 1

    def sessions() -> int:
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
            assert row is not None
            return int(row[0])

    assert sessions() == 1
    with pytest.raises(fxpay.JournalError, match=r"^PostgresJournal\.probe\(\) failed: DivisionByZero: division by zero"):
        journal._run("probe", ("SELECT 1/0", ()))
    deadline = time.monotonic() + 10
    while sessions() != 0:  # the session ends as its connection closes
        assert time.monotonic() < deadline, "the failed connection's session did not end"
        time.sleep(0.02)
    started = time.monotonic()
    assert journal.get("k") is None
    assert time.monotonic() - started < 5, "the next call waited for the dropped connection's place"
    assert sessions() == 1
    journal.close()


@pytest.mark.parametrize("given", ["callable", "libpq-only string"])
def test_a_server_that_cannot_be_reached_fails_closed_with_the_drivers_error(postgres_server: PostgresServer, given: str) -> None:
    """psycopg's store: a connection that cannot be made is a JournalError naming the call
    and the driver's error; the pool keeps no place for it."""
    psycopg = need("psycopg")
    nowhere = postgres_server.conninfo.replace(f"port={postgres_server.port}", "port=1")
    if given == "callable":
        journal = fxpay.PostgresJournal(lambda: psycopg.connect(nowhere), table=table_name())
    else:
        journal = fxpay.PostgresJournal(f"{nowhere} gssencmode=disable", table=table_name())
    for _ in range(2):
        with pytest.raises(fxpay.JournalError, match=r"^PostgresJournal\.get\(\) failed: OperationalError: ") as e:
            journal.get("k")
        assert isinstance(e.value.__cause__, psycopg.OperationalError)
    assert not journal._mine


class _WithoutFileno:
    """A DB-API connection (psycopg's, wrapped) that offers no ``fileno``, as a stand-in
    driver may: the server's goodbye cannot be looked for, so an idle connection is pinged
    (``SELECT 1``) before it is used. Counts the pings."""

    def __init__(self, conn: Any, pings: list[int]) -> None:
        object.__setattr__(self, "_c", conn)
        object.__setattr__(self, "_pings", pings)

    def __getattr__(self, name: str) -> Any:
        if name == "fileno":
            raise AttributeError(name)
        return getattr(self._c, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._c, name, value)

    def cursor(self) -> Any:
        conn, pings = self._c, self._pings

        class Counting:
            """Makes the driver's cursor as it runs its statement: a ping is counted even
            where the connection turns out closed."""

            real: Any = None
            description = property(lambda self: self.real.description)
            rowcount = property(lambda self: self.real.rowcount)

            def execute(self, sql: str, args: Any = None) -> Any:
                if sql == "SELECT 1":
                    pings.append(1)
                self.real = conn.cursor()
                return self.real.execute(sql, args)

            def fetchall(self) -> Any:
                return self.real.fetchall()

            def close(self) -> None:
                if self.real is not None:
                    self.real.close()

        return Counting()


def test_a_connection_idle_past_ping_after_is_pinged_and_made_anew_if_it_is_gone(
    fxpay_sandbox: Any, postgres_server: PostgresServer
) -> None:
    """Where the server's goodbye cannot be looked for (no ``fileno``), a pooled connection
    idle for longer than ``ping_after`` is tried with ``SELECT 1`` before it is used: one the
    server ended is made anew, and the call neither fails nor reads as unknown. Each use
    renews the connection's idle time; within ``ping_after`` none is pinged."""
    psycopg = need("psycopg")
    pings: list[int] = []
    journal = fxpay.PostgresJournal(lambda: _WithoutFileno(psycopg.connect(postgres_server.conninfo), pings), table=table_name())
    journal.create()
    journal.ping_after = 3600.0
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "first")
        fxpay_later.flush_all()  # its result written now, not by the flusher meanwhile
        backend = backend_pid(journal)
        assert pings == []  # within ping_after: not pinged
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (backend,)).fetchone() == (True,)
        time.sleep(0.05)
        journal.ping_after = 0.01  # every connection taken from the pool is idle longer
        qid = quote(c, "after-idle")  # the ping fails: made anew, not failed
        assert pings, "the idle connection was not pinged"
        done = journal.get("after-idle")
        assert done is not None
        assert done.result == qid
        assert backend_pid(journal) != backend
        journal.ping_after = 3600.0
        fxpay_later.flush_all()
        pooled = journal._idle[-1]  # the next one a call takes (nothing else runs now)
        last = pooled.used_at
        time.sleep(0.2)
        assert journal.get("first") is not None
        assert pooled.used_at >= last + 0.2, "a use did not renew the connection's idle time"
    journal.close()


def test_a_connection_checked_out_across_a_fork_is_never_given_back_to_the_childs_pool(postgres_server: PostgresServer) -> None:
    """The forking thread had a connection of psycopg's pool checked out (a fork from inside
    a call's callback): in the child that connection is the parent's, set aside at the fork,
    and giving it back puts nothing in the child's pool; the child makes its own."""
    psycopg = need("psycopg")
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table_name())
    journal.create_table()
    held = journal._checkout("test")
    parent_backend = held.dbapi.info.backend_pid
    pid = fork_quietly()
    if pid == 0:
        code = 1
        try:
            journal._checkin(held)
            code = 2 if journal._idle or held in journal._mine else 3
            if code == 3 and journal.get("k") is None and backend_pid(journal) != parent_backend:
                code = 0
        finally:
            os._exit(code)
    assert wait_child(pid) == 0
    journal._checkin(held)
    assert journal._idle == [held]  # in the parent it is its own
    assert backend_pid(journal) == parent_backend
    journal.close()


@STORES
def test_entries_reads_many_keys_at_once_and_checks_each(fxpay_sandbox: Any, postgres_server: PostgresServer, store: str) -> None:
    """``entries`` (what a payout's progress reads): the entries of the keys given that
    exist, in one query per 1,000 keys; a key that is not a ``str`` is a TypeError naming it,
    as ``get``'s is; a journal lost under the process is refused, not read as empty."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    journal.create()
    assert (journal._store is None) == bool(store)
    with fxpay_sandbox.client(journal=journal) as c:
        results = [quote(c, f"k{i}") for i in range(3)]
    many = [f"none-{i}" for i in range(1500)] + ["k2", "k0", "missing", "k0"]  # two queries
    got = journal.entries(many)
    assert {k: (e.key, e.state, e.result) for k, e in got.items()} == {
        "k0": ("k0", "done", results[0]),
        "k2": ("k2", "done", results[2]),
    }
    assert journal.entries([]) == {}
    with pytest.raises(TypeError, match="key"):
        journal.entries(["k0", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="key"):
        journal.get(3)  # type: ignore[arg-type]
    need("psycopg").connect(postgres_server.conninfo, autocommit=True).execute(f'TRUNCATE "{journal.table}"').connection.close()
    with pytest.raises(fxpay.JournalError, match="identity row is gone"):
        journal.entries(["k0"])


@STORES
def test_create_with_no_schema_on_the_search_path_asks_for_a_qualified_table(postgres_server: PostgresServer, store: str) -> None:
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store + " options='-csearch_path=nowhere'", table=table_name())
    with pytest.raises(
        fxpay.JournalError, match=r"^PostgresJournal.create\(\): no schema to make the table in .*PostgresJournal\(table='schema.name'\)"
    ):
        journal.create()


@STORES
def test_create_where_the_journal_this_process_opened_was_lost_makes_one_and_refuses_it(
    fxpay_sandbox: Any, postgres_server: PostgresServer, store: str
) -> None:
    """A process that used its journal and then runs ``create()`` after the table was lost
    gets the new journal made for the processes that open it next, and is refused it itself:
    its keys were the lost journal's."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "k")
    sql(postgres_server, f'DROP TABLE "{journal.table}"')
    with pytest.raises(fxpay.JournalError, match="now holds another journal"):
        journal.create()
    fresh = fxpay.PostgresJournal(postgres_server.conninfo + store, table=journal.table)
    assert fresh.get("k") is None
    assert fresh.create() is False


@STORES
def test_a_claim_whose_row_keeps_vanishing_fails_closed(postgres_server: PostgresServer, store: str) -> None:
    """A claim's insert that lands nowhere and finds no row to read (here a trigger drops
    it) is tried again, a few times, then fails closed; other keys are claimed as ever."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    journal.create()
    on_insert_of(postgres_server, journal, "vanishing", "RETURN NULL;")
    with pytest.raises(fxpay.JournalError, match="kept vanishing"):
        journal.claim(pending_entry("vanishing"))
    assert journal.claim(pending_entry("kept")) is None
    assert journal.get("vanishing") is None
    got = journal.get("kept")
    assert got is not None
    assert got.state == "pending"


@STORES
def test_a_claim_whose_row_vanished_once_is_claimed_on_the_next_try(postgres_server: PostgresServer, store: str) -> None:
    """A claim's first insert that lands nowhere and leaves no row to read (here a trigger
    drops the first insert of the key only) is tried again: the second lands, and the claim
    is this call's (None), not another call's entry."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    journal.create()
    t = journal.table
    sql(postgres_server, f'CREATE SEQUENCE "{t}_n"')  # outside any transaction: counts every insert tried
    on_insert_of(postgres_server, journal, "once", f"IF nextval('\"{t}_n\"') = 1 THEN RETURN NULL; END IF; RETURN NEW;")
    claim = pending_entry("once")
    assert journal.claim(claim) is None
    assert sql(postgres_server, f'SELECT last_value FROM "{t}_n"') == [(2,)]  # dropped once, landed on the next try
    assert stored(postgres_server, journal, "once") == ("pending", None)
    assert journal.get("once") == claim


def _done(claim: fxpay.JournalEntry, result: str) -> fxpay.JournalEntry:
    return fxpay.JournalEntry.from_json(json.dumps({**json.loads(claim.to_json()), "state": "done", "result": result}))


@STORES
def test_a_claims_result_swapped_in_by_hand_waits_for_the_next_commit_and_lands(postgres_server: PostgresServer, store: str) -> None:
    """On both stores: a claim's own result swapped in (``pending`` to ``done``) waits for
    the next commit and is read from here meanwhile; a swap of what is stored is written at
    once; a swap of what is no longer stored is False."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + store, table=table_name())
    journal.create()
    claim = pending_entry("k")
    assert journal.claim(claim) is None
    done = _done(claim, "q-1")
    assert journal.swap(claim, done) is True
    assert journal.get("k") == done
    assert journal.swap(claim, _done(claim, "q-0")) is False  # the claim is no longer what is stored
    assert journal.get("k") == done
    read_until(lambda: stored(postgres_server, journal, "k"), ("done", "q-1"), meanwhile=("pending", None))
    replaced = _done(claim, "q-2")
    assert journal.swap(done, replaced) is True
    assert stored(postgres_server, journal, "k") == ("done", "q-2")
    assert journal.swap(done, _done(claim, "q-3")) is False
    assert stored(postgres_server, journal, "k") == ("done", "q-2")
    assert journal.get("k") == replaced


def test_a_claims_commit_carries_the_results_waiting_and_leaves_none_behind(postgres_server: PostgresServer) -> None:
    """On psycopg's store: one claim's commit writes the results waiting with it (one
    statement), and nothing is left waiting or in flight in this process once it landed."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    first = pending_entry("first")
    assert journal.claim(first) is None
    done = _done(first, "q-1")
    assert journal._later.defer("first", first.to_json(), done, done.to_json())  # waits; no flusher woken
    assert journal.claim(pending_entry("second")) is None  # its commit carries the result
    assert stored(postgres_server, journal, "first") == ("done", "q-1")
    assert journal._later.entries() == []


def test_a_result_whose_row_is_locked_is_left_by_the_claims_commit_and_written_after(postgres_server: PostgresServer) -> None:
    """On psycopg's store: a claim's commit does not wait for a result whose row another
    transaction holds locked (``SKIP LOCKED``): the claim lands, and the result waits again
    for the flusher, which writes it once the lock is let go."""
    psycopg = need("psycopg")
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    first = pending_entry("first")
    assert journal.claim(first) is None
    done = _done(first, "q-1")
    with psycopg.connect(postgres_server.conninfo) as holder:
        holder.execute(f"SELECT key FROM \"{journal.table}\" WHERE key = 'first' FOR UPDATE")
        assert journal._later.defer("first", first.to_json(), done, done.to_json())  # waits; no flusher woken
        assert journal.claim(pending_entry("second")) is None  # lands without waiting for the lock
        assert journal.get("first") == done  # read from here meanwhile
        assert stored(postgres_server, journal, "first") == ("pending", None)
        holder.rollback()
    read_until(lambda: stored(postgres_server, journal, "first"), ("done", "q-1"), meanwhile=("pending", None))
    assert journal._later.entries() == []


def stored(server: PostgresServer, journal: fxpay.PostgresJournal, key: str) -> tuple[str, str | None] | None:
    """The state and result the table holds for ``key`` (not what this process reads: its
    journals of one table share the results still waiting)."""
    rows = sql(server, f'SELECT state, result FROM "{journal.table}" WHERE key = %s', key)
    return (rows[0][0], rows[0][1]) if rows else None


def on_insert_of(server: PostgresServer, journal: fxpay.PostgresJournal, key: str, body: str) -> None:
    """A trigger that runs ``body`` (PL/pgSQL) before each insert of ``key`` in the table."""
    t = journal.table
    sql(server, f'CREATE FUNCTION "{t}_{key}"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$')
    assert key.isalnum()  # written into the statement: DDL takes no parameters
    sql(server, f'CREATE TRIGGER "{t}_{key}" BEFORE INSERT ON "{t}" FOR EACH ROW WHEN (NEW.key = \'{key}\') EXECUTE FUNCTION "{t}_{key}"()')


def test_a_failed_claims_commit_gives_its_results_back_to_wait_for_the_flusher(postgres_server: PostgresServer) -> None:
    """On psycopg's store: a claim's commit that fails (here a trigger refuses its insert)
    fails that claim closed, and the results that rode it wait again: the flusher, woken,
    writes them."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    on_insert_of(postgres_server, journal, "boom", "RAISE EXCEPTION 'refused by the test';")
    first = pending_entry("first")
    assert journal.claim(first) is None
    done = _done(first, "q-1")
    assert journal._later.defer("first", first.to_json(), done, done.to_json())  # waits; no flusher woken
    with pytest.raises(fxpay.JournalError, match="refused by the test"):
        journal.claim(pending_entry("boom"))
    read_until(lambda: stored(postgres_server, journal, "first"), ("done", "q-1"), meanwhile=("pending", None))
    assert journal._later.entries() == []


def not_recorded(caplog: pytest.LogCaptureFixture, journal: fxpay.PostgresJournal) -> list[str]:
    """The results logged as not recorded for ``journal``'s table. Only its own: an earlier
    test's journal may log one from the flusher thread while this test runs (a result that
    waited for a table the test dropped)."""
    return [m for r in caplog.records if "could not be recorded" in (m := r.getMessage()) and repr(journal.table) in m]


def test_a_result_whose_claims_lease_lapsed_meanwhile_is_written_over_it(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """On psycopg's store: the flusher's commit finds the key no longer as its claim was
    stored, but still that claim (``unknown``: its lease lapsed while the result waited):
    the result is written over it."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    claim = pending_entry("k")
    assert journal.claim(claim) is None
    lapsed = json.dumps({**json.loads(claim.to_json()), "state": "unknown", "error": "its lease lapsed"})
    sql(postgres_server, f'UPDATE "{journal.table}" SET state = %s, data = %s WHERE key = %s', "unknown", lapsed, "k")
    done = _done(claim, "q-1")
    assert journal._later.defer("k", claim.to_json(), done, done.to_json())
    with caplog.at_level(logging.ERROR, logger="fxpay"):
        journal._flush_results()
    assert stored(postgres_server, journal, "k") == ("done", "q-1")
    assert journal._later.entries() == []
    assert not_recorded(caplog, journal) == []


@pytest.mark.parametrize("meanwhile", ["another claim", "row deleted", "update refused", "settled first"])
def test_a_result_whose_key_changed_otherwise_is_logged_unless_it_was_settled_with_it(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture, meanwhile: str
) -> None:
    """On psycopg's store: the flusher's commit finds the key changed otherwise while the
    result waited. What is stored stands. The result is logged once, with the call that
    settles it, unless the key was settled with that same result (its spot deal's
    notification came first, with the deal id)."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    claim = pending_entry("k")
    assert journal.claim(claim) is None
    mine = json.loads(claim.to_json())
    if meanwhile == "another claim":  # resolved by a person, claimed by another call
        now = json.dumps({**mine, "holder": "a-third-host~boot/7/tok", "created_at": 1_800_000_000_000})
        sql(postgres_server, f'UPDATE "{journal.table}" SET data = %s WHERE key = %s', now, "k")
    elif meanwhile == "row deleted":
        sql(postgres_server, f'DELETE FROM "{journal.table}" WHERE key = %s', "k")
    elif meanwhile == "update refused":  # still its claim (its lease lapsed), but no write lands
        now = json.dumps({**mine, "state": "unknown", "error": "its lease lapsed"})
        sql(postgres_server, f'UPDATE "{journal.table}" SET state = %s, data = %s WHERE key = %s', "unknown", now, "k")
        t = journal.table
        sql(postgres_server, f'CREATE FUNCTION "{t}_keep"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$')
        sql(postgres_server, f'CREATE TRIGGER "{t}_keep" BEFORE UPDATE ON "{t}" FOR EACH ROW EXECUTE FUNCTION "{t}_keep"()')
    else:
        now = json.dumps({**mine, "state": "done", "result": "q-1", "deal_id": "d-1"})
        sql(postgres_server, f'UPDATE "{journal.table}" SET state = %s, result = %s, data = %s WHERE key = %s', "done", "q-1", now, "k")
    before = sql(postgres_server, f'SELECT state, data FROM "{journal.table}" WHERE key = %s', "k")
    done = _done(claim, "q-1")
    assert journal._later.defer("k", claim.to_json(), done, done.to_json())
    with caplog.at_level(logging.ERROR, logger="fxpay"):
        journal._flush_results()
    assert sql(postgres_server, f'SELECT state, data FROM "{journal.table}" WHERE key = %s', "k") == before
    logged = not_recorded(caplog, journal)
    if meanwhile == "settled first":
        assert logged == []
    else:
        assert len(logged) == 1, logged
        assert "journal.resolve('k', result='q-1')" in logged[0]
    assert journal._later.entries() == []


def test_find_reads_a_stored_result_back_to_its_key(postgres_server: PostgresServer) -> None:
    """On psycopg's store: ``find`` of a result the table holds gives its key's entry."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    claim = pending_entry("k")
    assert journal.claim(claim) is None
    done = _done(claim, "q-1")
    assert journal._later.defer("k", claim.to_json(), done, done.to_json())
    journal._flush_results()
    assert journal._later.entries() == []
    assert journal.find("q-1") == done
    assert journal.find("q-2") is None


def test_candidates_are_the_open_keys_less_those_whose_result_is_on_its_way(postgres_server: PostgresServer) -> None:
    """On psycopg's store: the keys ``leased`` (and ``unknown``) look at are those the table
    holds open, less a key whose result this process holds on its way (it reads ``done``)."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo + " gssencmode=disable", table=table_name())
    journal.create()
    a, b = pending_entry("a"), pending_entry("b")
    assert journal.claim(a) is None
    assert journal.claim(b) is None
    done = _done(b, "q-1")
    assert journal._later.defer("b", b.to_json(), done, done.to_json())
    assert [e.key for e in journal.candidates()] == ["a"]
    assert [e.key for e in journal.leased()] == ["a"]


def test_close_writes_the_results_waiting_and_ends_the_free_connections_sessions(postgres_server: PostgresServer) -> None:
    """On psycopg's store: ``close`` writes the results waiting and ends the sessions of its
    free connections, forgetting them; the journal makes new ones on next use."""
    name = f"fxpay-close-{os.getpid()}"
    journal = fxpay.PostgresJournal(postgres_server.conninfo + f" gssencmode=disable application_name={name}", table=table_name())
    journal.create()

    def sessions() -> int:
        return int(sql(postgres_server, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", name)[0][0])

    claim = pending_entry("k")
    assert journal.claim(claim) is None
    done = _done(claim, "q-1")
    assert journal._later.defer("k", claim.to_json(), done, done.to_json())  # waits; no flusher woken
    assert sessions() == 1
    journal.close()
    assert stored(postgres_server, journal, "k") == ("done", "q-1")
    assert (journal._idle, journal._mine) == ([], set())
    read_until(sessions, 0, meanwhile=1)
    assert journal.claim(pending_entry("k2")) is None  # a new connection
    assert sessions() == 1
    journal.close()


RAW_FORK_SCRIPT = textwrap.dedent(
    """
    import ctypes, json, os, sys
    import psycopg
    import fxpay

    journal = fxpay.PostgresJournal(lambda: psycopg.connect(sys.argv[1]), table=sys.argv[2])
    backend = lambda: journal._run("probe", ("SELECT pg_backend_pid()", ()))[1][0][0]
    parent_backend = backend()
    r, w = os.pipe()
    pid = ctypes.CDLL(None).fork()  # libc's own: none of Python's at-fork handlers runs
    if pid == 0:
        try:
            out = {"child_backend": backend(), "child_again": backend()}
        except BaseException as e:
            out = {"error": repr(e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    child = json.loads(os.read(r, 65536))
    print(json.dumps({**child, "parent_backend": parent_backend, "parent_after": backend()}))
    """
)


def test_a_child_forked_without_pythons_at_fork_handlers_still_uses_a_connection_of_its_own(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """A fork that runs none of Python's at-fork handlers (a C library's ``fork()``): the
    journal over Python's storage sees the new pid at its next checkout and sets the parent's
    connections aside, so the child never speaks on the parent's session. (pymutants
    postgres.py 372-373: the pid check in ``_checkout``.)"""
    need("psycopg")
    table = table_name()
    fxpay.PostgresJournal(postgres_server.conninfo, table=table).create_table()
    script = tmp_path / "raw_fork.py"
    script.write_text(RAW_FORK_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), postgres_server.conninfo, table], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.get("error") is None, out
    assert out["child_backend"] != out["parent_backend"]  # a connection of its own
    assert out["child_again"] == out["child_backend"]
    assert out["parent_after"] == out["parent_backend"]  # the parent's session outlived the child

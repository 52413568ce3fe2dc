"""One durable write per keyed call (issue 56 item 1): only the claim reaches the disk before
a byte is sent; the call's result rides the next group commit (the next claim's, or the
journal's own a few milliseconds later, or the process's exit). Counted in the SQLite file
itself: the commit frames of its write-ahead log. And what that costs if the process dies
before the result's commit: the key reads ``pending``, then ``unknown``; never lost, never
sent again. Real SQLite files, the sandbox over loopback, real processes killed."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_elsewhere import Elsewhere, sql_elsewhere

import fxpay

from journal_support import QUOTES, RedisServer, held_call, quote, read_until, requests_to
from postgres_support import PostgresServer, make_postgres_journal, postgres_server, table_name, wal_syncs

__all__ = ["postgres_server"]  # a fixture, imported for the tests below


def wal_commits(path: Path) -> int:
    """Transactions in the write-ahead log of the SQLite file ``path`` (its valid commit
    frames: those whose salts match the log's header and whose "database size after commit"
    is set)."""
    wal = path.with_name(path.name + "-wal").read_bytes()
    if len(wal) < 32:
        return 0
    page_size = struct.unpack(">I", wal[8:12])[0]
    salts = wal[16:24]
    commits, at = 0, 32
    while at + 24 + page_size <= len(wal):
        header = wal[at : at + 24]
        if header[8:16] != salts:
            break
        if struct.unpack(">I", header[4:8])[0] != 0:
            commits += 1
        at += 24 + page_size
    return commits


def test_a_keyed_call_at_a_time_writes_the_journal_once(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = fxpay.SqliteJournal(path)
    calls = 60
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "warm-up")
        before = wal_commits(path)
        ids = [quote(c, f"one-{i}") for i in range(calls)]
        during = wal_commits(path) - before
        # Each result is read back at once in this process, from where it waits.
        assert [quote(c, f"one-{i}") for i in range(calls)] == ids
        assert journal.get("one-0") is not None
        assert journal.get("one-0").state == "done"  # type: ignore[union-attr]
    print(f"{during} commits for {calls} keyed calls at concurrency 1")
    # One commit per call (the claim, carrying the previous call's result), and the
    # flusher's own commits when a call took longer than its delay: never two per call.
    assert during <= calls * 1.25, during
    # Every result reaches the file: another process reads them done.
    out = subprocess.run(
        [sys.executable, "-c", SHOW, str(path), str(calls)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["done"] * calls, out.stdout


def test_a_result_waiting_for_its_commit_is_read_here_but_a_replay_still_claims_on_disk(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Another process holds the file's write lock from the moment the call's claim is on
    disk: the result cannot be committed, yet this process reads it ``done`` (``get``). A
    replay of the key still claims on the file (the journal checks the file is still itself
    with every claim), so while the lock is held it fails closed, nothing sent; once the
    lock goes, the result reaches the file and the replay returns it, nothing sent."""

    path = tmp_path / "j.db"
    journal = fxpay.SqliteJournal(path, timeout=1.0)
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "warm-up")
        locker = Elsewhere(path)
        call, got = held_call(
            fxpay_sandbox, c, "held", lambda: locker.run("SELECT 1 FROM fxpay_journal WHERE key = 'held'"), where="the file"
        )
        locker.run("BEGIN IMMEDIATE")  # every commit of the journal now waits
        try:
            call.join(30)
            assert got, "the call did not end"
            sent = requests_to(fxpay_sandbox, QUOTES)
            held = journal.get("held")
            assert held is not None
            assert (held.state, held.result) == ("done", got[0])  # read from where it waits
            # Every journal of the file in this process reads it there (one waiting room per file).
            other = fxpay.SqliteJournal(path, timeout=1.0).get("held")
            assert other is not None
            assert (other.state, other.result) == ("done", got[0])
            with pytest.raises(fxpay.JournalError):
                quote(c, "held")  # the claim cannot reach the file: fails closed
            assert requests_to(fxpay_sandbox, QUOTES) == sent
            stored = locker.run("SELECT state FROM fxpay_journal WHERE key = 'held'")
            assert stored == [("pending",)]  # not on disk yet
        finally:
            locker.run("ROLLBACK")
            locker.close()
        assert quote(c, "held") == got[0]  # replayed: the result rode this claim's commit
        assert requests_to(fxpay_sandbox, QUOTES) == sent
        out = subprocess.run([sys.executable, "-c", READ, str(path), "held"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["done", got[0]]


SHOW = """
import sys, fxpay
j = fxpay.SqliteJournal(sys.argv[1])
for i in range(int(sys.argv[2])):
    e = j.get(f"one-{i}")
    print(e.state if e else None)
"""


def test_another_process_reads_the_result_within_moments(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """The flusher writes a result on its own when no claim follows it."""
    path = tmp_path / "j.db"
    with fxpay_sandbox.client(journal=fxpay.SqliteJournal(path)) as c:
        q = quote(c, "alone")
        deadline = time.monotonic() + 10
        while True:
            out = subprocess.run([sys.executable, "-c", READ, str(path), "alone"], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            if out.stdout.split() == ["done", q]:
                break
            assert out.stdout.split()[0] == "pending", out.stdout
            assert time.monotonic() < deadline, out.stdout
            time.sleep(0.05)


def test_flush_all_returns_once_the_flushers_commit_in_flight_has_landed(
    fxpay_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flush_all`` (a payout's end, the exit's) writes every result waiting, and one that
    the flusher's commit already carries counts: it returns only once that commit landed
    (here the commit waits for another process's write lock)."""
    import threading

    import fxpay._later

    monkeypatch.setattr(fxpay._later, "RESULT_DELAY", 0.3)  # read when the journal is opened
    path = tmp_path / "j.db"
    with fxpay_sandbox.client(journal=fxpay.SqliteJournal(path)) as c, Elsewhere(path) as locker:
        q = quote(c, "k")  # its claim on disk, its result waiting 0.3 s for the flusher
        locker.run("BEGIN IMMEDIATE")  # the write lock: the flusher's commit waits on it
        assert sql_elsewhere(path, "SELECT state FROM fxpay_journal WHERE key = 'k'") == [("pending",)]
        time.sleep(0.6)  # the flusher has taken the result (were it not, flush_all waits too)
        flushed = threading.Event()
        flushing = threading.Thread(target=lambda: (fxpay._later.flush_all(), flushed.set()))
        flushing.start()
        assert not flushed.wait(0.5), "flush_all returned while the flusher's commit was in flight"
        assert sql_elsewhere(path, "SELECT state FROM fxpay_journal WHERE key = 'k'") == [("pending",)]
        locker.run("ROLLBACK")
        assert flushed.wait(10), "flush_all did not return once the commit could land"
        flushing.join()
        # The moment it returned, the result is on disk.
        assert sql_elsewhere(path, "SELECT state, result FROM fxpay_journal WHERE key = 'k'") == [("done", q)]


READ = """
import sys, fxpay
e = fxpay.SqliteJournal(sys.argv[1]).get(sys.argv[2])
print(e.state, e.result)
"""

KILLED = textwrap.dedent(
    """
    import os, sys, time
    import fxpay, fxpay._later
    fxpay._later.RESULT_DELAY = 3600.0  # no commit carries the result before the kill
    path, base, cid, secret = sys.argv[1:5]
    c = fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(path))
    q = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="killed")
    print(q, flush=True)
    time.sleep(3600)
    """
)

EXITS = textwrap.dedent(
    """
    import sys
    import fxpay, fxpay._later
    fxpay._later.RESULT_DELAY = 3600.0  # only the exit writes the result
    path, base, cid, secret = sys.argv[1:5]
    c = fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(path))
    q = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="exits")
    print(q, flush=True)
    """
)


def test_a_process_killed_before_its_results_commit_leaves_the_key_unknown_never_lost(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    fxpay.SqliteJournal(path)  # made before the worker opens it
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    args = [str(path), fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    p = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        made = p.stdout.readline().strip()
        assert made, p.stderr.read() if p.stderr else ""
        journal = fxpay.SqliteJournal(path)
        entry = journal.get("killed")
        assert entry is not None
        assert entry.state == "pending"  # the claim is on disk; the result waits in the worker
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.kill()
        p.wait(30)
    sent = requests_to(fxpay_sandbox, QUOTES)
    # The holder is gone: the key is unknown, and a second call sends nothing.
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.OutcomeUnknownError):
        quote(c, "killed")
    assert requests_to(fxpay_sandbox, QUOTES) == sent
    assert [e.key for e in journal.unknown()] == ["killed"]
    settled = journal.resolve("killed", result=made)
    assert settled.state == "done"


def test_a_process_that_exits_writes_its_waiting_results(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    script = tmp_path / "exits.py"
    script.write_text(EXITS)
    args = [str(path), fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    entry = fxpay.SqliteJournal(path).get("exits")
    assert entry is not None
    assert (entry.state, entry.result) == ("done", out.stdout.strip())


def test_a_forked_worker_writes_its_results_before_it_ends(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """multiprocessing's children end with os._exit, past atexit: their own finalizer writes."""
    path = tmp_path / "j.db"
    script = tmp_path / "pool.py"
    script.write_text(POOL)
    args = [str(path), fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ids = out.stdout.split()
    assert len(ids) == 4, out.stdout
    journal = fxpay.SqliteJournal(path)
    got = [journal.get(f"pool-{i}") for i in range(4)]
    assert [(e.state, e.result) if e else None for e in got] == [("done", q) for q in ids]


POOL = textwrap.dedent(
    """
    import multiprocessing, sys
    import fxpay, fxpay._later

    def pay(i):
        fxpay._later.RESULT_DELAY = 3600.0  # only the worker's end writes the result
        path, base, cid, secret = sys.argv[1:5]
        c = fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(path))
        q = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key=f"pool-{i}")
        return q

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2, maxtasksperchild=1) as pool:
            ids = pool.map(pay, range(4))
            pool.close()
            pool.join()
        print(*ids)
    """
)


FORKS = textwrap.dedent(
    """
    import os, signal, sys, time
    import fxpay, fxpay._later
    fxpay._later.RESULT_DELAY = 3600.0  # the parent's result still waits when it forks
    path, base, cid, secret, kind = sys.argv[1:6]
    if kind == "sqlite":
        journal = fxpay.SqliteJournal(path)
    else:  # "conninfo|table": the core's store, or psycopg's for a string only libpq reads
        conninfo, table = path.split("|")
        journal = fxpay.PostgresJournal(conninfo + ("" if kind == "postgres" else " gssencmode=disable"), table=table)
    c = fxpay.Client(cid, secret, base_url=base, journal=journal)
    q = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="forks")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child = fxpay.Client(cid, secret, base_url=base, journal=journal)
            again = child.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="forks")
            code = 0 if again == q else 2
        except BaseException as e:
            print("child:", type(e).__name__, e, file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60  # a hung child is killed, not left behind
    while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    if not done[0]:
        os.kill(pid, signal.SIGKILL)
        done = os.waitpid(pid, 0)
    print(q, os.waitstatus_to_exitcode(done[1]), flush=True)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "postgres-psycopg"])
def test_a_forked_child_replays_the_result_its_parent_still_holds(
    fxpay_sandbox: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """The parent forks while its call's result waits for a commit (the journal holds its
    claim, ``pending``, its holder alive): the child's replay of the key returns that result
    and sends nothing, instead of finding the parent's claim in flight. SQLite; PostgreSQL
    with the core's store (its fork hook hands the child what waits) and with psycopg's."""
    if kind == "sqlite":
        path = str(tmp_path / "j.db")
        fxpay.SqliteJournal(path)

        def journal() -> Any:
            return fxpay.SqliteJournal(path)

    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        made = make_postgres_journal(server)
        path = f"{server.conninfo}|{made.table}"

        def journal() -> Any:
            return fxpay.PostgresJournal(server.conninfo, table=made.table)

    script = tmp_path / "forks.py"
    script.write_text(FORKS)
    sent = requests_to(fxpay_sandbox, QUOTES)
    args = [path, fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret, kind]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    q, child = out.stdout.split()
    assert child == "0", out.stderr
    assert requests_to(fxpay_sandbox, QUOTES) == sent + 1  # the parent's only
    entry = journal().get("forks")
    assert entry is not None
    assert (entry.state, entry.result) == ("done", q)  # the parent wrote it at its exit


LATE = textwrap.dedent(
    """
    import multiprocessing, multiprocessing.util, sys
    import fxpay, fxpay._later

    def client():
        path, base, cid, secret = sys.argv[1:5]
        return fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(path))

    def late():
        q = client().create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="late")
        print(q, flush=True)

    def work(i):
        fxpay._later.RESULT_DELAY = 3600.0  # only a write at once lands before the worker ends
        client().create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="first")
        # The worker's own finalizer, after fxpay's (priority 100): a keyed call at its very end.
        multiprocessing.util.Finalize(None, late, exitpriority=1)
        return i

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(1, maxtasksperchild=1) as pool:
            pool.map(work, [0])
            pool.close()
            pool.join()
    """
)


def test_a_keyed_call_after_a_workers_exit_flush_writes_its_result_at_once(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A keyed call made by a worker's finalizer that runs after fxpay's own exit flush: its
    result no longer waits for a commit that nothing would make (the worker ends with
    ``os._exit``; the flusher is a daemon thread)."""
    path = tmp_path / "j.db"
    script = tmp_path / "late.py"
    script.write_text(LATE)
    args = [str(path), fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), out.stderr
    journal = fxpay.SqliteJournal(path)
    entries = [journal.get(k) for k in ("first", "late")]
    assert [e.state if e else None for e in entries] == ["done", "done"]
    assert entries[1] is not None
    assert entries[1].result == out.stdout.strip()


# -- Redis: the result rides the next claim's round trip ---------------------------------------


@pytest.fixture
def redis_journal(tmp_path: Path) -> Iterator[tuple[RedisServer, fxpay.RedisJournal]]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        journal = fxpay.RedisJournal(server.url, prefix="one:")
        journal.create()
        yield server, journal
    finally:
        server.stop()


def redis_round_trips(server: RedisServer) -> int:
    import redis

    probe = redis.Redis.from_url(server.url)
    try:
        n: int = probe.info("stats")["total_reads_processed"]
        return n
    finally:
        probe.close()


def test_a_keyed_call_at_a_time_makes_one_redis_round_trip(
    fxpay_sandbox: Any, redis_journal: tuple[RedisServer, fxpay.RedisJournal]
) -> None:
    """Redis with ``appendfsync always`` writes and fsyncs its AOF once per round of the
    commands it read together: one round trip per keyed call is one AOF flush per call."""
    server, journal = redis_journal
    calls = 60
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "warm-up")
        before = redis_round_trips(server)
        ids = [quote(c, f"one-{i}") for i in range(calls)]
        during = redis_round_trips(server) - before - 1  # less the probe's own
        assert [quote(c, f"one-{i}") for i in range(calls)] == ids
    print(f"{during} Redis round trips for {calls} keyed calls at concurrency 1")
    assert during <= calls * 1.25, during
    other = fxpay.RedisJournal(server.url, prefix="one:")
    deadline = time.monotonic() + 10
    while [getattr(other.get(f"one-{i}"), "state", None) for i in range(calls)] != ["done"] * calls:
        assert time.monotonic() < deadline
        time.sleep(0.05)


REDIS_KILLED = textwrap.dedent(
    """
    import sys, time
    import fxpay, fxpay._later
    fxpay._later.RESULT_DELAY = 3600.0  # no round trip carries the result before the kill
    url, base, cid, secret = sys.argv[1:5]
    c = fxpay.Client(cid, secret, base_url=base, journal=fxpay.RedisJournal(url, prefix="one:"))
    q = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key=sys.argv[5])
    print(q, flush=True)
    if sys.argv[6] == "kill":
        time.sleep(3600)
    """
)


def killed_then_exits(fxpay_sandbox: Any, journal: Any, script: Path, args: list[str]) -> None:
    """``script`` (given ``args``, a key and ``kill`` or ``exit``) makes a keyed call whose
    result waits for the journal's next commit. Killed before that commit, its key stays the
    claim: in progress while its holder's lease lasts, nothing sent again (then unknown, never
    lost). A process that exits normally writes what waits."""
    p = subprocess.Popen([sys.executable, str(script), *args, "killed", "kill"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        made = p.stdout.readline().strip()
        assert made, p.stderr.read() if p.stderr else ""
        entry = journal.get("killed")
        assert entry is not None
        assert entry.state == "pending"
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.kill()
        p.wait(30)
    sent = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.InProgressError):
        quote(c, "killed")
    assert requests_to(fxpay_sandbox, QUOTES) == sent
    entry = journal.get("killed")
    assert entry is not None
    assert entry.state == "pending"
    out = subprocess.run([sys.executable, str(script), *args, "exits", "exit"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    exited = journal.get("exits")
    assert exited is not None
    assert (exited.state, exited.result) == ("done", out.stdout.strip())


def test_a_redis_result_killed_before_its_round_trip_stays_pending_and_one_that_exits_is_written(
    fxpay_sandbox: Any, redis_journal: tuple[RedisServer, fxpay.RedisJournal], tmp_path: Path
) -> None:
    server, journal = redis_journal
    script = tmp_path / "killed.py"
    script.write_text(REDIS_KILLED)
    args = [server.url, fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    killed_then_exits(fxpay_sandbox, journal, script, args)


# -- PostgreSQL: the results waiting are written in one statement ------------------------------

POSTGRES_KILLED = textwrap.dedent(
    """
    import sys, time
    import fxpay, fxpay._later
    fxpay._later.RESULT_DELAY = 3600.0  # no commit carries the result before the kill
    conninfo, table, base, cid, secret = sys.argv[1:6]
    journal = fxpay.PostgresJournal(conninfo, table=table)
    assert journal._store is not None  # the core's store
    c = fxpay.Client(cid, secret, base_url=base, journal=journal)
    q = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key=sys.argv[6])
    print(q, flush=True)
    if sys.argv[7] == "kill":
        time.sleep(3600)
    """
)


def test_a_postgres_result_killed_before_its_commit_stays_pending_and_one_that_exits_is_written(
    fxpay_sandbox: Any, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """The core's PostgreSQL store: a result waits for the next commit; the process killed
    first leaves the key its claim (pending, then unknown once the lease lapses), never lost
    and never sent again; a process that exits writes what waits."""
    journal = make_postgres_journal(postgres_server)
    script = tmp_path / "killed.py"
    script.write_text(POSTGRES_KILLED)
    args = [postgres_server.conninfo, journal.table, fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret]
    killed_then_exits(fxpay_sandbox, journal, script, args)


def test_postgres_flushes_its_wal_about_once_per_keyed_call(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    """``pg_stat_wal.wal_sync``: the server's own count of WAL flushes to disk."""
    journal = fxpay.PostgresJournal(postgres_server.conninfo, table=table_name())
    journal.create()
    calls = 60
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "warm-up")
        # A server process counts its flushes into pg_stat_wal when its session ends (or
        # at most once a second): the journal's sessions are ended before each reading.
        journal.close()
        before = wal_syncs(postgres_server)
        ids = [quote(c, f"one-{i}") for i in range(calls)]
        assert [quote(c, f"one-{i}") for i in range(calls)] == ids
        held = journal.get("one-0")
        assert held is not None
        assert held.state == "done"
        journal.close()  # writes the last results, and ends the sessions
        during = wal_syncs(postgres_server) - before
    print(f"{during} WAL flushes for {calls} keyed calls at concurrency 1 (and {calls} replays)")
    assert during <= calls * 1.25, during
    other = fxpay.PostgresJournal(postgres_server.conninfo, table=journal.table)
    assert [getattr(other.get(f"one-{i}"), "result", None) for i in range(calls)] == ids


def test_a_notification_that_settles_the_key_before_the_calls_result_lands_wins(
    fxpay_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A spot deal's ``DealCreated`` settles its key (done, with the deal id) before the
    call's own result (done, no deal id yet) is handed to the journal, as a receiver in
    another process does when the notification outruns the answer: the result waits, yet the
    key reads the notification's entry at once; the result, written later, finds the key
    settled and leaves it as it is, with no error logged; a replay sends nothing."""
    import json
    import logging

    import fxpay._later as later

    import webhook_support as tw
    from journal_support import deal_args

    monkeypatch.setattr(later, "RESULT_DELAY", 5.0)  # what may wait surely waits
    path = tmp_path / "j.db"
    receiver = fxpay.SqliteJournal(path)  # the receiver's, as another process would open it

    class NotifiedFirst(fxpay.SqliteJournal):
        """The call's journal: the notification is settled just before the call's result."""

        def swap(self, old: fxpay.JournalEntry, new: fxpay.JournalEntry) -> bool:
            if old.state == "pending" and new.state == "done" and new.operation == "create_spot_deal":
                (deal,) = fxpay_sandbox.deals()
                body = tw.dumps(tw.success(deal["processId"], dealId=deal["dealId"]))
                fxpay.settle_deal_created(body, {"callback-nonce": json.loads(old.to_json())["nonce"]}, journal=receiver)
                on_disk.append(sql_elsewhere(path, "SELECT state FROM fxpay_journal WHERE key = ?", old.key))
            return super().swap(old, new)

    on_disk: list[Any] = []  # what the file held once the notification was settled
    journal = NotifiedFirst(path)
    hook = "http://127.0.0.1:9/hook"  # the sandbox's own delivery goes nowhere: settled above
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        with caplog.at_level(logging.ERROR):
            spot = c.create_spot_deal(**args, callback_url=hook, idempotency_key="early")
            assert on_disk == [[("done",)]]  # the notification's settle never waits
            (deal,) = fxpay_sandbox.deals()
            settled = ("done", spot.process_id, deal["dealId"])
            for j in (journal, receiver):
                e = j.get("early")
                assert e is not None
                assert (e.state, e.result, e.deal_id) == settled
            journal.close()  # what waits is written now: it finds the key settled
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        e = journal.get("early")
        assert e is not None
        assert (e.state, e.result, e.deal_id) == settled
        assert c.create_spot_deal(**args, callback_url=hook, idempotency_key="early").process_id == spot.process_id
        assert requests_to(fxpay_sandbox, "POST /v1/payments/deals/spot") == 1


def _rewrite_waiting_claim(path: Path, key: str, **fields: object) -> None:
    """Changes, in the file, the claim of ``key`` whose result waits in this process, as
    another process would (the JSON entry and its ``state`` column alike)."""
    import json

    ((data,),) = sql_elsewhere(path, "SELECT data FROM fxpay_journal WHERE key = ?", key)
    entry = json.loads(data)
    assert entry["state"] == "pending"
    entry.update(fields)
    sql_elsewhere(path, "UPDATE fxpay_journal SET state = ?, data = ? WHERE key = ?", entry["state"], json.dumps(entry), key)


def test_a_waiting_result_whose_claim_lapsed_to_unknown_is_written_over_it(
    fxpay_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """While the result waits, another process marks the key ``unknown`` (its lease lapsed):
    the entry is still this call's claim, so the result is written over it, with no error."""
    import logging

    import fxpay._later as later

    monkeypatch.setattr(later, "RESULT_DELAY", 5.0)  # what may wait surely waits
    path = tmp_path / "j.db"
    journal = fxpay.SqliteJournal(path)
    with fxpay_sandbox.client(journal=journal) as c, caplog.at_level(logging.ERROR):
        q = quote(c, "lapsed")
        _rewrite_waiting_claim(path, "lapsed", state="unknown")
        journal.close()  # what waits is written now: it finds its claim unknown
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    e = fxpay.SqliteJournal(path).get("lapsed")
    assert e is not None
    assert (e.state, e.result) == ("done", q)


def test_a_waiting_result_whose_key_another_claim_took_is_not_written_over_it(
    fxpay_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """While the result waits, another holder's claim replaces the key's entry: the result
    is not written over that claim; it is logged, with its id, for ``resolve``."""
    import logging

    import fxpay._later as later

    monkeypatch.setattr(later, "RESULT_DELAY", 5.0)
    path = tmp_path / "j.db"
    journal = fxpay.SqliteJournal(path)
    with fxpay_sandbox.client(journal=journal) as c, caplog.at_level(logging.ERROR):
        q = quote(c, "taken")
        _rewrite_waiting_claim(path, "taken", holder="another-host/1/abc")
        journal.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert "'taken'" in errors[0], errors
    assert q in errors[0], errors
    e = fxpay.SqliteJournal(path).get("taken")
    assert e is not None
    assert (e.state, e.holder) == ("pending", "another-host/1/abc")


def test_one_flusher_thread_writes_the_results_of_many_calls(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Each result waiting wakes the process's one flusher thread; none is started per call."""

    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    with fxpay_sandbox.client(journal=journal) as c:
        for i in range(5):
            quote(c, f"many-{i}")
            time.sleep(0.1)  # past RESULT_DELAY: each result wakes the flusher anew
    # The flusher is a thread of fxpay's core (SqliteJournal's storage is Rust): named in
    # the kernel's list of this process's threads, cut to 15 bytes.
    names = [p.read_text().strip() for p in Path("/proc/self/task").glob("*/comm")]
    flushers = [n for n in names if n == "fxpay-journal-results"[:15]]
    assert len(flushers) == 1, names


TWICE = textwrap.dedent(
    """
    import json, sys
    import fxpay, fxpay._later
    fxpay._later.RESULT_DELAY = 3600.0  # the first result surely still waits
    journal = fxpay.SqliteJournal(sys.argv[1])
    claim = {
        "key": "twice", "operation": "create_quote", "state": "pending", "result": None, "deal_id": None,
        "created_at": 1_700_000_000_000, "updated_at": 1_700_000_000_000, "error": None,
        "holder": "another-host~boot/4242/tok", "lease_until": 4_102_444_800_000, "fingerprint": "00" * 32,
        "response": None, "nonce": None, "request": None,
    }
    assert journal.claim(fxpay.JournalEntry.from_json(json.dumps(claim))) is None
    stored = journal.get("twice")
    first = fxpay.JournalEntry.from_json(json.dumps({**claim, "state": "done", "result": "first"}))
    second = fxpay.JournalEntry.from_json(json.dumps({**claim, "state": "done", "result": "second"}))
    print(journal.swap(stored, first))  # waits for the next commit
    found = journal.find("first")  # found where it waits
    print(found.state if found else None)
    print(journal.swap(stored, second))  # the claim is no longer there
    print(journal.get("twice").result)
    """
)


def test_a_second_result_for_a_claim_whose_first_result_waits_is_refused(tmp_path: Path) -> None:
    """Through the journal's own methods: a claim's result waits for the next commit; a
    second swap of that same claim answers False (the first is written first, and the claim
    is gone) instead of replacing or dropping it; ``find`` sees the waiting result."""
    path = tmp_path / "j.db"
    script = tmp_path / "twice.py"
    script.write_text(TWICE)
    out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "done", "False", "first"]
    e = fxpay.SqliteJournal(path).get("twice")
    assert e is not None
    assert (e.state, e.result) == ("done", "first")


def test_results_that_landed_leave_nothing_behind(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A long-lived process keeps nothing per call once its results are written: no entry
    waiting or in flight, no exit finalizer registered again for each result."""
    import multiprocessing.util

    import fxpay._later as later

    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "left-0")  # the process's first result registers its one finalizer
        registered = len(multiprocessing.util._finalizer_registry)  # type: ignore[attr-defined]
        for i in range(1, 6):
            quote(c, f"left-{i}")
        later.flush_all()
        assert (journal._store.diagnostic("writes_waiting"), journal._store.diagnostic("results_waiting")) == ("0", "0")
        assert len(multiprocessing.util._finalizer_registry) == registered  # type: ignore[attr-defined]


def test_a_redis_result_that_lands_while_get_reads_the_store_reads_done(
    fxpay_sandbox: Any, redis_journal: tuple[RedisServer, fxpay.RedisJournal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the fork stress (tests/stress/README.md, 1 child in 3,000): a child's own key
    read ``pending`` right after its call returned. ``get`` read the store (the claim), the
    flusher landed the result, and only then ``get`` looked for the result waiting here:
    gone from both. The result is looked up before the store is read. Here the result lands
    inside that read, every time. (A journal over a redis-py client, whose reads this test
    steps into; one made from a URL keeps its storage in Rust, where
    ``journal::redis::tests::a_result_that_lands_while_get_reads_redis_reads_done`` does the same.)"""
    import redis

    from fxpay._later import _Later

    server, _ = redis_journal
    journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="one:")
    c = fxpay_sandbox.client(journal=journal)
    quote(c, "first")
    read_until(lambda: getattr(journal.get("first"), "state", None), "done", meanwhile=lambda: None)
    done = json.loads(journal.get("first").to_json())  # type: ignore[union-attr]
    done["key"] = "second"
    claim = fxpay.JournalEntry.from_json(json.dumps({**done, "state": "pending", "result": None}))
    result = fxpay.JournalEntry.from_json(json.dumps(done))
    real_get = journal._r.get
    landed = []

    def get_then_land(name: Any) -> Any:
        raw = real_get(name)
        if not landed:
            landed.append(True)
            journal._flush_results()  # the flusher's turn, between the read and the look-up
        return raw

    with _Later.due:  # the flusher thread cannot take the result meanwhile (this thread can: an RLock)
        assert journal.claim(claim) is None
        assert journal.swap(claim, result)
        assert journal._later.get("second") is not None, "the result waits for the next commit"
        monkeypatch.setattr(journal._r, "get", get_then_land)
        got = journal.get("second")
    assert landed
    assert got is not None
    assert got.state == "done", got

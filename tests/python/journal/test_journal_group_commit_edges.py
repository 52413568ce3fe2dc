"""The edges of the group commit of RedisJournal's and PostgresJournal's claims
(``fxpay._group_commit``, issue 55's mutation run): what ``_GroupCommit.run`` promises its
two journals, checked on the class itself with a ``commit`` that records its batches (the
journals' own commits are a Redis pipeline and one PostgreSQL statement; the tests of
``test_journal_group_commit.py`` run those on real servers), and one consequence on a real
PostgreSQL: two claims of one key in one statement would both be taken as made.

- commits never overlap: a claim that comes while a commit runs waits for it, then its own
  commit takes every claim waiting, and a claim committed by another thread's commit returns
  without a commit of its own;
- a batch holds one claim per key: the second claim of a key waits for the next commit;
- a commit that raises fails each claim in it with that exception; an interrupt of the
  leader's thread is the leader's own, the others fail closed (``JournalError``);
- a claim the commit gave no answer keeps ``reply`` ``UNANSWERED`` and ``claimed`` False;
- a leader that knows of calls in flight waits for them up to the commit delay, and no
  longer when none of them claims again; a call in flight past the horizon is forgotten.

Thread hand-offs use events and the queue's length (never sleeps as synchronisation); the
deadlines are generous (10-30 s) and only reached when the code is wrong.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import fxpay
import fxpay._group_commit as group_commit
from fxpay._group_commit import UNANSWERED, _Claim, _GroupCommit

from conftest import need
from journal_support import pending_entry
from postgres_support import PostgresServer, postgres_server, sql, table_name

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

WAIT = 30.0  # what a thread is given before the test fails: reached only by a wrong code


class Recorder:
    """A ``commit`` for :meth:`_GroupCommit.run` that records each batch's keys and the
    thread that ran it, marks every claim made (``reply`` None, ``claimed`` True, as
    Redis's SET NX and PostgreSQL's insert), and can hold its first commit open until
    :attr:`release` is set. ``fail(n, exc)`` makes the n-th commit (0-based) raise ``exc``."""

    def __init__(self, hold_first: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.leaders: list[threading.Thread] = []
        self.entered = threading.Event()  # the first commit is running
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()
        self._fail: dict[int, BaseException] = {}

    def fail(self, n: int, exc: BaseException) -> None:
        self._fail[n] = exc

    def __call__(self, batch: list[_Claim]) -> None:
        with self._lock:
            n = len(self.batches)
            self.batches.append([c.key for c in batch])
            self.leaders.append(threading.current_thread())
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if n == 0:
                self.entered.set()
                assert self.release.wait(WAIT), "the first commit was never released"
            if n in self._fail:
                raise self._fail[n]
            for c in batch:
                c.reply = None
                c.claimed = True
        finally:
            with self._lock:
                self.running -= 1


class Caller(threading.Thread):
    """A thread that runs one claim of ``key`` through ``group``; ``got`` is what ``run``
    returned or ``raised`` what it raised (an interrupt included)."""

    def __init__(self, group: _GroupCommit, key: str, commit: Callable[[list[_Claim]], None]) -> None:
        super().__init__(daemon=True, name=f"claim-{key}")
        self.group, self.claim, self.commit = group, _Claim(key, None), commit
        self.got: _Claim | None = None
        self.raised: BaseException | None = None

    def run(self) -> None:
        try:
            self.got = self.group.run(self.claim, self.commit)
        except BaseException as e:  # looked at by the test
            self.raised = e

    def finish(self) -> None:
        self.join(WAIT)
        assert not self.is_alive(), f"{self.name} still waits for its commit"


def _queued(group: _GroupCommit, n: int) -> None:
    """Waits until ``n`` claims wait in ``group``'s queue (the leader's commit is held)."""
    deadline = time.monotonic() + WAIT
    while True:
        with group._lock:
            if len(group._queue) >= n:
                return
        assert time.monotonic() < deadline, f"{n} claims never queued"
        time.sleep(0.002)


def _held_leader(group: _GroupCommit, rec: Recorder, key: str = "a") -> Caller:
    """A leader whose commit of ``key`` is running and held open by ``rec``."""
    leader = Caller(group, key, rec)
    leader.start()
    assert rec.entered.wait(WAIT), "the first claim's commit never started"
    return leader


def test_a_claim_that_comes_while_a_commit_runs_waits_for_it() -> None:
    """Two commits never run at once: the second claim's commit starts after the first ended."""
    group, rec = _GroupCommit(), Recorder(hold_first=True)
    leader = _held_leader(group, rec)
    second = Caller(group, "b", rec)
    second.start()
    _queued(group, 1)
    second.join(0.5)  # it would lead a commit of its own at once if it did not wait
    assert second.is_alive(), rec.batches
    assert rec.batches == [["a"]]
    rec.release.set()
    leader.finish()
    second.finish()
    assert rec.batches == [["a"], ["b"]]
    assert rec.most_at_once == 1
    assert (leader.raised, second.raised) == (None, None)
    assert leader.got is leader.claim
    assert second.got is second.claim
    assert second.claim.claimed
    assert second.claim.reply is None


def test_claims_that_waited_together_share_one_commit_and_lead_no_other() -> None:
    """The claims that queued while a commit ran go in the next commit, together, and only
    once: the one led by the first of them; the others return, committed, without leading a
    commit (of nothing, or of the claims already committed) of their own."""
    group, rec = _GroupCommit(), Recorder(hold_first=True)
    leader = _held_leader(group, rec)
    waiting = [Caller(group, k, rec) for k in ("b", "c", "d")]
    for n, w in enumerate(waiting, 1):
        w.start()
        _queued(group, n)
    rec.release.set()
    leader.finish()
    for w in waiting:
        w.finish()
    assert [sorted(b) for b in rec.batches] == [["a"], ["b", "c", "d"]], rec.batches
    assert all(w.raised is None and w.got is w.claim and w.claim.claimed for w in waiting)
    # Nothing is left waiting: a later claim is committed alone.
    late = Caller(group, "e", rec)
    late.start()
    late.finish()
    assert rec.batches[2:] == [["e"]]


def test_a_second_claim_of_a_key_waits_for_the_next_commit() -> None:
    """A batch holds one claim per key: of two claims of ``k`` waiting together, the first
    goes with ``j`` in one commit, the second in the commit after, and neither is lost."""
    group, rec = _GroupCommit(), Recorder(hold_first=True)
    leader = _held_leader(group, rec)
    waiting = [Caller(group, k, rec) for k in ("k", "k", "j")]
    for n, w in enumerate(waiting, 1):
        w.start()
        _queued(group, n)
    rec.release.set()
    leader.finish()
    for w in waiting:
        w.finish()
    assert [sorted(b) for b in rec.batches] == [["a"], ["j", "k"], ["k"]], rec.batches
    assert all(w.raised is None and w.got is w.claim for w in waiting)


def test_a_leader_whose_key_an_earlier_claim_waiting_has_commits_its_own_claim() -> None:
    """The leader's batch holds its own claim, even when a claim of the same key waits ahead
    of it in the queue (its thread was woken by the last commit's end and has not run yet):
    the leader never returns with its claim uncommitted (RedisJournal's call then failed
    with "the commit gave no answer" instead of finding the other claim of its key)."""
    group, rec = _GroupCommit(), Recorder()
    ahead = _Claim("k", None)
    with group._lock:
        group._queue.append(ahead)  # its thread, woken, has not taken the lock yet
    mine = _Claim("k", None)
    got = group.run(mine, rec)
    assert got is mine
    assert (got.done, got.claimed, got.reply) == (True, True, None), (got.done, got.claimed, got.reply)
    assert rec.batches == [["k"]]
    assert group._queue == [ahead]
    assert not ahead.done
    t = Caller(group, "other", rec)  # the next claim's leader commits it
    t.start()
    t.finish()
    assert ahead.done
    assert [sorted(b) for b in rec.batches[1:]] == [["k", "other"]], rec.batches


def test_a_failed_commit_raises_its_exception_in_every_claim_of_it() -> None:
    group, rec = _GroupCommit(), Recorder(hold_first=True)
    boom = ConnectionError("the store went away")
    rec.fail(1, boom)
    leader = _held_leader(group, rec)
    waiting = [Caller(group, k, rec) for k in ("b", "c")]
    for n, w in enumerate(waiting, 1):
        w.start()
        _queued(group, n)
    rec.release.set()
    leader.finish()
    for w in waiting:
        w.finish()
    assert [sorted(b) for b in rec.batches] == [["a"], ["b", "c"]], rec.batches
    assert leader.raised is None
    assert [w.raised for w in waiting] == [boom, boom]
    assert not any(w.claim.claimed for w in waiting)
    # The group commit goes on: the next claim is committed.
    late = Caller(group, "d", rec)
    late.start()
    late.finish()
    assert late.raised is None
    assert late.claim.claimed


def test_an_interrupt_of_the_leaders_commit_is_its_own_and_the_others_fail_closed() -> None:
    """A ``KeyboardInterrupt`` raised in the leader's commit is raised in the leader's thread
    only; the other claims of its batch fail with ``JournalError`` (nothing was sent)."""
    group, rec = _GroupCommit(), Recorder(hold_first=True)
    interrupt = KeyboardInterrupt()
    rec.fail(1, interrupt)
    leader = _held_leader(group, rec)
    waiting = [Caller(group, k, rec) for k in ("b", "c")]
    for n, w in enumerate(waiting, 1):
        w.start()
        _queued(group, n)
    rec.release.set()
    leader.finish()
    for w in waiting:
        w.finish()
    assert [sorted(b) for b in rec.batches] == [["a"], ["b", "c"]], rec.batches
    second_leader = rec.leaders[1]
    for w in waiting:
        if w is second_leader:
            assert w.raised is interrupt, w.raised
        else:
            assert isinstance(w.raised, fxpay.JournalError), w.raised
            assert "interrupted" in str(w.raised)
            assert "nothing was sent" in str(w.raised)
    assert second_leader in waiting


def test_a_claim_its_commit_gave_no_answer_is_unanswered_and_not_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``reply`` stays ``UNANSWERED`` (RedisJournal then fails the call closed) and
    ``claimed`` False (PostgresJournal then reads why), and the claim is not counted in
    flight: the next claim's leader does not wait for it."""
    monkeypatch.setattr(group_commit, "COMMIT_DELAY", WAIT)
    group = _GroupCommit()
    got = group.run(_Claim("silent", None), lambda batch: None)
    assert got.reply is UNANSWERED
    assert got.claimed is False
    assert got.error is None
    started = time.monotonic()
    group.run(_Claim("next", None), Recorder())
    assert time.monotonic() - started < WAIT / 3, "a claim its commit did not make was counted in flight"


def test_a_leader_waits_for_a_call_in_flight_at_most_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim made is in flight until ``answered``: the next leader waits for it to claim
    again, and commits once the delay ran out when it does not (not for ever)."""
    monkeypatch.setattr(group_commit, "COMMIT_DELAY", 0.3)
    group, rec = _GroupCommit(), Recorder()
    group.run(_Claim("a", None), rec)  # made: in flight
    lone = Caller(group, "b", rec)
    started = time.monotonic()
    lone.start()
    lone.finish()
    took = time.monotonic() - started
    assert 0.29 <= took < WAIT, took
    assert rec.batches == [["a"], ["b"]]
    group.answered("a")
    group.answered("b")
    monkeypatch.setattr(group_commit, "COMMIT_DELAY", WAIT)
    started = time.monotonic()
    group.run(_Claim("c", None), rec)  # nothing in flight: at once, whatever the delay
    assert time.monotonic() - started < WAIT / 3


def test_a_call_that_joins_ends_the_leaders_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a call in flight and a 30 s delay, the leader commits as soon as a claim joins it."""
    monkeypatch.setattr(group_commit, "COMMIT_DELAY", WAIT)
    group, rec = _GroupCommit(), Recorder()
    group.run(_Claim("a", None), rec)  # made: in flight
    leader = Caller(group, "b", rec)
    started = time.monotonic()
    leader.start()
    deadline = time.monotonic() + WAIT
    while not group._gathering:
        assert leader.is_alive(), "the leader did not wait for the call in flight"
        assert time.monotonic() < deadline, "the leader did not wait for the call in flight"
        time.sleep(0.002)
    joined = Caller(group, "c", rec)
    joined.start()
    leader.finish()
    joined.finish()
    assert time.monotonic() - started < WAIT / 3
    assert [sorted(b) for b in rec.batches] == [["a"], ["b", "c"]], rec.batches


def test_a_call_in_flight_past_the_horizon_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_commit, "COMMIT_DELAY", WAIT)
    monkeypatch.setattr(group_commit, "IN_FLIGHT_HORIZON", 0.2)
    group, rec = _GroupCommit(), Recorder()
    group.run(_Claim("a", None), rec)  # made: in flight, never answered (an interrupted call)
    time.sleep(0.3)  # past the horizon (not a hand-off: the claim's age is what is tested)
    started = time.monotonic()
    group.run(_Claim("b", None), rec)
    assert time.monotonic() - started < WAIT / 3, "a leader waited for a call claimed past the horizon"


def test_a_claim_is_in_flight_from_the_end_of_its_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The horizon counts from when the claim was made, the end of its commit, not from when
    its leader began: a call whose commit was slow (here its clock moves 10 s, the horizon
    being 1 s) is in flight right after it, and the next leader waits for it."""
    offset = [0.0]

    class Clock:  # the module's clock: the real one, moved on by the slow commit
        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + offset[0]

    def slow(batch: list[_Claim]) -> None:
        offset[0] += 10.0
        for c in batch:
            c.reply, c.claimed = None, True

    monkeypatch.setattr(group_commit, "time", Clock)
    monkeypatch.setattr(group_commit, "COMMIT_DELAY", 0.3)
    group = _GroupCommit()
    group.run(_Claim("slow", None), slow)
    started = time.monotonic()
    group.run(_Claim("next", None), Recorder())
    assert time.monotonic() - started >= 0.29, "the next leader did not wait for the call just claimed"


def _claiming(journal: Any, got: dict[str, Any], name: str, key: str) -> threading.Thread:
    """A thread, started, that claims ``key`` on ``journal``: what the claim returned (None,
    the entry read) or raised lands in ``got[name]``."""

    def claim() -> None:
        try:
            got[name] = journal.claim(pending_entry(key))
        except BaseException as e:  # looked at by the test
            got[name] = e

    t = threading.Thread(target=claim, daemon=True)
    t.start()
    return t


def _leader_gathers(group: Any, leader: threading.Thread, what: str) -> None:
    """Waits until ``group``'s leader (running in ``leader``) gathers claims for its commit."""
    deadline = time.monotonic() + WAIT
    while not group._gathering:
        assert leader.is_alive(), what
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_two_claims_of_one_key_in_one_postgres_group_commit_make_one_claim(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two calls in flight (claimed, not answered) make the leader of ``b``'s claim wait for
    two more claims; two threads claim ``k`` meanwhile. Exactly one of them makes the claim
    (``claim`` returns None: it would send) and the other reads it (the entry): one
    ``INSERT ... ON CONFLICT DO NOTHING`` of both would insert one row and return its key once,
    and each claim of ``k`` would take itself as made (two requests sent for one key)."""
    psycopg = need("psycopg")
    monkeypatch.setattr(group_commit, "IN_FLIGHT_HORIZON", 10 * WAIT)
    # Over a callable: Python's group commit (one from a connection string is the core's).
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table_name())
    journal.create()
    try:
        assert journal.claim(pending_entry("in-flight-1")) is None
        assert journal.claim(pending_entry("in-flight-2")) is None
        got: dict[str, Any] = {}
        group = journal._group
        monkeypatch.setattr(group_commit, "COMMIT_DELAY", WAIT)
        b = _claiming(journal, got, "b", "b")
        _leader_gathers(group, b, "b's leader did not wait for the calls in flight")
        # b's leader read its delay; k2's commit, the next one (of k2 alone, four calls in
        # flight), is not to wait for more claims.
        monkeypatch.setattr(group_commit, "COMMIT_DELAY", 0.0)
        k1 = _claiming(journal, got, "k1", "k")
        _queued(group, 2)
        k2 = _claiming(journal, got, "k2", "k")
        for t in (b, k1, k2):
            t.join(WAIT)
            assert not t.is_alive(), "a claim never returned"
        assert got["b"] is None, got
        made = [n for n in ("k1", "k2") if got[n] is None]
        assert len(made) == 1, got
        other = got["k2" if made == ["k1"] else "k1"]
        assert isinstance(other, fxpay.JournalEntry), other
        assert (other.key, other.state) == ("k", "pending"), other
    finally:
        journal.close()


def test_claims_of_two_keys_in_one_postgres_group_commit_are_one_insert(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no result waiting to ride it, a group commit of two keys' claims inserts both in
    one statement (one commit, one WAL flush): neither is inserted again on its own. The
    table's INSERT statements are counted by a statement trigger."""
    psycopg = need("psycopg")
    monkeypatch.setattr(group_commit, "IN_FLIGHT_HORIZON", 10 * WAIT)
    # Over a callable: Python's group commit (one from a connection string is the core's).
    journal = fxpay.PostgresJournal(lambda: psycopg.connect(postgres_server.conninfo), table=table_name())
    journal.create()
    t = journal.table
    sql(postgres_server, f'CREATE SEQUENCE "{t}_inserts"')
    body = f"BEGIN PERFORM nextval('\"{t}_inserts\"'); RETURN NULL; END"
    sql(postgres_server, f'CREATE FUNCTION "{t}_count"() RETURNS trigger LANGUAGE plpgsql AS $$ {body} $$')
    sql(postgres_server, f'CREATE TRIGGER "{t}_count" AFTER INSERT ON "{t}" FOR EACH STATEMENT EXECUTE FUNCTION "{t}_count"()')
    try:
        # One call in flight (claimed, not answered): the next leader waits for one more claim.
        assert journal.claim(pending_entry("in-flight")) is None
        got: dict[str, Any] = {}
        group = journal._group
        monkeypatch.setattr(group_commit, "COMMIT_DELAY", WAIT)
        a = _claiming(journal, got, "a", "a")
        _leader_gathers(group, a, "a's leader did not wait for the call in flight")
        b = _claiming(journal, got, "b", "b")
        for th in (a, b):
            th.join(WAIT)
            assert not th.is_alive(), "a claim never returned"
        assert got == {"a": None, "b": None}
        # The lone claim in flight: one INSERT; a's and b's, together: one more.
        assert sql(postgres_server, f'SELECT last_value FROM "{t}_inserts"') == [(2,)]
    finally:
        journal.close()


def test_a_claim_whose_caller_is_interrupted_while_it_waits_is_never_committed() -> None:
    """The main thread waits for another thread's commit (a follower) and is interrupted
    (Ctrl-C: SIGINT, KeyboardInterrupt). Its claim leaves the queue with it: the next
    commit does not store a claim nobody will send under (its key would read pending, then
    unknown, for a request never sent)."""
    import signal

    gc = _GroupCommit()
    committed: list[list[str]] = []
    first_in, release = threading.Event(), threading.Event()

    def commit(batch: list[_Claim]) -> None:
        committed.append([c.key for c in batch])
        if not first_in.is_set():
            first_in.set()
            assert release.wait(WAIT)
        for c in batch:
            c.reply, c.claimed = None, True

    leader = threading.Thread(target=gc.run, args=(_Claim("a", ()), commit))
    leader.start()
    assert first_in.wait(WAIT)  # "a"'s commit runs, and holds
    mine = _Claim("m", ())

    # CPython can lose a signal sent just as the main thread blocks in a lock's acquire (it
    # lands between the last check for signals and the wait: 12 of 300 tries on this
    # host when the sender did not wait first), and the wait then ends only with the commit. So
    # the interrupt is sent again until it has been raised, and raised once only.
    raised: list[bool] = []

    def on_sigint(signum: int, frame: object) -> None:
        if not raised:
            raised.append(True)
            raise KeyboardInterrupt

    def interrupt() -> None:
        deadline = time.monotonic() + WAIT
        while not any(c is mine for c in gc._queue):  # the main thread waits as a follower
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.05)
        while not raised and time.monotonic() < deadline:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]
            time.sleep(0.2)

    before = signal.signal(signal.SIGINT, on_sigint)
    sender = threading.Thread(target=interrupt)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            gc.run(mine, commit)
    finally:
        release.set()
        sender.join(WAIT)
        leader.join(WAIT)
        signal.signal(signal.SIGINT, before)
    gc.run(_Claim("b", ()), commit)  # the next commit
    assert committed == [["a"], ["b"]], committed
    assert not mine.claimed

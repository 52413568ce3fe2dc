"""Issue 46 item 10: no call outlives its deadline by more than 50 ms, including a call that
waits on a token request another call started. One thread starts a token request the sandbox
delays; another thread's call with ``deadline=0.2`` waits on it. Twenty times, over loopback
against the embedded sandbox. A call blocked on its journal (a SQLite file another
connection holds) ends in time too.

CPython's cyclic garbage collector is held off while a call is timed (`no_collections`): a
full collection stops every thread of the process for as long as it runs. In a pytest worker
under `-n 2` on this host, the collections over 10 ms took a median of 61 ms and up to 800 ms
(87 of them in one run of the suite, `gc.callbacks`). A call whose deadline passes meanwhile
gets the GIL back only after it: the likely cause of one 225 ms overrun here (CPython 3.13 in
CI; not seen again in 120 runs of the scenario alone, with or without load). With a churning
thread beside a 1.5 M-object heap, the overruns of a call blocked on its journal were
0.8-29.7 ms, and 1.5-2.5 ms with collections held off. What the 50 ms bounds is fxpay's own
waiting, so the interpreter's pauses are kept out of it, not allowed for."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_elsewhere import Elsewhere

import fxpay
from fxpay.testing import Sandbox

TOKEN_PATH = "POST /v1/oauth/token"
DEADLINE = 0.2
TRIES = 20
WORST_OVERRUN = 0.050


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """No cyclic collection starts inside (one is run before, so none is due), and the
    collector is on again after, as it was."""
    was_on = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


def first_call(c: fxpay.Client, done: threading.Event, errors: list[BaseException]) -> None:
    """The call whose token request the sandbox delays; what it raises goes to `errors`."""
    try:
        c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    except BaseException as e:
        errors.append(e)
    finally:
        done.set()


def test_a_call_waiting_on_another_calls_token_request_keeps_its_deadline(sb: Sandbox) -> None:
    overruns: list[float] = []
    for _ in range(TRIES):
        before = sb.stats()["token_requests"]
        sb.delay_next(TOKEN_PATH, 0.8)
        # A new client each time: its token cache is empty, so the first call requests one.
        # Collections are held off from before that request starts: the bounded call must
        # start within the 0.8 s the sandbox holds it, and a collection run between the two
        # (up to 800 ms in a busy worker) could make it start too late (the call then gets
        # its token in time and does not raise, as one CI run under load saw).
        with sb.client() as c, no_collections():
            first_done = threading.Event()
            first_error: list[BaseException] = []
            t = threading.Thread(target=first_call, args=(c, first_done, first_error))
            t.start()
            # Wait until the first call's token request is at the sandbox (delayed there).
            until = time.monotonic() + 5
            while sb.stats()["token_requests"] == before and time.monotonic() < until:
                time.sleep(0.005)
            bounded = c.with_options(deadline=DEADLINE)
            started = time.monotonic()
            with pytest.raises(fxpay.TimeoutError, match="token request another call started"):
                bounded.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
            overruns.append(time.monotonic() - started - DEADLINE)
            # The first call, with no deadline, gets its token and its quote.
            assert first_done.wait(10)
            t.join()
            assert not first_error, first_error
    worst = max(overruns)
    print(f"overruns over {TRIES} tries: worst {worst * 1000:.1f} ms, best {min(overruns) * 1000:.1f} ms")
    assert worst < WORST_OVERRUN, f"worst overrun {worst * 1000:.1f} ms over {TRIES} tries: {sorted(overruns)}"
    # None may end early either: each waited out its deadline.
    assert min(overruns) >= -0.005, overruns


async def _bounded_async(c: fxpay.Client) -> None:
    await c.with_options(deadline=DEADLINE).create_quote_async(buy_currency="USD", buy_amount="100", sell_currency="AUD")


def test_an_awaited_call_waiting_on_another_calls_token_request_keeps_its_deadline(sb: Sandbox) -> None:
    import asyncio

    sb.delay_next(TOKEN_PATH, 0.8)
    with sb.client() as c, no_collections():
        t = threading.Thread(target=lambda: c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD"))
        t.start()
        until = time.monotonic() + 5
        while sb.stats()["token_requests"] == 0 and time.monotonic() < until:
            time.sleep(0.005)
        started = time.monotonic()
        with pytest.raises(fxpay.TimeoutError):
            asyncio.run(_bounded_async(c))
        overrun = time.monotonic() - started - DEADLINE
        t.join()
    assert overrun < WORST_OVERRUN, overrun


def test_a_call_blocked_on_its_journal_keeps_its_deadline(sb: Sandbox, tmp_path: Path) -> None:
    """A SQLite journal another connection holds locked: the call's claim waits on the file,
    and the call still ends within 50 ms of its deadline, five times."""
    path = tmp_path / "journal.db"
    journal = fxpay.SqliteJournal(path)
    with sb.client(journal=journal) as c:
        c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="warm")
        # Another process: a second SQLite in this one would not see the journal's locks.
        holder = Elsewhere(path)
        try:
            holder.run("BEGIN EXCLUSIVE")
            overruns = []
            for i in range(5):
                with no_collections():
                    started = time.monotonic()
                    with pytest.raises(fxpay.TimeoutError, match=r"deadline of 0\.200 s"):
                        c.with_options(deadline=DEADLINE).create_quote(
                            buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key=f"k-{i}"
                        )
                    overruns.append(time.monotonic() - started - DEADLINE)
        finally:
            holder.run("ROLLBACK")
            holder.close()
    assert max(overruns) < WORST_OVERRUN, overruns

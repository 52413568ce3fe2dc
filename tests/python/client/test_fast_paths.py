"""The fast paths of the binding keep the public behaviour: models built from a core result
(without running their constructor) are the same objects the constructor builds, and awaitables resolved through the loop's inbox behave
like any asyncio future (results, errors, cancellation, many loops and threads)."""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import threading
from decimal import Decimal
from typing import Any

import pytest

import fxpay


def _quote_id(c: fxpay.Client) -> str:
    return c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")


def test_quote_is_the_same_object_as_its_constructor_builds(fxpay_client: fxpay.Client) -> None:
    q = fxpay_client.get_quote(_quote_id(fxpay_client))
    again = fxpay.Quote(**{name: getattr(q, name) for name in fxpay.Quote.__match_args__})
    assert q == again
    assert hash(q) == hash(again)
    assert repr(q) == repr(again)
    assert q.to_dict() == again.to_dict()
    assert type(q) is type(again) is fxpay.Quote
    assert type(q.freebies) is fxpay.Freebies
    assert q.freebies == fxpay.Freebies(q.freebies.total, q.freebies.claimed, q.freebies.remaining)
    assert pickle.loads(pickle.dumps(q)) == q
    with pytest.raises(AttributeError):
        q.fee = Decimal(0)  # type: ignore[misc]
    for name in ("buy_amount", "sell_amount", "customer_rate", "inverse_customer_rate", "fee"):
        assert type(getattr(q, name)) is Decimal
    # The Decimals of the fields are those of raw, digit for digit.
    assert q.sell_amount == q.raw["sellAmount"]
    assert str(q.sell_amount) == str(q.raw["sellAmount"])
    assert str(q.buy_amount) == "1000.00"


async def test_many_concurrent_awaitables(fxpay_client: fxpay.Client) -> None:
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
    quotes = await asyncio.gather(*(fxpay_client.get_quote_async(qid) for _ in range(200)))
    assert all(q == quotes[0] for q in quotes)


async def test_async_errors_are_raised(fxpay_client: fxpay.Client) -> None:
    with pytest.raises(fxpay.NotFoundError):
        await fxpay_client.get_quote_async("00000000-0000-4000-8000-000000000000")


async def test_cancelling_an_awaitable(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
    fxpay_sandbox.delay_next(f"/v1/payments/quotes/{qid}", 5.0)
    task = asyncio.ensure_future(fxpay_client.get_quote_async(qid))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The client goes on working, and a timeout around a call works too.
    assert (await asyncio.wait_for(fxpay_client.get_quote_async(qid), 10)).id == qid


# Its two retries never come: their faults are left unfired by design.
@pytest.mark.filterwarnings("ignore::fxpay.testing.UnfiredFaultWarning")
async def test_a_cancelled_awaitable_sends_nothing_more(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    """Cancelling the task that awaits a call stops the call itself: a read waiting to retry
    (a 503 with Retry-After: 1, two retries allowed) sends no further attempt."""
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
    fired = fxpay_sandbox.stats()["faults_fired"]
    fxpay_sandbox.fail_next(f"GET /v1/payments/quotes/{qid}", 503, times=3, retry_after=1)
    task = asyncio.ensure_future(fxpay_client.get_quote_async(qid))
    for _ in range(1000):  # the first attempt was answered with its 503
        if fxpay_sandbox.stats()["faults_fired"] > fired:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(2.5)  # the retries were due at +1 s and +2 s
    assert fxpay_sandbox.stats()["faults_fired"] == fired + 1


def test_one_loop_after_another_and_many_threads(fxpay_client: fxpay.Client) -> None:
    qid = _quote_id(fxpay_client)

    async def some() -> list[fxpay.Quote]:
        return list(await asyncio.gather(*(fxpay_client.get_quote_async(qid) for _ in range(20))))

    for _ in range(5):
        assert len(asyncio.run(some())) == 20
    results: list[int] = []

    def worker() -> None:
        results.append(len(asyncio.run(some())))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [20] * 4


async def test_many_awaitables_on_one_loop_open_no_descriptor_each(fxpay_client: fxpay.Client) -> None:
    # A loop's wake-up channel (a socket pair the loop watches) is made once, on the loop's
    # first call, and kept for the calls that follow.
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
    await fxpay_client.get_quote_async(qid)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        await fxpay_client.get_quote_async(qid)
    assert len(os.listdir("/proc/self/fd")) - before < 5


WAKER = """
import asyncio, os, sys
from fxpay.testing import Sandbox

class NoReaderLoop(asyncio.SelectorEventLoop):
    def add_reader(self, fd, callback, *args):
        raise NotImplementedError

with Sandbox() as sb, sb.client() as c:
    async def calls():
        qid = await c.create_quote_async(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
        await asyncio.gather(*(c.get_quote_async(qid) for _ in range(20)))

    loop = NoReaderLoop() if sys.argv[1] == "no_add_reader" else asyncio.new_event_loop()
    loop.run_until_complete(calls())
    loop.close()
    # The threads' names as the kernel keeps them (15 characters at most).
    print(sorted({open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")}))
"""


@pytest.mark.parametrize(("loop", "waker"), [("default", False), ("no_add_reader", True)])
def test_only_a_loop_that_cannot_watch_a_descriptor_is_woken_by_a_thread(loop: str, waker: bool) -> None:
    """Results reach a loop that can watch a descriptor through a socket pair it reads (no
    thread takes the GIL to hand them over); a loop that cannot (Windows' proactor) is woken
    by fxpay's waker thread with ``call_soon_threadsafe``. In a child process: the waker
    thread, once started, lives as long as its process."""
    r = subprocess.run([sys.executable, "-c", WAKER, loop], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("fxpay-loop-wake" in r.stdout) is waker, r.stdout


class BrokenReaderLoop(asyncio.SelectorEventLoop):
    """A loop whose ``add_reader`` fails for a reason other than "not supported"."""

    def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:  # type: ignore[override]
        raise RuntimeError("the reader could not be added")


def test_an_add_reader_failure_other_than_not_supported_is_raised(fxpay_client: fxpay.Client) -> None:
    """Only a loop that cannot watch a descriptor (``NotImplementedError``, Windows' proactor)
    is woken another way; any other failure of ``add_reader`` is the call's error, not
    hidden behind the fallback."""
    loop = BrokenReaderLoop()
    try:
        with pytest.raises(RuntimeError, match="the reader could not be added"):
            loop.run_until_complete(fxpay_client.get_quote_async("00000000-0000-4000-8000-000000000000"))
    finally:
        loop.close()


def test_an_awaitable_needs_a_running_loop(fxpay_client: fxpay.Client) -> None:
    call = fxpay_client.get_quote_async("x")
    with pytest.raises(RuntimeError):
        call.send(None)

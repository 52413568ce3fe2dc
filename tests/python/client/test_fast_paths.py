"""The fast paths of the binding keep the public behaviour: models built from a core result
(without running their constructor) are the same objects the constructor builds, and awaitables resolved through the loop's inbox behave
like any asyncio future (results, errors, cancellation, many loops and threads)."""

from __future__ import annotations

import asyncio
import pickle
import threading
from decimal import Decimal

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


def test_an_awaitable_needs_a_running_loop(fxpay_client: fxpay.Client) -> None:
    call = fxpay_client.get_quote_async("x")
    with pytest.raises(RuntimeError):
        call.send(None)

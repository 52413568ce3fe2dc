"""Issue 30 item 3: ``Client.with_options(timeout=, max_retries=, deadline=)`` and the
per-call deadline, against the embedded sandbox over loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox, UnfiredFaultWarning

QUOTE_PATH = "GET /v1/payments/quotes/*"


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


def new_quote(c: fxpay.Client) -> str:
    return c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")


def test_with_options_times_out_and_shares_the_token(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = new_quote(c)
        quick = c.with_options(timeout=0.5, max_retries=0)
        sb.delay_next(QUOTE_PATH, 3)
        started = time.monotonic()
        with pytest.raises(fxpay.TimeoutError):
            quick.get_quote(qid)
        assert time.monotonic() - started < 2
        # c keeps its own timeout: the same delay is waited out.
        sb.delay_next(QUOTE_PATH, 1)
        assert c.get_quote(qid).id == qid
        assert quick.get_quote(qid).id == qid
        # One token for both: the token cache is shared.
        assert sb.stats()["token_requests"] == 1
        assert type(quick) is fxpay.Client
        assert quick.base_url == c.base_url


def test_a_deadline_bounds_every_retry_and_retry_after(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = new_quote(c)
        sb.fail_next(QUOTE_PATH, 503, times=5, retry_after=10)
        started = time.monotonic()
        with pytest.raises(fxpay.ServerError):
            c.with_options(deadline=2, max_retries=5).get_quote(qid)
        assert time.monotonic() - started < 3
        # The 503's Retry-After (10 s) ends past the deadline: one attempt, no wait, 4 faults left.
        with pytest.warns(UnfiredFaultWarning, match=r"4 use\(s\) left"):
            sb.reset()
        # A 429 whose Retry-After would end past the deadline is raised at once.
        sb.fail_next(QUOTE_PATH, 429, times=1, retry_after=10)
        started = time.monotonic()
        with pytest.raises(fxpay.RateLimitError):
            c.with_options(deadline=2).get_quote(qid)
        assert time.monotonic() - started < 1


def test_a_deadline_reached_in_flight_is_a_timeout(sb: Sandbox) -> None:
    with sb.client(deadline=1.0) as c:
        qid = new_quote(c)
        sb.delay_next(QUOTE_PATH, 5)
        started = time.monotonic()
        with pytest.raises(fxpay.TimeoutError):
            c.get_quote(qid)  # timeout=30 per attempt, but the call has 1 s
        assert time.monotonic() - started < 2

        async def awaited() -> None:
            sb.delay_next(QUOTE_PATH, 5)
            with pytest.raises(fxpay.TimeoutError):
                await c.get_quote_async(qid)

        started = time.monotonic()
        asyncio.run(awaited())
        assert time.monotonic() - started < 2


def test_a_deadline_under_an_idempotency_key_leaves_the_key_unknown(sb: Sandbox) -> None:
    journal = fxpay.MemoryJournal()
    with sb.client(journal=journal) as c:
        sb.delay_next("POST /v1/payments/quotes", 5)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.with_options(deadline=1).create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key="q-1")
        entry = journal.get("q-1")
        assert entry is not None
        assert entry.state == "unknown"


def test_closing(sb: Sandbox) -> None:
    c = sb.client()
    d = c.with_options(timeout=5)
    d.close()
    assert d.closed
    assert not c.closed
    new_quote(c)  # closing the derived client closed nothing shared
    d2 = c.with_options(max_retries=0)
    c.close()
    assert d2.closed


def test_bad_options(sb: Sandbox) -> None:
    with sb.client() as c:
        with pytest.raises(TypeError, match="deadline"):
            c.with_options(deadline="2")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="timeout"):
            c.with_options(timeout=True)  # type: ignore[arg-type]
        with pytest.raises(fxpay.ConfigurationError, match="deadline"):
            c.with_options(deadline=0)
        with pytest.raises(fxpay.ConfigurationError, match="max_retries"):
            c.with_options(max_retries=-1)
        with pytest.raises(fxpay.ConfigurationError, match="deadline"):
            fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, deadline=float("nan"))

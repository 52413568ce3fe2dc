"""Issue 30 item 2: ``c.with_raw_response.<method>(...)`` returns a ``fxpay.RawResponse``
(status, headers, request_id, elapsed, attempts, parse()), for every network method and its
awaitable twin, against the embedded sandbox over loopback."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import make_beneficiary


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


def test_get_quote_raw_parses_to_the_plain_result(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        r1 = c.with_raw_response.get_quote(qid)
        r2 = c.with_raw_response.get_quote(qid)
        assert isinstance(r1, fxpay.RawResponse)
        assert r1.parse() == c.get_quote(qid)
        assert r1.parse() is r1.parse()
        assert r1.status == 200
        assert r1.attempts == 1
        assert isinstance(r1.elapsed, datetime.timedelta)
        assert r1.elapsed > datetime.timedelta(0)
        assert r1.request_id
        assert r1.request_id == r1.headers["X-Request-Id"]
        assert r1.request_id != r2.request_id
        assert r1.headers["content-type"].startswith("application/json")
        # What a log line or a debugger shows: the status, the id to quote, the attempts.
        assert repr(r1) == f"<RawResponse status=200 request_id={r1.request_id!r} attempts=1>"

        async def awaited() -> fxpay.RawResponse[fxpay.Quote]:
            return await c.with_raw_response.get_quote_async(qid)

        r3 = asyncio.run(awaited())
        assert r3.parse() == r1.parse()
        assert r3.request_id not in (r1.request_id, r2.request_id)


def test_attempts_count_the_retries(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        sb.fail_next("GET /v1/payments/quotes/*", 503, times=2)
        r = c.with_raw_response.get_quote(qid)
        assert (r.status, r.attempts) == (200, 3)


def test_every_network_method(sb: Sandbox) -> None:
    with sb.client() as c:
        raw = c.with_raw_response
        qid_r = raw.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert qid_r.status in (200, 201)
        qid = qid_r.parse()
        quote = c.get_quote(qid)
        bid = raw.create_beneficiary(make_beneficiary()).parse()
        deal = raw.create_deal(
            quote_id=qid, funding_source="Own account", beneficiaries=[fxpay.DealBeneficiary(bid, quote.sell_amount, "r", "ref")]
        )
        assert deal.parse().quote_id == qid
        assert deal.request_id
        qid2 = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        spot = raw.create_spot_deal(
            quote_id=qid2,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(bid, c.get_quote(qid2).sell_amount, "r", "ref")],
        )
        assert spot.status == 202
        assert spot.parse().process_id
        auth = c.authorization_url(sb.redirect_uri)
        token_r = raw.exchange_code(auth, sb.approve(auth.url))
        token = token_r.parse()
        assert token_r.status == 200
        assert token.scope == "gca-aisp"
        refreshed = raw.refresh_token(token.refresh_token or "")
        assert refreshed.parse().access_token != token.access_token
        s = c.user_session(refreshed.parse())
        accounts = s.with_raw_response.list_virtual_accounts()
        assert accounts.parse() == s.list_virtual_accounts()
        assert accounts.request_id
        assert asyncio.run(s.with_raw_response.list_virtual_accounts_async()).status == 200
        assert "get_quote_async" in dir(raw)
        with pytest.raises(AttributeError):
            raw.pay_out  # noqa: B018
        with pytest.raises(AttributeError):
            raw.close  # noqa: B018


def test_errors_are_raised_as_by_the_plain_call(sb: Sandbox) -> None:
    with sb.client() as c:
        with pytest.raises(fxpay.NotFoundError) as e:
            c.with_raw_response.get_quote("no-such-quote")
        assert e.value.request_id
        # A later plain call records nothing anywhere: the capture was for one call.
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert c.get_quote(qid).id == qid
        with pytest.raises(TypeError, match="quote_id"):
            c.with_raw_response.get_quote(1)  # type: ignore[arg-type]
        qid2 = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert c.with_raw_response.get_quote(qid2).status == 200


def test_a_raw_response_is_immutable(sb: Sandbox) -> None:
    """Issue 46 item 9: ``status=999`` used to stick; every attribute is now read-only, as on
    the models."""
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        r = c.with_raw_response.get_quote(qid)
        before = (r.status, dict(r.headers), r.attempts, r.elapsed, r.request_id)
        for name, value in [
            ("status", 999),
            ("headers", {}),
            ("attempts", 7),
            ("elapsed", datetime.timedelta(0)),
            ("request_id", "x"),
            ("_status", 999),
            ("anything", 1),
        ]:
            with pytest.raises(AttributeError):
                setattr(r, name, value)
        with pytest.raises(AttributeError):
            del r.status
        assert (r.status, dict(r.headers), r.attempts, r.elapsed, r.request_id) == before

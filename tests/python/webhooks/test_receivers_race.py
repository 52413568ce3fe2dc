"""The spot-deal pattern (docs/spot-deals.md, linked from the README) is race-free: under gunicorn (two worker processes), every
DealCreated of 100 spot deals is verified and handled on its first delivery, though it may
reach the receiver before create_spot_deal has returned."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary
from receiver_support import new_prefix, redis_server, serve, wait_for

DEALS = 100


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def book(c: fxpay.Client, beneficiary_id: str, callback_url: str, nonce: str | None) -> fxpay.SpotDeal:
    quote_id = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    quote = c.get_quote(quote_id)
    return c.create_spot_deal(
        quote_id=quote_id,
        funding_source="Own account",
        beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, quote.sell_amount, "Invoice", "INV")],
        callback_url=callback_url,
        callback_nonce=nonce,
    )


def test_100_spot_deals_under_gunicorn_are_all_accepted_on_first_delivery(fxpay_sandbox: Any, redis_url: str) -> None:
    import redis

    r = redis.Redis.from_url(redis_url, decode_responses=True)
    prefix = new_prefix()
    refs: dict[str, str] = {}  # processId -> ref
    with serve("gunicorn", redis_url, prefix, workers=2) as base, fxpay_sandbox.client() as c:
        beneficiary_id = c.create_beneficiary(make_beneficiary())
        for i in range(DEALS):
            # The race-free pattern: the application chooses the reference and the nonce and
            # saves them *before* the call; the callback URL carries the reference.
            ref = f"order-{i}-{secrets.token_hex(4)}"
            nonce = secrets.token_urlsafe(32)
            r.set(prefix + "nonce:" + ref, nonce)
            spot = book(c, beneficiary_id, f"{base}/by-ref?ref={ref}", nonce)
            assert spot.callback_nonce == nonce
            refs[spot.process_id] = ref

        def mine() -> list[dict[str, Any]]:
            return [d for d in fxpay_sandbox.deliveries() if d["processId"] in refs]

        wait_for(lambda: r.llen(prefix + "handled") >= DEALS and len(mine()) >= DEALS, seconds=120, what=f"{DEALS} handled deliveries")
        deliveries = mine()
        handled = [json.loads(x) for x in r.lrange(prefix + "handled", 0, -1)]

    rejected = [
        (d["processId"], d["attempt"], d["status"], d["error"]) for d in deliveries if d["status"] is None or not 200 <= d["status"] < 300
    ]
    assert rejected == [], f"{len(rejected)} deliveries were not accepted: {rejected[:5]}"
    assert sorted(d["processId"] for d in deliveries) == sorted(refs)
    assert all(d["attempt"] == 1 for d in deliveries)
    # Each on_event once, with the reference of its own deal.
    assert sorted((h["processId"], h["ref"]) for h in handled) == sorted(refs.items())
    assert all(h["dealId"] for h in handled)

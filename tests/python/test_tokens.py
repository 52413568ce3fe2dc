"""The client-credentials token: lazy, cached, single-flight, renewed on 401."""

from __future__ import annotations

import asyncio

import fxpay
from conftest import all_at_once


def test_32_threads_cause_one_token_request(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    qid = fxpay_sandbox.client().create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    first = fxpay_sandbox.stats()["token_requests"]
    assert first == 1  # the helper client above
    quotes = all_at_once(32, lambda: c.get_quote(qid))
    assert len(quotes) == 32 and all(q.id == qid for q in quotes)
    assert fxpay_sandbox.stats()["token_requests"] - first == 1


async def test_50_tasks_cause_one_token_request(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    ids = await asyncio.gather(
        *(c.create_quote_async(buy_currency="USD", buy_amount=i + 1, sell_currency="EUR") for i in range(50))
    )
    assert len(set(ids)) == 50
    assert fxpay_sandbox.stats()["token_requests"] == 1


def test_token_is_reused(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert fxpay_sandbox.stats()["token_requests"] == 1


def test_401_renews_and_replays_once(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    fxpay_sandbox.advance(3600)  # the sandbox expires the token; the client's clock has not moved
    assert fxpay_client.get_quote(qid).id == qid
    assert fxpay_sandbox.stats()["token_requests"] == 2


def test_401_replay_is_not_looped(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    fxpay_sandbox.fail_next(f"/v1/payments/quotes/{qid}", 401, times=3)
    before = fxpay_sandbox.stats()["requests"]
    try:
        fxpay_client.get_quote(qid)
    except fxpay.AuthenticationError as e:
        assert e.status == 401
    else:
        raise AssertionError("expected AuthenticationError")
    # first attempt, one token renewal, one replay: three requests, never more
    assert fxpay_sandbox.stats()["requests"] - before == 3


def test_a_shared_store_shares_the_token(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    store = fxpay.MemoryTokenStore()
    a = fxpay_sandbox.client(token_store=store)
    b = fxpay_sandbox.client(token_store=store)
    a.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    b.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert fxpay_sandbox.stats()["token_requests"] == 1


def test_oauth_errors_from_the_token_endpoint(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    bad = fxpay.Client(fxpay_sandbox.client_id, "wrong-secret", base_url=fxpay_sandbox.base_url)
    try:
        bad.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    except fxpay.OAuthError as e:
        assert e.error == "invalid_client"
        assert e.status == 401
        assert "wrong-secret" not in str(e) and "wrong-secret" not in repr(e)
    else:
        raise AssertionError("expected OAuthError")


async def test_200_tasks_cause_one_token_request(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_sandbox.client().create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    c = fxpay_sandbox.client()
    quotes = await asyncio.gather(*(c.get_quote_async(qid) for _ in range(200)))
    assert {q.id for q in quotes} == {qid}
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 2  # the set-up client's and this one's


def test_renewal_before_expiry_is_single_flight(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    # A token whose expiry is near is renewed before use, once for all threads.
    store = fxpay.MemoryTokenStore()
    c = fxpay_sandbox.client(token_store=store)
    qid = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    (key,) = list(store._tokens)
    old = store.load(key)
    assert old is not None
    import dataclasses
    import datetime as dt

    nearly = dataclasses.replace(old, expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3))
    c2 = fxpay_sandbox.client(token_store=store)
    store.save(key, nearly)
    all_at_once(16, lambda: c2.get_quote(qid))
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 2
    renewed = store.load(key)
    assert renewed is not None and renewed.access_token != old.access_token

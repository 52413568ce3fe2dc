"""With DEBUG logging on, no secret or token shows in logs, reprs or exception texts."""

from __future__ import annotations

import logging

import pytest

import fxpay

from conftest import make_beneficiary


def test_no_secret_anywhere(fxpay_sandbox, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.DEBUG, logger="fxpay")
    c = fxpay_sandbox.client()
    texts: list[str] = [repr(c), str(c)]
    qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    q = c.get_quote(qid)
    bid = c.create_beneficiary(make_beneficiary())
    spot = c.create_spot_deal(
        quote_id=qid,
        funding_source="Own account",
        beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "r", "ref")],
        callback_url="http://127.0.0.1:9/hook",
    )
    texts += [repr(q), repr(spot), str(spot)]
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)
    texts += [repr(auth), str(auth), auth._repr_html_()]
    token = c.exchange_code(auth, fxpay_sandbox.approve(auth.url))
    session = c.user_session(token)
    texts += [repr(token), str(token), repr(session)]
    session.list_virtual_accounts()
    payments_token = c._payments_token()
    for exc_call in (
        lambda: c.refresh_token("not-a-real-refresh-token"),
        lambda: fxpay.Client(fxpay_sandbox.client_id, "bad-secret-xyz", base_url=fxpay_sandbox.base_url).get_quote(qid),
        lambda: c.exchange_code(auth, "code=zzz&state=" + auth.state),
    ):
        with pytest.raises(fxpay.FxPayError) as ei:
            exc_call()
        texts += [str(ei.value), repr(ei.value)]
    records = [r.getMessage() for r in caplog.records if r.name.startswith("fxpay")]
    assert any("POST /v1/oauth/token" in r for r in records), records
    assert any("GET /v1/payments/quotes/" in r and "200" in r for r in records), records
    assert any("attempt 1" in r for r in records)
    secrets = [
        fxpay_sandbox.client_secret,
        "bad-secret-xyz",
        token.access_token,
        token.refresh_token,
        payments_token.access_token,
        spot.callback_nonce,
        auth.state,
        auth.code_verifier,
        "not-a-real-refresh-token",
    ]
    haystack = "\n".join(texts + records)
    for s in secrets:
        assert s
        assert s not in haystack, f"secret leaked: {s[:4]}…"

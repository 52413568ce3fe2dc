"""max_retries, counted on the sandbox: a safe request is sent at most 1 + max_retries times,
a request that creates something once (it reached the service)."""

from __future__ import annotations

from typing import Any

import pytest

import fxpay
from fxpay.testing import UnfiredFaultWarning

QUOTE = "GET /v1/payments/quotes/{id}"
CREATE = "POST /v1/payments/quotes"
TOKEN = "POST /v1/oauth/token"


def sent(sb: Any, route: str) -> int:
    return int(sb.stats()["paths"][route])


def left_unfired(sb: Any, uses: int) -> None:
    """The faults set beyond the attempts made are left, exactly ``uses`` of them."""
    with pytest.warns(UnfiredFaultWarning, match=rf"{uses} use\(s\) left never fired before reset"):
        sb.reset()


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_a_get_is_retried_exactly_max_retries_times(fxpay_sandbox: Any, max_retries: int) -> None:
    c = fxpay_sandbox.client(max_retries=max_retries)
    qid = c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    # More faults than attempts: the call fails after 1 + max_retries attempts, never more.
    fxpay_sandbox.fail_next("GET /v1/payments/quotes/*", 503, times=max_retries + 5)
    before = sent(fxpay_sandbox, QUOTE)
    with pytest.raises(fxpay.ServerError) as ei:
        c.get_quote(qid)
    assert ei.value.status == 503
    assert sent(fxpay_sandbox, QUOTE) - before == 1 + max_retries
    left_unfired(fxpay_sandbox, 4)


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_a_get_succeeds_on_its_last_allowed_attempt(fxpay_sandbox: Any, max_retries: int) -> None:
    c = fxpay_sandbox.client(max_retries=max_retries)
    qid = c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    fxpay_sandbox.fail_next("GET /v1/payments/quotes/*", 429, times=max_retries, retry_after=0)
    before = sent(fxpay_sandbox, QUOTE)
    assert c.get_quote(qid).id == qid
    assert sent(fxpay_sandbox, QUOTE) - before == 1 + max_retries


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_the_token_request_is_retried_exactly_max_retries_times(fxpay_sandbox: Any, max_retries: int) -> None:
    c = fxpay_sandbox.client(max_retries=max_retries)
    fxpay_sandbox.fail_next(TOKEN, 503, times=max_retries + 5)
    with pytest.raises(fxpay.FxPayError):
        c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert sent(fxpay_sandbox, TOKEN) == 1 + max_retries
    assert sent(fxpay_sandbox, CREATE) == 0
    left_unfired(fxpay_sandbox, 4)


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_a_create_that_reached_the_service_is_sent_once(fxpay_sandbox: Any, max_retries: int) -> None:
    c = fxpay_sandbox.client(max_retries=max_retries)
    c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    fxpay_sandbox.fail_next(CREATE, 503, times=max_retries + 5)
    before = sent(fxpay_sandbox, CREATE)
    with pytest.raises(fxpay.ServerError):
        c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert sent(fxpay_sandbox, CREATE) - before == 1
    left_unfired(fxpay_sandbox, max_retries + 4)


def test_max_retries_out_of_range_is_refused() -> None:
    for bad in (-1, 11):
        with pytest.raises(fxpay.FxPayError, match="max_retries"):
            fxpay.Client("id", "secret", base_url="http://127.0.0.1:1", max_retries=bad)

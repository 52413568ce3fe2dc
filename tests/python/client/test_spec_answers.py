"""Issue 54 items 15 and 18, the client's side: an answer to ``get_quote`` that is another
quote is an ``ApiError``, never returned as the quote asked for; the client's GETs carry
``Content-Type: application/json`` as spec section 4 says of every request to the payments
and account-information endpoints. On the wire, against a crafted loopback server (the
sandbox never answers another quote) and the embedded sandbox."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox

from crafted_support import Crafted

ASKED = "3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f"
OTHER = "9a0c1f2e-1111-4d7a-8b0e-2f6f1c2d3e4f"
QUOTE = {
    "buyCurrency": "USD",
    "buyAmount": 1000.00,
    "sellCurrency": "AUD",
    "sellAmount": 1523.45,
    "customerRate": 1.52345,
    "inverseCustomerRate": 0.656405,
    "fee": 5.00,
    "feeCurrency": "USD",
}


@pytest.fixture
def crafted() -> Iterator[Crafted]:
    s = Crafted()
    yield s
    s.close()


@pytest.fixture
def client(crafted: Crafted) -> Iterator[fxpay.Client]:
    with fxpay.Client("cid", "secret", base_url=crafted.base_url, max_retries=0, timeout=10) as c:
        yield c


def test_an_answer_that_is_another_quote_is_an_api_error(crafted: Crafted, client: fxpay.Client) -> None:
    crafted.set(f"/v1/payments/quotes/{ASKED}", {"id": OTHER, **QUOTE})
    with pytest.raises(fxpay.ApiError) as caught:
        client.get_quote(ASKED)
    e = caught.value
    assert type(e) is fxpay.ApiError
    assert e.status == 200
    assert ASKED in str(e), str(e)
    assert OTHER in str(e), str(e)
    assert json.loads(e.body or "")["id"] == OTHER


@pytest.mark.parametrize("given", [ASKED, ASKED.upper(), None])
def test_an_answer_that_is_the_quote_asked_for_is_read(crafted: Crafted, client: fxpay.Client, given: str | None) -> None:
    crafted.set(f"/v1/payments/quotes/{ASKED}", QUOTE if given is None else {"id": given, **QUOTE})
    q = client.get_quote(ASKED)
    assert q.id == (given or ASKED)


def test_gets_carry_content_type_json_on_the_wire(crafted: Crafted, client: fxpay.Client) -> None:
    crafted.set(f"/v1/payments/quotes/{ASKED}", {"id": ASKED, **QUOTE})
    crafted.set("/v1/gca/virtual-accounts", [{"id": "va1", "currency": "USD"}])
    client.get_quote(ASKED)
    token = fxpay.Token("AT", "Bearer", 3599, dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc), "RT", "gca-aisp")
    with client.user_session(token) as s:
        assert [va["id"] for va in s.list_virtual_accounts()] == ["va1"]
    gets = [(path, headers) for method, path, headers in crafted.received if method == "GET"]
    assert [p for p, _ in gets] == [f"/v1/payments/quotes/{ASKED}", "/v1/gca/virtual-accounts"]
    for path, headers in gets:
        assert headers.get("content-type") == "application/json", (path, headers)
        assert headers["authorization"].startswith("Bearer "), path


def test_the_sandbox_answers_a_get_that_carries_content_type() -> None:
    with Sandbox() as sb, sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")
        assert c.get_quote(qid).id == qid

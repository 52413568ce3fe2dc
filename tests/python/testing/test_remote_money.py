"""Issue 54 item 12: ``RemoteSandbox`` gives money as ``Decimal``, as ``Sandbox`` does. A
``RemoteSandbox`` drives an embedded sandbox over its admin API (loopback HTTP), so both
read the same state: what they return must be equal, value and type."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import fxpay
from fxpay.testing import RemoteSandbox, Sandbox

from conftest import make_beneficiary


def skeleton(value: Any) -> Any:
    """``value`` with every leaf replaced by its type: what two equal answers share."""
    if isinstance(value, dict):
        return {k: skeleton(v) for k, v in value.items()}
    if isinstance(value, list):
        return [skeleton(v) for v in value]
    return type(value)


def test_deals_give_money_as_decimal_as_the_embedded_sandbox_does() -> None:
    with Sandbox() as sb:
        r = RemoteSandbox(sb.base_url, client_id=sb.client_id, client_secret=sb.client_secret, admin_token=sb.admin_token)
        with sb.client() as c:
            bid = c.create_beneficiary(make_beneficiary())
            amounts = []
            for spot in (False, True):  # a quote books one deal
                qid = c.create_quote(buy_currency="USD", buy_amount="100.10", sell_currency="AUD")
                q = c.get_quote(qid)
                amounts.append(q.sell_amount)
                line = fxpay.DealBeneficiary(bid, q.sell_amount, "r", "p")
                if spot:
                    c.create_spot_deal(
                        quote_id=qid, funding_source="Own account", beneficiaries=[line], callback_url="http://127.0.0.1:9/x"
                    )
                else:
                    c.create_deal(quote_id=qid, funding_source="Own account", beneficiaries=[line])
        local, remote = sb.deals(), r.deals()
        assert len(remote) == 2
        for deal, amount in zip(remote, amounts, strict=True):
            (b,) = deal["beneficiaries"]
            assert type(b["amount"]) is Decimal, b
            assert str(b["amount"]) == str(amount)  # exactly as written, not through a float
        assert remote == local
        assert skeleton(remote) == skeleton(local)
        # The other inspections agree in type too (no money in them: instants stay floats).
        assert skeleton(r.deliveries()) == skeleton(sb.deliveries())
        gauge = "open_connections"
        assert skeleton({k: v for k, v in r.stats().items() if k != gauge}) == skeleton({k: v for k, v in sb.stats().items() if k != gauge})

"""Notebook niceties: HTML reprs and records for pandas that keep Decimal."""

from __future__ import annotations

from decimal import Decimal

import fxpay
import pytest


def test_to_records_feeds_pandas_without_losing_decimal(fxpay_client: fxpay.Client) -> None:
    pd = pytest.importorskip("pandas")
    ids = [fxpay_client.create_quote(buy_currency="USD", buy_amount=f"{n}.10", sell_currency="AUD") for n in (1, 2, 3)]
    quotes = [fxpay_client.get_quote(i) for i in ids]
    frame = pd.DataFrame(fxpay.to_records(quotes))
    assert list(frame["buy_amount"]) == [Decimal("1.10"), Decimal("2.10"), Decimal("3.10")]
    assert all(type(v) is Decimal for v in frame["sell_amount"])
    assert "freebies_remaining" in frame.columns and "raw" not in frame.columns
    assert sum(frame["buy_amount"], Decimal(0)) == Decimal("6.30")


def test_html_reprs(fxpay_client: fxpay.Client) -> None:
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount=5, sell_currency="EUR"))
    html = q._repr_html_()
    assert html.startswith("<table>") and "customer_rate" in html and str(q.customer_rate) in html
    token = fxpay.Token.from_dict({"access_token": "SECRET-A", "refresh_token": "SECRET-R", "expires_at": 0, "expires_in": 1})
    assert "SECRET" not in token._repr_html_()
    va = fxpay.VirtualAccount({"id": "va1", "currency": "USD", "balance": Decimal("1.00")})
    assert "<td>USD</td>" in va._repr_html_()

"""Notebook niceties: HTML reprs and records for pandas that keep Decimal."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest

import fxpay

from conftest import need


def test_to_records_feeds_pandas_without_losing_decimal(fxpay_client: fxpay.Client) -> None:
    pd = need("pandas")
    ids = [fxpay_client.create_quote(buy_currency="USD", buy_amount=f"{n}.10", sell_currency="AUD") for n in (1, 2, 3)]
    quotes = [fxpay_client.get_quote(i) for i in ids]
    frame = pd.DataFrame(fxpay.to_records(quotes))
    assert list(frame["buy_amount"]) == [Decimal("1.10"), Decimal("2.10"), Decimal("3.10")]
    assert all(type(v) is Decimal for v in frame["sell_amount"])
    assert "freebies_remaining" in frame.columns
    assert "raw" not in frame.columns
    assert sum(frame["buy_amount"], Decimal(0)) == Decimal("6.30")


def test_html_reprs(fxpay_client: fxpay.Client) -> None:
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount=5, sell_currency="EUR"))
    html = q._repr_html_()
    assert html.startswith("<table>")
    assert "customer_rate" in html
    assert str(q.customer_rate) in html
    token = fxpay.Token.from_dict({"access_token": "SECRET-A", "refresh_token": "SECRET-R", "expires_at": 0, "expires_in": 1})
    assert "SECRET" not in token._repr_html_()
    va = fxpay.VirtualAccount({"id": "va1", "currency": "USD", "balance": Decimal("1.00")})
    assert "<td>USD</td>" in va._repr_html_()


WITHOUT_PANDAS = """
import sys
sys.modules["pandas"] = None  # `import pandas` now fails, as where it is not installed
from decimal import Decimal
import fxpay

with fxpay.testing.Sandbox() as sb:
    c = sb.client()
    q = c.get_quote(c.create_quote(buy_currency="USD", buy_amount="1.10", sell_currency="AUD"))
    rows = fxpay.to_records([q, fxpay.DealBeneficiary("b1", Decimal("12.30"), "r", "ref")])
    money = {k: rows[0][k] for k in ("buy_amount", "sell_amount", "customer_rate", "inverse_customer_rate", "fee")}
    assert all(type(v) is Decimal for v in money.values()), money
    assert str(rows[0]["buy_amount"]) == "1.10", rows[0]
    assert money == {k: getattr(q, k) for k in money}, (money, q)
    assert type(rows[1]["amount"]) is Decimal and str(rows[1]["amount"]) == "12.30", rows[1]
    assert "pandas" not in sys.modules or sys.modules["pandas"] is None
print("DECIMALS KEPT")
"""


def test_to_records_keeps_decimal_without_pandas() -> None:
    r = subprocess.run([sys.executable, "-c", WITHOUT_PANDAS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "DECIMALS KEPT" in r.stdout, r.stdout + r.stderr


def test_to_records_names_the_row_that_is_not_a_model(fxpay_client: fxpay.Client) -> None:
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=Decimal("10"), sell_currency="AUD")
    quote = fxpay_client.get_quote(qid)
    for bad, name in ((1, "int"), ({"quote_id": qid}, "dict"), (None, "NoneType")):
        with pytest.raises(TypeError) as caught:
            fxpay.to_records([quote, bad])
        assert str(caught.value) == f"models[1] must be a fxpay model, not {name}"


def test_the_notebook_extra_brings_the_progress_widget() -> None:
    """Issue 46 item 18: ``fxpay[notebook]`` installed tqdm but not ipywidgets, so in Jupyter
    ``tqdm.auto`` warned ``IProgress not found`` and drew text instead of the widget the docs
    promise. The extra now requires ipywidgets, and with it tqdm's notebook bar is a widget."""
    import importlib.metadata
    import re

    extra = [r for r in importlib.metadata.requires("fxpay") or [] if re.search(r"extra\s*==\s*['\"]notebook['\"]", r)]
    names = {re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0].lower() for r in extra}
    assert {"tqdm", "ipywidgets"} <= names, extra
    need("ipywidgets")
    import tqdm.notebook

    assert tqdm.notebook.IProgress is not None  # what the "IProgress not found" warning lacked

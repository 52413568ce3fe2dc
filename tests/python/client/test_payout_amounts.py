"""Issue 46 item 12: a payout table's amounts never pass through a binary float on their way to
the wire. A polars ``Float32`` or pandas ``float32`` amount of ``10.1`` is sent as ``10.1`` (its
own shortest 32-bit text), not ``10.100000381469727``; a numpy ``float32`` in a list row is a
``TypeError`` naming its cell. An amount too large to hold refuses its row only, whether it
has 29 digits or 400. Real sandbox over loopback, real SQLite journal."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import make_beneficiary, need

FUNDING = "Own account"


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


@pytest.fixture
def client(sb: Sandbox, tmp_path: Path) -> Iterator[fxpay.Client]:
    with sb.client(journal=fxpay.SqliteJournal(tmp_path / "journal.db")) as c:
        yield c


def row(bid: str, i: int, **extra: Any) -> dict[str, Any]:
    return {
        "key": f"a-{i}",
        "buy_currency": "USD",
        "buy_amount": f"{10 + i}.00",
        "sell_currency": "AUD",
        "beneficiary_id": bid,
        "pay_reason": "supplier invoice",
        "pay_reference": f"A-{i}",
        **extra,
    }


AMOUNTS_32 = [10.1, 20.7, 1234.56, 99.99, 5.01]


def quoted_amounts(sb: Sandbox, c: fxpay.Client, out: Any) -> list[Decimal]:
    """The buy amount of each row's quote, as the sandbox holds it."""
    return [c.get_quote(q).buy_amount for q in out]


def test_a_polars_float32_amount_is_sent_by_its_own_shortest_text(sb: Sandbox, client: fxpay.Client) -> None:
    pl = need("polars")
    bid = client.create_beneficiary(make_beneficiary())
    frame = pl.DataFrame([row(bid, i) for i in range(len(AMOUNTS_32))]).with_columns(pl.Series("buy_amount", AMOUNTS_32, dtype=pl.Float32))
    out = client.pay_out(frame, funding_source=FUNDING, progress=False)
    assert list(out["status"]) == ["booked"] * len(AMOUNTS_32), list(out["error"])
    sent = quoted_amounts(sb, client, out["quote_id"])
    assert sent == [Decimal(str(a)) for a in AMOUNTS_32]


def test_a_pandas_float32_amount_is_sent_by_its_own_shortest_text(sb: Sandbox, client: fxpay.Client) -> None:
    pd = need("pandas")
    np = need("numpy")
    bid = client.create_beneficiary(make_beneficiary())
    frame = pd.DataFrame([row(bid, i) for i in range(len(AMOUNTS_32))])
    frame["buy_amount"] = np.array(AMOUNTS_32, dtype=np.float32)
    out = client.pay_out(frame, funding_source=FUNDING, progress=False)
    assert list(out["status"]) == ["booked"] * len(AMOUNTS_32), list(out["error"])
    assert quoted_amounts(sb, client, out["quote_id"]) == [Decimal(str(a)) for a in AMOUNTS_32]


def test_a_numpy_float32_in_a_list_row_is_a_type_error_naming_its_cell(sb: Sandbox, client: fxpay.Client) -> None:
    np = need("numpy")
    rows = [row("b", 0), row("b", 1, buy_amount=np.float32(0.1))]
    with pytest.raises(TypeError, match=r"rows\[1\]\.buy_amount must be a Decimal, int, str or float, not float32"):
        client.pay_out(rows, funding_source=FUNDING, progress=False)
    assert sb.stats()["requests"] == 0


def test_the_shortest_32_bit_text_reads_back() -> None:
    from fxpay._payouts import _float32_text

    np = need("numpy")
    values = np.array([0.1, 1e-7, 3.4e38, 16777217.0, 0.3, 1 / 3], dtype=np.float32)
    for v in values:
        text = _float32_text(float(v))
        assert np.float32(text) == v, (v, text)
        assert len(text) <= len(repr(float(v))), (v, text)
    assert _float32_text(float(np.float32(0.1))) == "0.1"


def test_an_amount_too_large_to_hold_refuses_its_row_only(sb: Sandbox, client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())
    rows = [row(bid, 0, buy_amount=10**400), row(bid, 1, buy_amount="1234567890123456789012345678.9"), row(bid, 2)]
    out = client.pay_out(rows, funding_source=FUNDING, progress=False)
    assert [r["status"] for r in out] == ["refused", "refused", "booked"], [r["error"] for r in out]
    assert "rows[0].buy_amount cannot be held exactly" in out[0]["error"]
    assert out[1]["error"].startswith("rows[1]"), out[1]["error"]
    assert sb.stats()["deals"] == 1

"""Issue 46 item 13: a ``pay_out`` progress callback runs off the rows' path. A callback that
takes 0.2 s made 20 rows at concurrency 8 take 4 s (every report was told, one after the
other, before ``pay_out`` returned); a callback that keeps up is told every report, one that
falls behind by more than 8 has them collapsed into the latest, and the last one, with every
row counted, is always told. A callback that raises is reported
once (a RuntimeWarning), not once a row. Real sandbox over loopback, real SQLite journal."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import make_beneficiary

FUNDING = "Own account"
ROWS = 20
SLOW = 0.2


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


@pytest.fixture
def client(sb: Sandbox, tmp_path: Path) -> Iterator[fxpay.Client]:
    with sb.client(journal=fxpay.SqliteJournal(tmp_path / "journal.db")) as c:
        yield c


def table(bid: str, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "key": f"{prefix}-{i}",
            "buy_currency": "USD",
            "buy_amount": f"{10 + i}.00",
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "supplier invoice",
            "pay_reference": f"P-{i}",
        }
        for i in range(ROWS)
    ]


def test_a_slow_callback_does_not_hold_the_rows_back(client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())
    started = time.monotonic()
    client.pay_out(table(bid, "plain"), funding_source=FUNDING, concurrency=8, progress=False)
    without = time.monotonic() - started

    seen: list[fxpay.PayoutProgress] = []

    def slow(p: fxpay.PayoutProgress) -> None:
        seen.append(p)
        time.sleep(SLOW)

    started = time.monotonic()
    out = client.pay_out(table(bid, "slow"), funding_source=FUNDING, concurrency=8, progress=slow)
    took = time.monotonic() - started
    assert [r["status"] for r in out] == ["booked"] * ROWS
    # The last report counts every row, and pay_out returned only after telling it.
    assert seen[-1] == fxpay.PayoutProgress(done=ROWS, total=ROWS, booked=ROWS, replayed=0, unknown=0, refused=0)
    assert [p.done for p in seen] == sorted({p.done for p in seen}), seen
    # Coalesced: the callback fell behind by more than 8 reports, so it was told fewer
    # reports than rows, and pay_out waited for a few calls after the rows, not for 20.
    print(f"{took:.2f} s with a {SLOW} s callback ({len(seen)} reports), {without:.2f} s without")
    assert len(seen) < ROWS, seen
    assert took < without + 6 * SLOW, f"{took:.2f} s with a {SLOW} s callback, {without:.2f} s without ({len(seen)} reports)"


def test_a_raising_callback_is_reported_once(client: fxpay.Client) -> None:
    """Turn 5: reported once as a RuntimeWarning naming the exception (it was
    sys.unraisablehook), told later reports still, the payout goes on."""
    bid = client.create_beneficiary(make_beneficiary())
    calls: list[int] = []

    def broken(p: fxpay.PayoutProgress) -> None:
        calls.append(p.done)
        time.sleep(0.01)  # slow enough to be told several reports, not one
        raise RuntimeError("the progress widget is gone")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = client.pay_out(table(bid, "broken"), funding_source=FUNDING, concurrency=2, progress=broken)
    assert [r["status"] for r in out] == ["booked"] * ROWS
    assert len(calls) > 1, calls
    assert calls[-1] == ROWS
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1, said
    assert "RuntimeError" in said[0], said
    assert "the progress widget is gone" in said[0], said

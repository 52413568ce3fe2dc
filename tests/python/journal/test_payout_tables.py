"""``pay_out``'s tables as a notebook user builds them: only pandas and polars DataFrames (or a
list of mappings), cells from pandas as plain values (numpy integers unwrapped, missing cells
``None``), an id a row gave kept when the row was refused, and the progress bar that
``progress=True`` draws with tqdm. Real sandbox, real SQLite journal."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay.testing import UnfiredFaultWarning

from conftest import make_beneficiary, need

FUNDING = "Own account"


@pytest.fixture
def client(fxpay_sandbox: Any, tmp_path: Path) -> Any:
    with fxpay_sandbox.client(journal=fxpay.SqliteJournal(tmp_path / "journal.db")) as c:
        yield c


def row(bid: str | None, i: int, **extra: Any) -> dict[str, Any]:
    return {
        "key": f"t-{i}",
        "buy_currency": "USD",
        "buy_amount": f"{10 + i}.00",
        "sell_currency": "AUD",
        "beneficiary_id": bid,
        "pay_reason": "supplier invoice",
        "pay_reference": f"T-{i}",
        **extra,
    }


class DataFrame:
    """Named like a DataFrame, from neither pandas nor polars (a Spark or Dask frame, say)."""


def test_only_pandas_and_polars_frames_are_tables(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    pd = need("pandas")
    frame = pd.DataFrame([row("b", 0)])
    with pytest.raises(TypeError, match=r"rows must be a list or an iterable of mappings, .* not DataFrame"):
        client.pay_out(DataFrame(), funding_source=FUNDING, progress=False)
    # A pandas Series is an iterable, but of cells: its first one is refused (turn 4: any
    # iterable of mappings is a table).
    with pytest.raises(TypeError, match=r"rows\[0\] must be a mapping, not str"):
        client.pay_out(frame["key"], funding_source=FUNDING, progress=False)
    assert fxpay_sandbox.stats()["requests"] == 0


def test_pandas_cells_arrive_as_plain_values(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    """What pandas makes of a table: integer amounts become numpy integers, a column that
    some rows lack is NaN in them, and a nullable string column holds ``pd.NA``. Each is read
    as the plain value (an int, None), so every row books."""
    pd = need("pandas")
    bid = client.create_beneficiary(make_beneficiary())
    records = [{**row(bid, i), "buy_amount": 100 + i} for i in range(3)]
    # The last row names a new beneficiary instead of an id: its beneficiary_id cell, and
    # the other rows' beneficiary cells, are missing.
    records.append(
        {k: v for k, v in row(None, 3).items() if k != "beneficiary_id"} | {"buy_amount": 103, "beneficiary": make_beneficiary()}
    )
    df = pd.DataFrame(records)
    assert str(df["buy_amount"].dtype) == "int64"
    assert df["beneficiary"].isna().sum() == 3
    assert df["beneficiary_id"].isna().sum() == 1
    out = client.pay_out(df, funding_source=FUNDING, progress=False)
    assert list(out["status"]) == ["booked"] * 4, list(out["error"])
    assert len(fxpay_sandbox.deals()) == 4
    # The same table with a nullable string column: its missing cell is pd.NA.
    df2 = pd.DataFrame([{**r, "key": f"na-{i}", "pay_reference": f"NA-{i}"} for i, r in enumerate(records)])
    df2["beneficiary_id"] = df2["beneficiary_id"].astype("string")
    assert df2["beneficiary_id"].isna().sum() == 1
    out2 = client.pay_out(df2, funding_source=FUNDING, progress=False)
    assert list(out2["status"]) == ["booked"] * 4, list(out2["error"])


def test_a_refused_row_keeps_the_ids_it_gave(client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())
    out = client.pay_out([row(bid, 0), row(bid, 1, buy_currency="XXX")], funding_source=FUNDING, progress=False)
    assert [r["status"] for r in out] == ["booked", "refused"]
    assert out[1]["beneficiary_id"] == bid  # the row's own id, not None
    assert (out[1]["quote_id"], out[1]["deal_id"]) == (None, None)


def test_progress_true_draws_one_tqdm_bar_to_the_end(client: fxpay.Client, capfd: pytest.CaptureFixture[str]) -> None:
    need("tqdm")
    bid = client.create_beneficiary(make_beneficiary())
    rows = [row(bid, i) for i in range(5)] + [row(bid, 5, buy_currency="XXX")]
    capfd.readouterr()
    client.pay_out(rows, funding_source=FUNDING, progress=True)
    err = capfd.readouterr().err
    # tqdm redraws its line with "\r" (its postfix in key order); the last drawing is the final state, then a newline
    # when the bar is closed.
    assert err.endswith("\n"), repr(err[-200:])
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("pay_out: 100%"), last
    assert "6/6" in last, last
    assert "booked=5, refused=1, replayed=0, unknown=0" in last, last
    assert err.count("pay_out:") >= 1
    # Run again: every row is replayed, on a new bar.
    client.pay_out(rows, funding_source=FUNDING, progress=True)
    last = capfd.readouterr().err.rstrip("\n").split("\r")[-1]
    assert "6/6" in last, last
    assert "booked=0, refused=1, replayed=5, unknown=0" in last, last
    # No bar without progress, and none for an empty table.
    client.pay_out(rows, funding_source=FUNDING, progress=False)
    client.pay_out([], funding_source=FUNDING, progress=True)
    assert capfd.readouterr().err == ""


def test_cells_of_any_pandas_are_read_as_plain_values() -> None:
    """pandas 3 hands ``to_dict`` native values already; older ones (and numpy-backed
    frames) may hand numpy scalars, ``pd.NA`` or ``pd.NaT``. Each cell is read the same way
    whatever pandas gave."""
    np = need("numpy")
    pd = need("pandas")
    from fxpay._payouts import _plain

    for given, plain in [(np.int64(7), 7), (np.bool_(True), True), ("x", "x"), (None, None)]:
        got = _plain(given)
        assert (type(got), got) == (type(plain), plain), given
    for missing in (pd.NA, pd.NaT, float("nan"), np.float64("nan")):
        assert _plain(missing) is None, missing


def test_a_polars_result_has_text_columns_and_decimal_amounts(client: fxpay.Client) -> None:
    pl = need("polars")
    bid = client.create_beneficiary(make_beneficiary())
    out = client.pay_out(pl.DataFrame([row(bid, i) for i in range(3)]), funding_source=FUNDING, progress=False)
    # Text columns are text, so polars expressions work on them; amounts stay Decimal.
    assert out.schema["status"] == pl.String
    assert out.schema["deal_id"] == pl.String
    assert out.filter(pl.col("status") == "booked").height == 3
    assert all(isinstance(v, Decimal) for v in out["sell_amount"].to_list())


def test_progress_true_without_tqdm_pays_and_draws_nothing(fxpay_sandbox: Any, tmp_path: Path) -> None:
    # tqdm is the optional extra fxpay[notebook]: without it, progress=True is no bar.
    code = textwrap.dedent(
        """
        import json, sys
        sys.modules["tqdm"] = sys.modules["tqdm.auto"] = None  # as if not installed
        import fxpay
        cfg = json.loads(sys.argv[1])
        with fxpay.Client(cfg["id"], cfg["secret"], base_url=cfg["url"], journal=fxpay.SqliteJournal(cfg["journal"])) as c:
            out = c.pay_out(cfg["rows"], funding_source="Own account", progress=True)
        print(json.dumps([r["status"] for r in out]))
        """
    )
    sb = fxpay_sandbox
    with sb.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    cfg = {
        "id": sb.client_id,
        "secret": sb.client_secret,
        "url": sb.base_url,
        "journal": str(tmp_path / "j.db"),
        "rows": [row(bid, i) for i in range(3)],
    }
    p = subprocess.run([sys.executable, "-c", code, json.dumps(cfg)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == ["booked"] * 3
    assert p.stderr == ""


def test_ctrl_c_closes_the_progress_bar_before_the_interrupt_propagates(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A notebook keeps the last traceback, and with it the bar: unless pay_out closes its
    bar on the way out, it stays open forever. The interrupt comes while deals are in flight."""
    code = textwrap.dedent(
        """
        import json, os, signal, sys, threading, time
        import fxpay
        from tqdm import tqdm
        cfg = json.loads(sys.argv[1])
        with fxpay.Client(cfg["id"], cfg["secret"], base_url=cfg["url"], journal=fxpay.SqliteJournal(cfg["journal"])) as c:
            def interrupt():
                while not tqdm._instances:  # the bar is drawn at the first row's end
                    time.sleep(0.005)
                os.kill(os.getpid(), signal.SIGINT)
            threading.Thread(target=interrupt, daemon=True).start()
            try:
                c.pay_out(cfg["rows"], funding_source="Own account", concurrency=2, progress=True)
            except KeyboardInterrupt as e:
                held = e  # as a notebook holds it: the traceback, its frames, their locals
                print(json.dumps({"open_bars": len(tqdm._instances), "held": held is not None}))
        """
    )
    sb = fxpay_sandbox
    with sb.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    rows = [row(bid, i) for i in range(40)]
    for _ in rows:
        sb.delay_next("POST /v1/payments/deals", 0.05)
    cfg = {"id": sb.client_id, "secret": sb.client_secret, "url": sb.base_url, "journal": str(tmp_path / "j.db"), "rows": rows}
    p = subprocess.run([sys.executable, "-c", code, json.dumps(cfg)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"open_bars": 0, "held": True}
    assert 0 < len(sb.deals()) < 40
    # The rows never started left their delays unused: said, and cleared.
    with pytest.warns(UnfiredFaultWarning, match="never fired"):
        sb.reset()


def test_a_cancelled_awaitable_payout_closes_its_progress_bar(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    need("tqdm")
    import asyncio

    from tqdm import tqdm

    sb = fxpay_sandbox
    bid = client.create_beneficiary(make_beneficiary())
    rows = [row(bid, i) for i in range(40)]
    for _ in rows:
        sb.delay_next("POST /v1/payments/deals", 0.05)

    async def main() -> BaseException:
        task = asyncio.ensure_future(client.pay_out_async(rows, funding_source=FUNDING, concurrency=2, progress=True))
        while not tqdm._instances:  # type: ignore[attr-defined]  # the bar is drawn at the first row's end
            await asyncio.sleep(0.005)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as e:
            return e  # held, with its traceback, as a notebook holds the last one
        raise AssertionError("the payout was not cancelled")

    held = asyncio.run(main())
    assert isinstance(held, asyncio.CancelledError)
    assert len(tqdm._instances) == 0  # type: ignore[attr-defined]
    assert 0 < len(sb.deals()) < 40
    with pytest.warns(UnfiredFaultWarning, match="never fired"):
        sb.reset()


def test_after_close_the_bar_is_neither_made_nor_drawn(capfd: pytest.CaptureFixture[str]) -> None:
    """The core's progress thread may report after a cancelled awaitable closed the sink:
    those reports draw nothing, and make no bar if none was made yet."""
    need("tqdm")
    from tqdm import tqdm

    from fxpay._payouts import _sink

    update, close = _sink(True, 3)
    close()
    update(1, 3, 1, 0, 0, 0)
    assert len(tqdm._instances) == 0  # type: ignore[attr-defined]
    # A bar made before the close is closed by it, and later reports leave it as it was.
    update, close = _sink(True, 3)
    update(1, 3, 1, 0, 0, 0)
    assert len(tqdm._instances) == 1  # type: ignore[attr-defined]
    close()
    drawn = capfd.readouterr().err
    update(3, 3, 3, 0, 0, 0)
    assert len(tqdm._instances) == 0  # type: ignore[attr-defined]
    assert capfd.readouterr().err == ""
    assert "1/3" in drawn.rstrip("\n").split("\r")[-1]

"""``Client.pay_out``'s Python side: a table in (a list of mappings, a pandas or a polars
DataFrame) and the same kind out, and the progress bar. The rows themselves run in the Rust
core, in one call for the whole table (``Client._pay_out``)."""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ._fxpay import Client

__all__ = ["RESULT_FIELDS", "PayoutProgress"]

#: The row fields that hold money.
AMOUNT_COLUMNS = ("buy_amount",)

#: The fields a result row adds to its input row.
RESULT_FIELDS = ("quote_id", "beneficiary_id", "deal_id", "sell_amount", "status", "error")


class PayoutProgress(NamedTuple):
    """How far a payout is: ``done`` of ``total`` rows ended, and how each one ended.

    (A named tuple, not a dataclass: ``import fxpay`` stays without ``inspect``.)
    """

    done: int
    total: int
    booked: int
    replayed: int
    unknown: int
    refused: int


def _kind(rows: object) -> str:
    module = type(rows).__module__.split(".")[0]
    name = type(rows).__name__
    if name == "DataFrame" and module in ("pandas", "polars"):
        return module
    if isinstance(rows, (list, tuple)):
        return "list"
    raise TypeError(f"rows must be a list of mappings, a pandas.DataFrame or a polars.DataFrame, not {name}")


def _plain(v: Any) -> Any:
    """A cell as a plain Python value: numpy scalars unwrapped, missing values as None."""
    if v is None:
        return None
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if type(v).__name__ in ("NAType", "NaTType"):
        return None
    return v


def _float32_text(v: float) -> str:
    """The shortest text that reads back as the 32-bit float ``v`` (``0.1``, not the
    ``0.10000000149011612`` its widening to a 64-bit float writes): money never passes
    through a binary float on its way to the wire."""
    if not math.isfinite(v):
        return repr(v)  # the core refuses it by name
    for digits in range(1, 10):  # 9 significant digits always read back
        text = f"{v:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == v:
            return text
    return repr(v)


def _float32_columns(rows: Any, kind: str) -> set[str]:
    """The amount columns of a frame that hold 32-bit floats (a pandas ``float32`` or a
    polars ``Float32``): their cells are read by their own shortest text."""
    dtypes = dict(rows.dtypes.items()) if kind == "pandas" else dict(rows.schema.items())
    return {str(c) for c in AMOUNT_COLUMNS if c in dtypes and str(dtypes[c]).lower() == "float32"}


def _records(rows: Any, kind: str) -> list[dict[str, Any]]:
    if kind in ("pandas", "polars"):
        records = rows.to_dict("records") if kind == "pandas" else rows.to_dicts()
        narrow = _float32_columns(rows, kind)
        out = [{str(k): _plain(v) for k, v in r.items()} for r in records]
        for rec in out:
            for c in narrow:
                if isinstance(rec.get(c), float):
                    rec[c] = _float32_text(rec[c])
        return out
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise TypeError(f"rows[{i}] must be a mapping, not {type(r).__name__}")
        out.append({str(k): v for k, v in r.items()})
    return out


def _result(rows: Any, kind: str, records: list[dict[str, Any]], outcomes: list[dict[str, Any] | None]) -> Any:
    filled = [o if o is not None else dict.fromkeys(RESULT_FIELDS) for o in outcomes]
    # An id the row gave (its beneficiary_id) stays when the row ended before reaching it.
    for rec, o in zip(records, filled, strict=True):
        for f in RESULT_FIELDS:
            if o[f] is None and rec.get(f) is not None:
                o[f] = rec[f]
    if kind == "list":
        return [{**rec, **o} for rec, o in zip(records, filled, strict=True)]
    columns = {f: [o[f] for o in filled] for f in RESULT_FIELDS}
    if kind == "pandas":
        import pandas as pd

        out = rows.copy()
        for f, values in columns.items():
            out[f] = pd.Series(values, index=rows.index, dtype="object")
        return out
    import polars as pl

    series = [pl.Series(f, values, dtype=pl.Object if f == "sell_amount" else pl.Utf8) for f, values in columns.items()]
    return rows.with_columns(series)


def _sink(progress: object, total: int) -> tuple[Callable[..., None], Callable[[], None]]:
    """What to call as rows end, and what to call once the table has ended."""
    if isinstance(progress, bool):
        if not progress or total == 0:
            return (lambda *_: None), (lambda: None)
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return (lambda *_: None), (lambda: None)
        bars: list[Any] = []  # made on the first row's end: a refused table shows none
        last = [0]
        # Reports come on a thread of the core's; `close` on the caller's. A cancelled
        # awaitable closes while reports may still come (or the first one is still making
        # the bar): after `close`, nothing is drawn and no bar is made.
        lock = threading.Lock()
        closed = [False]

        def update(done: int, total: int, booked: int, replayed: int, unknown: int, refused: int) -> None:
            with lock:
                if closed[0]:
                    return
                if not bars:
                    bars.append(tqdm(total=total, unit="row", desc="pay_out"))
                bar = bars[0]
                bar.update(done - last[0])
                last[0] = done
                bar.set_postfix(booked=booked, replayed=replayed, unknown=unknown, refused=refused, refresh=False)

        def close() -> None:
            with lock:
                closed[0] = True
                for bar in bars:
                    bar.close()

        return update, close
    if callable(progress):
        cb = progress

        def report(*counts: int) -> None:
            cb(PayoutProgress(*counts))

        return report, (lambda: None)
    raise TypeError(f"progress must be a bool or a callable, not {type(progress).__name__}")


def pay_out(client: Client, rows: Any, funding_source: str, concurrency: int, progress: object) -> Any:
    kind = _kind(rows)
    records = _records(rows, kind)
    update, close = _sink(progress, len(records))
    try:
        outcomes = client._pay_out(records, funding_source, concurrency, update)
    finally:
        close()
    return _result(rows, kind, records, outcomes)


def pay_out_async(client: Client, rows: Any, funding_source: str, concurrency: int, progress: object) -> Coroutine[Any, Any, Any]:
    kind = _kind(rows)
    records = _records(rows, kind)
    update, close = _sink(progress, len(records))
    try:
        started = client._pay_out_async(records, funding_source, concurrency, update)
    except BaseException:
        close()
        raise

    async def run() -> Any:
        try:
            outcomes = await started
        finally:
            close()
        return _result(rows, kind, records, outcomes)

    return run()

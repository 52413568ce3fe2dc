"""``Client.pay_out``'s and ``Client.pay_out_iter``'s Python side: a table in (a list of
mappings, a pandas or a polars DataFrame; for ``pay_out_iter`` and ``pay_out`` also any
iterable of mappings or a polars LazyFrame) and the results out, and the progress bar. The
rows themselves run in the Rust core: a whole list or DataFrame in one call
(``Client._pay_out``); a stream row by row (``Client._pay_out_stream``), read only as fast
as rows end, so that memory grows with ``concurrency``, not with the table."""

from __future__ import annotations

import asyncio
import math
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ._fxpay import Client

__all__ = ["RESULT_FIELDS", "PayoutProgress", "pay_out_iter", "pay_out_iter_async"]

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
    if name == "LazyFrame" and module == "polars":
        return "lazy"
    if isinstance(rows, (list, tuple)):
        return "list"
    if isinstance(rows, Iterable) and not isinstance(rows, (str, bytes, bytearray, Mapping)):
        return "iterable"
    raise TypeError(
        f"rows must be a list or an iterable of mappings, a pandas.DataFrame, a polars.DataFrame or a polars.LazyFrame, not {name}"
    )


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
                    bars.append(tqdm(total=total or None, unit="row", desc="pay_out"))
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


def _indexed(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for i, rec in enumerate(records):
        yield {**rec, "_index": i}


def pay_out(client: Client, rows: Any, funding_source: str, concurrency: int, max_rate: object, progress: object) -> Any:
    kind = _kind(rows)
    if kind in ("iterable", "lazy") or (max_rate is not None and kind == "list"):
        results = pay_out_iter(client, _indexed(_stream_records(rows, kind)), funding_source, concurrency, max_rate, progress)
        return _in_order(results, rows, kind)
    if max_rate is not None:  # a DataFrame, paced: streamed, then put back in the frame's order
        records = _records(rows, kind)
        results = pay_out_iter(client, _indexed(iter(records)), funding_source, concurrency, max_rate, progress)
        ordered = _in_order(results, records, "list")
        return _result(rows, kind, records, [{f: r.get(f) for f in RESULT_FIELDS} for r in ordered])
    records = _records(rows, kind)
    update, close = _sink(progress, len(records))
    try:
        outcomes = client._pay_out(records, funding_source, concurrency, update)
    finally:
        close()
    return _result(rows, kind, records, outcomes)


def pay_out_async(
    client: Client, rows: Any, funding_source: str, concurrency: int, max_rate: object, progress: object
) -> Coroutine[Any, Any, Any]:
    kind = _kind(rows)
    if kind in ("iterable", "lazy") or max_rate is not None:
        records = None if kind in ("iterable", "lazy") else _records(rows, kind)
        source = _stream_records(rows, kind) if records is None else iter(records)
        results = pay_out_iter_async(client, _indexed(source), funding_source, concurrency, max_rate, progress)

        async def streamed() -> Any:
            got = [r async for r in results]
            if records is None:
                return _in_order(got, rows, kind)
            ordered = _in_order(got, records, "list")
            if kind == "list":
                return ordered
            return _result(rows, kind, records, [{f: r.get(f) for f in RESULT_FIELDS} for r in ordered])

        return streamed()
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


# -- streamed payouts (pay_out_iter) ------------------------------------------------------------

#: Rows read from a DataFrame (or a LazyFrame's batches) at a time: a slice is turned into
#: dicts only when its rows are about to be paid.
SLICE_ROWS = 1000


def _stream_records(rows: Any, kind: str) -> Iterator[dict[str, Any]]:
    """The table's records, read lazily: a slice of a frame at a time, an iterable as it
    yields."""
    if kind == "pandas":
        for start in range(0, len(rows), SLICE_ROWS):
            yield from _records(rows.iloc[start : start + SLICE_ROWS], "pandas")
    elif kind == "polars":
        for part in rows.iter_slices(SLICE_ROWS):
            yield from _records(part, "polars")
    elif kind == "lazy":
        for part in rows.collect_batches(chunk_size=SLICE_ROWS):
            yield from _records(part, "polars")
    else:
        for i, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise TypeError(f"rows[{i}] must be a mapping, not {type(r).__name__}")
            yield {str(k): v for k, v in r.items()}


def _concurrency(concurrency: object) -> int:
    from .errors import InvalidRequestError

    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise TypeError(f"concurrency must be an int, not {type(concurrency).__name__}")
    if not 1 <= concurrency <= 1024:
        raise InvalidRequestError("concurrency must be 1 to 1024")
    return concurrency


def _max_rate(max_rate: object) -> float | None:
    from .errors import InvalidRequestError

    if max_rate is None:
        return None
    if isinstance(max_rate, bool) or not isinstance(max_rate, (int, float)):
        raise TypeError(f"max_rate must be a number of rows per second or None, not {type(max_rate).__name__}")
    # An int is compared as an int: float() of one beyond 1e308 (either sign) would overflow.
    rate = float(max_rate) if not (isinstance(max_rate, int) and not 0 < max_rate <= 10**9) else math.nan
    if not (0 < rate < math.inf):
        raise InvalidRequestError("max_rate must be a number of rows per second above 0 (or None: no cap)")
    return rate


class _Pace:
    """Row starts at most ``rate`` per second: the n-th start waits until ``n / rate`` seconds
    after the first."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.first = 0.0
        self.started = 0

    def delay(self) -> float:
        """How long to wait before the next start (and counts it)."""
        if self.rate is None:
            return 0.0
        now = time.monotonic()
        if self.started == 0:
            self.first = now
        due = self.first + self.started / self.rate
        self.started += 1
        return max(0.0, due - now)


def _merged(rec: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    """A row's result: its input fields and its outcome's (an id the row gave stays when the
    row ended before reaching it)."""
    out = {**rec, **outcome}
    for f in RESULT_FIELDS:
        if outcome.get(f) is None and rec.get(f) is not None:
            out[f] = rec[f]
    return out


class _Tally:
    """The progress counts of a streamed payout, reported to ``update``."""

    def __init__(self, update: Callable[..., None], total: int) -> None:
        self.update = update
        self.total = total
        self.counts = {"booked": 0, "replayed": 0, "unknown": 0, "refused": 0}
        self.done = 0

    def row(self, outcome: dict[str, Any]) -> None:
        self.done += 1
        status = outcome.get("status")
        if status in self.counts:
            self.counts[status] += 1
        c = self.counts
        self.update(self.done, self.total, c["booked"], c["replayed"], c["unknown"], c["refused"])


def _total(rows: Any, kind: str) -> int:
    if kind == "lazy":
        return 0
    try:
        return len(rows)
    except TypeError:
        return 0


class _Run:
    """One streamed payout: the rows in flight (at most ``limit``), the table read no faster,
    the pace and the progress counts. The blocking and the async iterator share it and only
    wait their own way."""

    def __init__(self, client: Client, rows: Any, funding_source: str, concurrency: object, max_rate: object, progress: object) -> None:
        kind = _kind(rows)
        self.limit = _concurrency(concurrency)
        self.pace = _Pace(_max_rate(max_rate))
        self.stream = client._pay_out_stream(funding_source)
        total = _total(rows, kind)
        update, self.close = _sink(progress, total or 1)
        self.tally = _Tally(update, total)
        self.source = enumerate(_stream_records(rows, kind))
        self.exhausted = False
        self.pending: dict[int, dict[str, Any]] = {}

    def next_row(self) -> tuple[float, int, dict[str, Any]] | None:
        """The next row to start and how long to wait first; None while ``limit`` rows are in
        flight or the table has ended."""
        if self.exhausted or len(self.pending) >= self.limit:
            return None
        nxt = next(self.source, None)
        if nxt is None:
            self.exhausted = True
            return None
        return (self.pace.delay(), *nxt)

    def start(self, i: int, rec: dict[str, Any]) -> None:
        self.stream.push(i, rec)
        self.pending[i] = rec

    def ended(self, i: int, outcome: dict[str, Any]) -> dict[str, Any]:
        self.tally.row(outcome)
        return _merged(self.pending.pop(i), outcome)


def pay_out_iter(
    client: Client, rows: Any, funding_source: str, concurrency: object, max_rate: object, progress: object
) -> Iterator[dict[str, Any]]:
    """Yields each row's result as it ends (not in the table's order: ``key`` tells them
    apart), keeping at most ``concurrency`` rows in flight and reading the table no faster."""
    return _iterate(_Run(client, rows, funding_source, concurrency, max_rate, progress))


def _iterate(run: _Run) -> Iterator[dict[str, Any]]:
    try:
        while True:
            while (nxt := run.next_row()) is not None:
                wait, i, rec = nxt
                if wait:
                    time.sleep(wait)
                run.start(i, rec)
            if not run.pending:
                return
            yield run.ended(*run.stream.next())
    finally:
        run.close()


def pay_out_iter_async(
    client: Client, rows: Any, funding_source: str, concurrency: object, max_rate: object, progress: object
) -> AsyncIterator[dict[str, Any]]:
    """:func:`pay_out_iter`, as an async iterator (rows paced with ``asyncio.sleep``)."""
    return _iterate_async(_Run(client, rows, funding_source, concurrency, max_rate, progress))


async def _iterate_async(run: _Run) -> AsyncIterator[dict[str, Any]]:
    try:
        while True:
            while (nxt := run.next_row()) is not None:
                wait, i, rec = nxt
                if wait:
                    await asyncio.sleep(wait)
                run.start(i, rec)
            if not run.pending:
                return
            yield run.ended(*(await run.stream.next_async()))
    finally:
        run.close()


def _in_order(results: Iterable[dict[str, Any]], rows: Any, kind: str) -> Any:
    """``pay_out``'s result of a streamed table: the results in the table's order (a list of
    dicts; a polars DataFrame for a LazyFrame)."""
    ordered = sorted(results, key=lambda r: r.pop("_index"))
    if kind != "lazy":
        return ordered
    import polars as pl

    names = list(ordered[0]) if ordered else []
    return pl.DataFrame({n: pl.Series(n, [r.get(n) for r in ordered], dtype=pl.Object if n == "sell_amount" else None) for n in names})

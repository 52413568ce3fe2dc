"""``Client.pay_out``'s and ``Client.pay_out_iter``'s Python side: a table in (a list of
mappings, a pandas or a polars DataFrame; for ``pay_out_iter`` and ``pay_out`` also any
iterable of mappings or a polars LazyFrame) and the results out, and the progress bar. The
rows themselves run in the Rust core, streamed row by row (``Client._pay_out_stream``) and
read only as fast as rows end, so that memory grows with ``concurrency``, not with the
table."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import struct
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterable, Iterator, Mapping
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
    return rows.with_columns([_polars_column(f, columns.pop(f)) for f in RESULT_FIELDS])


#: The most digits a polars ``Decimal`` column holds (a 128-bit integer).
DECIMAL_DIGITS = 38


def _decimal_scale(values: list[Any]) -> tuple[int, int] | None:
    """The scale and the integer digits a polars ``Decimal`` column needs to hold ``values``
    (``Decimal`` or None) exactly; None when it cannot (a value that is no finite ``Decimal``,
    or more than 38 digits): then the column holds the Python objects."""
    from decimal import Decimal

    scale = digits = 0
    for v in values:
        if v is None:
            continue
        if type(v) is not Decimal or not v.is_finite():
            return None
        t = v.as_tuple()
        exponent = int(t.exponent)
        scale = max(scale, -exponent)
        digits = max(digits, len(t.digits) + exponent)
    return (scale, digits) if scale + digits <= DECIMAL_DIGITS else None


def _polars_column(name: str, values: list[Any], fit: tuple[int, int] | None = None) -> Any:
    """A result column as a polars Series: text, or for ``sell_amount`` a ``Decimal`` column
    whose scale holds every value exactly (polars would round a value to a scale too small;
    money never passes through a float), ``pl.Object`` when no ``Decimal`` column can."""
    import polars as pl

    if name != "sell_amount":
        return pl.Series(name, values, dtype=pl.Utf8)
    fit = fit or _decimal_scale(values)
    if fit is None:
        return pl.Series(name, values, dtype=pl.Object)
    # Through their plain text (``format(v, "f")``, no exponent), cast in Rust: polars makes a
    # Decimal column from Decimal objects by way of numpy (some 13 MB more to import).
    text = pl.Series(name, [None if v is None else format(v, "f") for v in values], dtype=pl.Utf8)
    return text.cast(pl.Decimal(DECIMAL_DIGITS, fit[0]), strict=True)


def _sink(progress: object, total: int) -> tuple[Callable[..., None], Callable[[], None]]:
    """What to call as rows end, and what to call once the table has ended (for a callable:
    wait until its last report is told, as :meth:`_Told.finish`). The fan-outs of
    ``fxpay.contrib`` use it."""
    update, close, told = _progress_sink(progress, total)
    return update, (close if told is None else told.finish)


def _progress_sink(progress: object, total: int) -> tuple[Callable[..., None], Callable[[], None], _Told | None]:
    """What to call as rows end (``update(done, total, booked, replayed, unknown, refused)``;
    a ``total`` of 0 is unknown), what to call once the table has ended, and the thread that
    tells a callable (None for the bar, which is drawn as the row ends).

    One rule for every payout entry: a progress callable (or the bar) that raises is reported
    once, as a ``RuntimeWarning`` naming it, and is still told of later rows; the payout goes
    on. A ``KeyboardInterrupt`` (or any other ``BaseException``) from it is not caught: it
    stops the payout as Ctrl-C does."""
    if isinstance(progress, bool):
        if not progress:
            return (lambda *_: None), (lambda: None), None
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return (lambda *_: None), (lambda: None), None
        bars: list[Any] = []  # made on the first row's end: a refused table shows none
        last = [0]
        # `close` may come from another thread than the reports (a cancelled awaitable):
        # after `close`, nothing is drawn and no bar is made.
        lock = threading.Lock()
        closed = [False]
        known: list[set[Any]] = []
        tries = [0]

        def draw(done: int, total: int, booked: int, replayed: int, unknown: int, refused: int) -> None:
            with lock:
                if closed[0]:
                    return
                if not bars:
                    # A Ctrl-C may come while tqdm makes the bar (its monitor thread starts),
                    # after tqdm registered it and before it is ours. Then `known` keeps what
                    # was open before the first try, and `close` closes every bar made since.
                    if not known:
                        known.append(set(getattr(tqdm, "_instances", ())))
                    tries[0] += 1
                    bars.append(tqdm(total=total or None, unit="row", desc="pay_out"))
                    if tries[0] == 1:
                        known.clear()  # made at the first try: nothing to look for
                bar = bars[0]
                # The counts first, then the move that draws them: the line a row draws holds
                # that row's own counts.
                bar.set_postfix(booked=booked, replayed=replayed, unknown=unknown, refused=refused, refresh=False)
                bar.update(done - last[0])
                last[0] = done

        def close() -> None:
            with lock:
                closed[0] = True
                for bar in bars:
                    bar.close()
                if known:  # the bar's making was interrupted
                    instances: Any = getattr(tqdm, "_instances", set())
                    for made in set(instances) - known[0]:
                        with contextlib.suppress(Exception):  # made only in part: no __init__
                            made.close()
                        instances.discard(made)

        return _reported(draw, "the progress bar"), close, None
    if callable(progress):
        cb = progress

        def report(*counts: int) -> None:
            cb(PayoutProgress(*counts))

        told = _Told(_reported(report, f"the progress callback {_name_of(cb)}"))
        return told.put, told.close, told
    raise TypeError(f"progress must be a bool or a callable, not {type(progress).__name__}")


class _Told:
    """A progress callable told off the rows' path, on a thread of its own: the rows never
    wait for it. A callable that keeps up is told every report, in order; one that falls
    behind by more than :data:`BACKLOG` reports has them collapsed into the latest, so a
    payout waits for at most that many calls after its last row (a 0.2 s callable would
    make 20 rows take 4 s). The last report, with every row counted, is always told before
    the payout returns (:meth:`finish`).

    ``report`` is already :func:`_reported` (an ``Exception`` is warned of once). A
    ``KeyboardInterrupt`` (any ``BaseException``) from it ends the telling, and is raised on
    the payout's own thread at its next report or at :meth:`finish`: the payout stops as
    Ctrl-C stops it."""

    #: How many reports may wait for a slow callable before they are collapsed.
    BACKLOG = 8

    def __init__(self, report: Callable[..., None]) -> None:
        self.report = report
        self.ready = threading.Condition(threading.Lock())
        self.waiting: collections.deque[tuple[int, ...]] = collections.deque()
        self.ended = False
        self.raised: BaseException | None = None
        self.thread = threading.Thread(target=self._tell, name="fxpay-payout-progress", daemon=True)
        self.thread.start()

    def _tell(self) -> None:
        while True:
            with self.ready:
                while not self.waiting and not self.ended:
                    self.ready.wait()
                if not self.waiting:
                    return  # ended, and every report told
                counts = self.waiting.popleft()
            try:
                self.report(*counts)
            except BaseException as e:  # Ctrl-C inside the callable: the payout's to raise
                with self.ready:
                    self.raised = e
                    self.waiting.clear()
                    self.ended = True
                return

    def put(self, *counts: int) -> None:
        """Notes a row's report (never waits for the callable); raises what the callable
        raised that stops the payout."""
        with self.ready:
            raised = self.raised
            if raised is None and not self.ended:
                if len(self.waiting) >= self.BACKLOG:
                    self.waiting.clear()  # fallen behind: only the latest counts are worth telling
                self.waiting.append(counts)
                self.ready.notify()
        if raised is not None:
            self.raised = None  # raised once
            raise raised

    def close(self) -> None:
        """No report follows the ones noted (the thread tells them and ends; nothing waits)."""
        with self.ready:
            self.ended = True
            self.ready.notify()

    def finish(self) -> None:
        """Waits until every report noted has been told; raises what stopped the callable."""
        self.close()
        self.thread.join()
        raised, self.raised = self.raised, None
        if raised is not None:
            raise raised


def _name_of(cb: object) -> str:
    name = getattr(cb, "__qualname__", None) or getattr(cb, "__name__", None) or type(cb).__name__
    return repr(name)


def _reported(update: Callable[..., None], what: str) -> Callable[..., None]:
    """``update``, whose first ``Exception`` is reported once as a warning (later ones are
    not): the payout goes on. A ``BaseException`` that is no ``Exception`` (Ctrl-C) goes
    through."""
    warned = [False]

    def safe(*counts: int) -> None:
        try:
            update(*counts)
        except Exception as e:
            if not warned[0]:
                warned[0] = True
                warnings.warn(
                    f"{what} raised {type(e).__name__}: {e}; the payout goes on (later reports are still made, and not warned about)",
                    RuntimeWarning,
                    stacklevel=2,
                )

    return safe


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
    """``max_rate`` checked as every rate is (``fxpay._rates``): None, or a real number of rows
    per second, finite, of at least 0.001 (``ConfigurationError`` otherwise)."""
    if max_rate is None:
        return None
    from ._rates import check_per_second

    return check_per_second("max_rate", max_rate)


class _Pace:
    """Row starts at most ``rate`` per second: a token bucket refilled at ``rate`` that holds
    at most :data:`BURST` tokens (1 for a rate below 1/s) and starts with one. After a stall
    (a slow source, every row in flight busy) no more than that starts at once: the rows the
    stall held back are not made up for."""

    #: The most rows that start together after a pause.
    BURST = 2.0

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.capacity = 1.0 if rate is None or rate < 1 else self.BURST
        self.tokens = 1.0
        self.at = time.monotonic()

    def wait(self) -> float:
        """Seconds until the next row may start (0: now)."""
        if self.rate is None:
            return 0.0
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self) -> None:
        if self.rate is not None:
            self.tokens -= 1


def _merged(rec: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    """A row's result: its input fields and its outcome's (an id the row gave stays when the
    row ended before reaching it)."""
    out = {**rec, **outcome}
    for f in RESULT_FIELDS:
        if outcome.get(f) is None and rec.get(f) is not None:
            out[f] = rec[f]
    return out


class _Tally:
    """The progress counts of a payout, reported to ``update`` with each row that ends."""

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
    """The table's length, when it has one (0: unknown)."""
    if kind == "lazy":
        return 0
    try:
        return len(rows)
    except TypeError:
        return 0


def _check_table(stream: Any, rows: Any, kind: str) -> None:
    """A whole table (a list, a pandas or a polars DataFrame) checked before anything is sent,
    one row at a time (nothing is kept but the keys of a list, which the list holds already):
    a wrong type is a ``TypeError`` naming ``rows[i].field``, a missing, malformed or repeated
    key an ``InvalidRequestError``. A wrong value refuses its row alone, as it is paid."""
    from .errors import InvalidRequestError

    seen: set[Any] = set()
    for i, rec in enumerate(_stream_records(rows, kind)):
        stream.check(i, rec)
        if kind == "list":
            key = rec["key"]
            if key in seen:
                raise InvalidRequestError(f"rows[{i}].key {key!r} is not unique in the table")
            seen.add(key)
    if kind == "pandas" and len(rows):
        repeated = rows["key"].duplicated().to_numpy().nonzero()[0]
        if len(repeated):
            i = int(repeated[0])
            raise InvalidRequestError(f"rows[{i}].key {rows['key'].iloc[i]!r} is not unique in the table")
    elif kind == "polars" and len(rows):
        repeated = (~rows["key"].is_first_distinct()).arg_true()
        if len(repeated):
            i = int(repeated[0])
            raise InvalidRequestError(f"rows[{i}].key {rows['key'][i]!r} is not unique in the table")


class _Run:
    """One payout: the rows in flight (at most ``limit``), the table read no faster, the pace
    and the progress counts. Every payout entry runs one (``pay_out`` and ``pay_out_iter``,
    blocking and async); they only wait their own way."""

    def __init__(
        self,
        client: Client,
        rows: Any,
        funding_source: str,
        concurrency: object,
        max_rate: object,
        progress: object,
        *,
        whole: bool = False,
    ) -> None:
        kind = self.kind = _kind(rows)
        self.limit = _concurrency(concurrency)
        self.pace = _Pace(_max_rate(max_rate))
        self.stream = client._pay_out_stream(funding_source)
        if not isinstance(progress, bool) and not callable(progress):
            raise TypeError(f"progress must be a bool or a callable, not {type(progress).__name__}")
        if whole and kind in ("list", "pandas", "polars"):
            _check_table(self.stream, rows, kind)
        self.total = _total(rows, kind)
        update, self.close, self.told = _progress_sink(progress, self.total)
        self.tally = _Tally(update, self.total)
        self.source = enumerate(_stream_records(rows, kind))
        self.exhausted = False
        self.pending: dict[int, dict[str, Any]] = {}

    def room(self) -> bool:
        return not self.exhausted and len(self.pending) < self.limit

    def start_next(self) -> bool:
        """Reads the next row and starts it (its pace token taken); False at the table's end."""
        nxt = next(self.source, None)
        if nxt is None:
            self.exhausted = True
            return False
        i, rec = nxt
        self.pace.take()
        self.stream.push(i, rec)
        self.pending[i] = rec
        return True

    def ended(self, i: int, outcome: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        merged = _merged(self.pending.pop(i, {}), outcome)
        self.tally.row(outcome)
        return i, merged

    def finish(self) -> None:
        """The table has ended: waits until the progress callable has been told its last
        report (the bar has drawn it already)."""
        if self.told is not None:
            self.told.finish()
        # The rows' results, which wait for their journal's next commit, are written now:
        # the process that reads the journal next (a fan-out's driver) reads them done.
        from ._later import flush_all

        flush_all()

    def drained(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """After a Ctrl-C: the rows in flight, to their end (a second Ctrl-C abandons them:
        they end in the journal, or stay ``pending`` there if the process exits first). The
        engine's own count says when none runs: an outcome taken just as the interrupt came
        is lost to this loop, not to the journal."""
        self.exhausted = True
        try:
            while self.pending and self.stream.running():
                got = self.stream.next(0.1)
                if got is not None:
                    yield self.ended(*got)
        except BaseException:
            self.stream.abandon()  # a second Ctrl-C: nothing waits for them, not even exit
            raise


def _steps(run: _Run) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """``(index, result)`` of each row as it ends. While the pace holds the next row, rows that
    end are yielded at once, not after the wait."""
    try:
        while True:
            while run.room():
                wait = run.pace.wait()
                if wait > 0:
                    if run.pending:
                        got = run.stream.next(wait)
                        if got is not None:
                            yield run.ended(*got)
                    else:
                        time.sleep(wait)
                    continue
                run.start_next()
            if not run.pending:
                run.finish()
                return
            got = run.stream.next()
            if got is not None:
                yield run.ended(*got)
    finally:
        run.close()


async def _steps_async(run: _Run) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """:func:`_steps`, waiting on the event loop."""
    try:
        while True:
            while run.room():
                wait = run.pace.wait()
                if wait > 0:
                    if run.pending:
                        got = await run.stream.next_async(wait)
                        if got is not None:
                            yield run.ended(*got)
                    else:
                        await asyncio.sleep(wait)
                    continue
                run.start_next()
            if not run.pending:
                await asyncio.to_thread(run.finish)
                return
            got = await run.stream.next_async()
            if got is not None:
                yield run.ended(*got)
    finally:
        run.close()


class _Collected:
    """The results of a whole payout, in the table's order, kept compactly: a list's result
    rows, a pandas frame's six result columns (numpy object arrays, which become the frame's
    own), or a polars frame's made a chunk at a time (:class:`_Chunks`), filled in as rows end."""

    def __init__(self, rows: Any, kind: str, total: int) -> None:
        self.rows, self.kind = rows, kind
        self.listed: list[Any] = [None] * total if kind == "list" else []
        self.columns: dict[str, Any] = {}
        self.chunks = _Chunks(total) if kind == "polars" else None
        if kind == "pandas":  # numpy object arrays: the frame's columns as they are, no copy
            import numpy as np

            self.columns = {f: np.full(total, None, dtype=object) for f in RESULT_FIELDS}

    def add(self, i: int, result: dict[str, Any]) -> None:
        if self.chunks is not None:
            self.chunks.add(i, result)
            return
        if self.columns:
            for f, column in self.columns.items():
                column[i] = result.get(f)
            return
        if i >= len(self.listed):
            self.listed.extend([None] * (i + 1 - len(self.listed)))
        self.listed[i] = result

    def result(self) -> Any:
        if self.chunks is not None:
            return self.rows.with_columns(self.chunks.columns())
        if self.kind == "pandas":
            return _frame(self.rows, self.columns)
        if self.kind != "lazy":
            return self.listed
        import polars as pl

        ordered = self.listed
        names = list(ordered[0]) if ordered else []
        return pl.DataFrame(
            {
                n: _polars_column(n, [r.get(n) for r in ordered]) if n in RESULT_FIELDS else pl.Series(n, [r.get(n) for r in ordered])
                for n in names
            }
        )


class _Chunks:
    """A polars result's six columns, made :data:`SLICE_ROWS` rows at a time: a chunk's values
    are Python objects only until its last row ends, then Arrow (text, and ``sell_amount`` a
    ``Decimal`` column of the chunk's own scale). Rows end out of order, but at most
    ``concurrency`` are in flight, so a few chunks are open at once, whatever the table's
    length. At the end the chunks are the result's columns as they are (no copy), each
    ``sell_amount`` chunk brought to the largest scale (exact: only digits are added)."""

    def __init__(self, total: int) -> None:
        self.total = total
        #: Chunk number -> its six columns of Python values, and how many of its rows ended.
        self.open: dict[int, tuple[dict[str, list[Any]], list[int]]] = {}
        #: Chunk number -> its columns as polars Series, and its sell_amount's fit.
        self.made: dict[int, tuple[list[Any], tuple[int, int] | None]] = {}

    def _size(self, chunk: int) -> int:
        return min(SLICE_ROWS, self.total - chunk * SLICE_ROWS)

    def add(self, i: int, result: dict[str, Any]) -> None:
        chunk, at = divmod(i, SLICE_ROWS)
        if chunk not in self.open:
            size = self._size(chunk)
            self.open[chunk] = ({f: [None] * size for f in RESULT_FIELDS}, [0])
        columns, ended = self.open[chunk]
        for f, column in columns.items():
            column[at] = result.get(f)
        ended[0] += 1
        if ended[0] == len(columns["status"]):
            self._make(chunk)

    def _make(self, chunk: int) -> None:
        columns, _ = self.open.pop(chunk)
        fit = _decimal_scale(columns["sell_amount"])
        self.made[chunk] = ([_polars_column(f, columns.pop(f), fit) for f in RESULT_FIELDS], fit)

    def columns(self) -> list[Any]:
        """The six result columns of the whole table (a chunk still open, if any, made as it is)."""
        import polars as pl

        for chunk in list(self.open):
            self._make(chunk)
        count = -(-self.total // SLICE_ROWS)
        for chunk in range(count):
            if chunk not in self.made:  # no row of it ended (an interrupted payout)
                self.open[chunk] = ({f: [None] * self._size(chunk) for f in RESULT_FIELDS}, [0])
                self._make(chunk)
        parts = [self.made.pop(c) for c in range(count)]
        fits = [fit for _, fit in parts]
        scale = max((f[0] for f in fits if f is not None), default=0)
        digits = max((f[1] for f in fits if f is not None), default=0)
        decimal = all(f is not None for f in fits) and scale + digits <= DECIMAL_DIGITS
        out = []
        for n, f in enumerate(RESULT_FIELDS):
            pieces = [columns[n] for columns, _ in parts]
            if f == "sell_amount":
                if decimal:
                    pieces = [p.cast(pl.Decimal(DECIMAL_DIGITS, scale), strict=True) for p in pieces]
                else:  # some chunk holds what no Decimal column can: every chunk as objects
                    pieces = [pl.Series(f, p.to_list(), dtype=pl.Object) for p in pieces]
            if not pieces:
                out.append(_polars_column(f, []))
            else:
                out.append(pl.concat(pieces, rechunk=False))
        return out


def _frame(rows: Any, columns: dict[str, Any]) -> Any:
    """The input pandas frame with the result columns (each column's values let go as it is
    made: the frame and the values are never both held in full)."""
    import pandas as pd

    out = rows.copy(deep=False)
    for f in RESULT_FIELDS:
        out[f] = pd.Series(columns.pop(f), index=rows.index, dtype="object", copy=False)
    return out


def pay_out(client: Client, rows: Any, funding_source: str, concurrency: int, max_rate: object, progress: object) -> Any:
    """The whole table paid, streamed: rows read as they are paid (a frame a slice at a time),
    results kept compactly and returned in the table's order, as the table's own kind."""
    run = _Run(client, rows, funding_source, concurrency, max_rate, progress, whole=True)
    got = _Collected(rows, run.kind, run.total)
    steps = _steps(run)
    try:
        for i, result in steps:
            got.add(i, result)
    except KeyboardInterrupt:
        # Ctrl-C (or a progress callback's KeyboardInterrupt), wherever it came: no new row;
        # the rows in flight end first. Their results are not returned: the interrupt is.
        for _ in run.drained():
            pass
        raise
    finally:
        # Closed here, not when the generator is collected: a notebook keeps the
        # interrupt's traceback, and with it this frame and the generator.
        steps.close()
        run.close()
    return got.result()


def pay_out_async(
    client: Client, rows: Any, funding_source: str, concurrency: int, max_rate: object, progress: object
) -> Coroutine[Any, Any, Any]:
    """:func:`pay_out`, awaitable (the table is checked at once; cancelling the task starts no
    further row)."""
    run = _Run(client, rows, funding_source, concurrency, max_rate, progress, whole=True)

    async def paid() -> Any:
        got = _Collected(rows, run.kind, run.total)
        async for i, result in _steps_async(run):
            got.add(i, result)
        return got.result()

    return paid()


def pay_out_iter(
    client: Client, rows: Any, funding_source: str, concurrency: object, max_rate: object, progress: object
) -> Iterator[dict[str, Any]]:
    """Yields each row's result as it ends (not in the table's order: ``key`` tells them
    apart), keeping at most ``concurrency`` rows in flight and reading the table no faster."""
    run = _Run(client, rows, funding_source, concurrency, max_rate, progress)
    return (result for _, result in _steps(run))


def pay_out_iter_async(
    client: Client, rows: Any, funding_source: str, concurrency: object, max_rate: object, progress: object
) -> AsyncIterator[dict[str, Any]]:
    """:func:`pay_out_iter`, as an async iterator (rows paced on the event loop)."""
    run = _Run(client, rows, funding_source, concurrency, max_rate, progress)

    async def results() -> AsyncIterator[dict[str, Any]]:
        async for _, result in _steps_async(run):
            yield result

    return results()

"""What a payout fanned out over other processes builds on (:mod:`fxpay.contrib.celery`,
:mod:`fxpay.contrib.dask`, or an engine of your own): the table read as ``pay_out`` reads it
and its results put back into the table's own kind, the options checked as ``pay_out`` checks
them, the progress reported as ``pay_out`` reports its own (a tqdm bar, or a callable), and
``journal.payout_progress(keys)`` followed every ``poll`` seconds while the workers pay.
docs/payouts.md, "More than one process"."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._fxpay import Client
from .._payouts import RESULT_FIELDS, _concurrency, _kind, _max_rate, _records, _result, _sink, _stream_records
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..journals import JournalBase

__all__ = [
    "RESULT_FIELDS",
    "Client",
    "Progress",
    "Table",
    "check_client",
    "check_concurrency",
    "check_journal",
    "check_max_rate",
    "check_poll",
    "follow",
    "now",
]


def check_client(client: object, made_by: str) -> Client:
    """``client`` if it is a :class:`fxpay.Client` (``Client`` here is that class: the
    engines of ``fxpay.contrib`` sit below the package and import it from here), else a
    ``ConfigurationError`` naming ``made_by`` (the factory that made it)."""
    if not isinstance(client, Client):
        raise ConfigurationError(f"{made_by} must return a fxpay.Client, not {type(client).__name__}")
    return client


def check_concurrency(concurrency: object) -> int:
    """``concurrency`` as ``pay_out`` takes it (an int of 1 to 1,024), or its error."""
    return _concurrency(concurrency)


def check_max_rate(max_rate: object) -> float | None:
    """``max_rate`` as ``pay_out`` takes it (None, or rows per second: a positive finite
    number of at least 0.001, numpy numbers too), or its ``ConfigurationError``."""
    return _max_rate(max_rate)


class Table:
    """A payout table as ``pay_out`` reads it: ``records``, one dict per row, in order (a
    list or any iterable of mappings, a pandas or a polars DataFrame, a polars LazyFrame,
    collected); :meth:`result` puts each row's outcome next to it, as ``pay_out`` returns
    it (a list of dicts, or a DataFrame of the table's library)."""

    def __init__(self, rows: Any) -> None:
        kind = _kind(rows)
        if kind == "lazy":
            rows = rows.collect()
            kind = "polars"
        self.rows = rows
        self.kind = kind
        self.records: list[dict[str, Any]] = _records(rows, kind) if kind in ("pandas", "polars") else list(_stream_records(rows, kind))

    def result(self, outcomes: Sequence[dict[str, Any] | None]) -> Any:
        """The table with ``outcomes`` (the :data:`RESULT_FIELDS` of each row, in order)."""
        if self.kind in ("pandas", "polars"):
            return _result(self.rows, self.kind, self.records, list(outcomes))
        return _result(self.records, "list", self.records, list(outcomes))


class Progress:
    """A payout's progress as ``pay_out(progress=...)`` reports it: ``False`` nothing, ``True``
    a tqdm bar, a callable a :class:`fxpay.PayoutProgress` for each :meth:`update` (on a
    thread of its own; one that raises is warned of once). :meth:`close` ends it: the bar's
    last line, or the callable's last call, is the last :meth:`update`, before it returns."""

    def __init__(self, progress: bool | Callable[..., None], total: int) -> None:
        self._update, self._close = _sink(progress, total)

    def update(self, done: int, total: int, booked: int, replayed: int, unknown: int, refused: int) -> None:
        self._update(done, total, booked, replayed, unknown, refused)

    def close(self) -> None:
        self._close()


def check_journal(journal: object) -> JournalBase | None:
    """``journal`` as a journal that can count a payout (or None)."""
    if journal is not None and not callable(getattr(journal, "payout_progress", None)):
        raise TypeError(f"journal must be a fxpay journal (with payout_progress), not {type(journal).__name__}")
    return journal  # type: ignore[return-value]


def check_poll(poll: object) -> float:
    """``poll`` (seconds between two readings of the journal): 0.01 to 3600."""
    from ..errors import InvalidRequestError

    if isinstance(poll, bool) or not isinstance(poll, (int, float)):
        raise TypeError(f"poll must be a number of seconds, not {type(poll).__name__}")
    if not 0.01 <= poll <= 3600:
        raise InvalidRequestError("poll must be 0.01 to 3600 seconds")
    return float(poll)


def follow(
    journal: JournalBase,
    keys: Sequence[str],
    since: datetime.datetime | None,
    update: Callable[..., None],
    finished: Callable[[], bool],
    poll: float,
    timeout: float | None = None,
) -> None:
    """Reports the journal's counts of ``keys`` to ``update`` until ``finished()`` (checked
    before each read, so that the last report comes after the end) or ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        end = finished()
        p = journal.payout_progress(keys, since=since)
        update(p.done, len(keys), p.booked, p.replayed, p.unknown, p.refused)
        if end or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(poll)


def now() -> datetime.datetime:
    """This moment, in UTC (a ``since`` for :func:`follow`)."""
    return datetime.datetime.now(datetime.timezone.utc)

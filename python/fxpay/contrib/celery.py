"""Payouts fanned out over Celery workers (``pip install fxpay[celery]``).

The worker's app registers the task that pays a chunk of rows, and says how each worker
process makes its :class:`fxpay.Client` (with a journal every worker shares: a
:class:`fxpay.RedisJournal` or a :class:`fxpay.PostgresJournal`)::

    app = Celery("payouts", broker=..., backend=...)
    fxpay.contrib.celery.register(app, lambda: fxpay.Client.from_env(journal=fxpay.RedisJournal(url)))

The process that holds the table (a notebook, a web request, a cron job) sends it::

    out = fxpay.contrib.celery.pay_out_celery(app, table, funding_source="Own account", chunk_size=100)

``pay_out_celery`` sends the chunks as one Celery ``group`` and gathers the results back into
the table's own kind, in the table's order. Every key comes from its row (never from a chunk's
index or a task id): a chunk delivered twice (Celery delivers at least once; the task is
``acks_late`` and ``reject_on_worker_lost``, so a killed worker's chunk is delivered again)
finds its rows in the journal and replays them. Amounts travel as text, never as binary
floats, and come back as :class:`decimal.Decimal`. docs/payouts.md, "More than one process".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, InvalidRequestError
from .fanout import (
    RESULT_FIELDS,
    Client,
    Progress,
    Table,
    check_client,
    check_concurrency,
    check_journal,
    check_max_rate,
    check_poll,
    now,
)

if TYPE_CHECKING:
    from ..journals import JournalBase

__all__ = ["TASK_NAME", "pay_out_celery", "register"]

#: The name the chunk task is registered under (``register(..., name=)`` changes it).
TASK_NAME = "fxpay.pay_out_chunk"

#: ``pay_out_celery(lost_after=)``: how long nothing may move before a chunk that never
#: started is sent again (seconds).
LOST_AFTER = 60.0

logger = logging.getLogger("fxpay.payouts")

#: Each worker process's client, made by the registered factory on the process's first chunk
#: (after the prefork pool forked it), by task name.
_clients: dict[tuple[int, str], Any] = {}
_clients_lock = threading.Lock()


def _client_for(name: str, factory: Callable[[], Client]) -> Client:
    key = (os.getpid(), name)
    with _clients_lock:
        c = _clients.get(key)
        if c is None:
            c = check_client(factory(), f"the client factory of {name!r}")
            _clients[key] = c
        return c


def _wire(value: Any) -> Any:
    """A cell as JSON carries it without losing a cent: a Decimal as its text."""
    if isinstance(value, Decimal):
        return str(value)
    return value


def _wire_row(i: int, rec: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in rec.items():
        if k == "beneficiary" and v is not None:
            raise TypeError(
                f"rows[{i}].beneficiary: pay_out_celery sends rows as JSON; register the beneficiary first and give its beneficiary_id"
            )
        out[k] = _wire(v)
    return out


def register(app: Any, client_factory: Callable[[], Client], *, name: str = TASK_NAME) -> Any:
    """Registers on ``app`` the task that pays one chunk of rows, and returns it.

    ``client_factory()`` makes the client a worker process pays with; it is called once per
    process, on that process's first chunk (so after the prefork pool forked it). Its client
    needs a journal that every worker shares (:class:`fxpay.RedisJournal`,
    :class:`fxpay.PostgresJournal`; a :class:`fxpay.SqliteJournal` only when every worker runs
    on one machine). The task is ``acks_late`` and ``reject_on_worker_lost``: a chunk whose
    worker died is delivered again, and its rows that were booked replay.
    """
    if not callable(client_factory):
        raise TypeError(f"client_factory must be a callable that returns a fxpay.Client, not {type(client_factory).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError("name must be a non-empty str")

    def pay_out_chunk(
        rows: list[dict[str, Any]], funding_source: str, concurrency: int = 8, max_rate: float | None = None
    ) -> list[dict[str, Any]]:
        c = _client_for(name, client_factory)
        out = c.pay_out(rows, funding_source=funding_source, concurrency=concurrency, max_rate=max_rate, progress=False)
        # Only what the row did not hold travels back; the sender puts each next to its row.
        return [{"key": r["key"], **{f: _wire(r.get(f)) for f in RESULT_FIELDS}} for r in out]

    pay_out_chunk.__doc__ = "Pays one chunk of a table's rows (fxpay.contrib.celery)."
    return app.task(name=name, acks_late=True, reject_on_worker_lost=True)(pay_out_chunk)


def _check_positive_int(name: str, value: object, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 1 <= value <= most:
        raise InvalidRequestError(f"{name} must be 1 to {most}")
    return value


def _keys(records: list[dict[str, Any]]) -> list[str]:
    """The rows' keys, checked before anything is sent: present, text, unique in the table."""
    seen: set[str] = set()
    keys = []
    for i, rec in enumerate(records):
        key = rec.get("key")
        if not isinstance(key, str) or not key:
            raise InvalidRequestError(f"rows[{i}].key must be a non-empty str: keys come from the rows")
        if key in seen:
            raise InvalidRequestError(f"rows[{i}].key {key!r} is not unique in the table")
        seen.add(key)
        keys.append(key)
    return keys


def _outcome(i: int, key: str, got: Any) -> dict[str, Any]:
    """A row's result as the worker sent it, back to Python values (``sell_amount`` a Decimal)."""
    if not isinstance(got, Mapping) or got.get("key") != key:
        raise InvalidRequestError(f"the result for rows[{i}] is not row {key!r}'s: the chunk came back out of order")
    o = {f: got.get(f) for f in RESULT_FIELDS}
    if o["sell_amount"] is not None:
        o["sell_amount"] = Decimal(str(o["sell_amount"]))
    return o


def _chunk_outcomes(chunk: list[dict[str, Any]], part: object) -> list[Any]:
    """A chunk's results as its task returned them; when the task failed (or returned
    something else), each row ``unknown``: it may have been paid in part, the journal tells,
    and running the table again resumes it."""
    if isinstance(part, list) and len(part) == len(chunk):
        return part
    if isinstance(part, BaseException):
        text = f"the chunk's task failed: {type(part).__name__}: {part}"
    else:
        text = f"the chunk's task returned {type(part).__name__}, not one result per row"
    return [{"key": r["key"], **dict.fromkeys(RESULT_FIELDS), "status": "unknown", "error": text} for r in chunk]


def pay_out_celery(
    app: Any,
    rows: Any,
    *,
    funding_source: str,
    chunk_size: int = 100,
    concurrency: int = 8,
    max_rate: float | None = None,
    progress: bool | Callable[..., None] = False,
    journal: JournalBase | None = None,
    timeout: float | None = None,
    poll: float = 0.5,
    task_name: str = TASK_NAME,
    lost_after: float | None = LOST_AFTER,
) -> Any:
    """Pays ``rows`` on Celery workers: chunks of ``chunk_size`` rows sent as one ``group`` of
    the task :func:`register` made (by ``task_name``), each chunk paid by ``pay_out`` with
    ``concurrency`` rows in flight (and ``max_rate`` rows started per second) in its worker.

    ``rows``: as ``Client.pay_out`` takes them (a list or any iterable of mappings, a pandas
    or a polars DataFrame, a polars LazyFrame); each row's ``key`` is required and unique in
    the table. Returns the results as ``pay_out`` does, in the table's order: a list of dicts,
    or a DataFrame of the same library (a LazyFrame gives a polars DataFrame).

    ``progress``: ``True`` shows a tqdm bar, a callable receives :class:`fxpay.PayoutProgress`.
    With ``journal=`` (the workers' shared journal) the counts are read from the journal
    (``journal.payout_progress``, every ``poll`` seconds) while the workers pay; without it,
    they move as whole chunks come back.

    A chunk whose task failed (its worker raised, not a row's refusal) gives its rows
    ``unknown`` with the task's error; ``timeout`` (seconds, None: no limit) is how long to
    wait for all of them (then ``TimeoutError`` of Celery is raised). Running the same table
    again resumes: booked rows replay and nothing is sent for them.

    ``lost_after`` (seconds, None: never), with ``journal=``: a broker can lose a chunk that
    no worker ever started (Redis: a worker killed whole between taking a chunk off the queue
    and recording it unacknowledged). Once nothing has moved for ``lost_after`` seconds (no
    chunk came back, the journal's counts of the table stayed the same), each chunk still out
    none of whose rows is in flight or was booked in this run is sent again under its own
    task id, and logged (``fxpay.payouts``, WARNING); the next time that chunk needs twice as
    long a stillness. A chunk sent twice books nothing twice: its rows' keys find their
    entries and replay.
    """
    if not isinstance(funding_source, str):
        raise TypeError(f"funding_source must be a str, not {type(funding_source).__name__}")
    chunk_size = _check_positive_int("chunk_size", chunk_size, 100_000)
    check_concurrency(concurrency)
    check_max_rate(max_rate)
    journal = check_journal(journal)
    poll = check_poll(poll)
    timeout = _check_seconds("timeout", timeout)
    lost_after = _check_seconds("lost_after", lost_after)
    if not app.conf.result_backend:
        raise ConfigurationError("pay_out_celery gathers the chunks' results: the Celery app needs a result backend")
    table = Table(rows)
    records = table.records
    keys = _keys(records)
    wire = [_wire_row(i, r) for i, r in enumerate(records)]
    chunks = [wire[start : start + chunk_size] for start in range(0, len(wire), chunk_size)]

    from celery import group  # type: ignore[import-untyped,unused-ignore]

    bar = Progress(progress, len(records))
    update = bar.update
    try:
        since = now()

        def chunk_task(i: int) -> Any:
            return app.signature(task_name, args=(chunks[i], funding_source, concurrency, max_rate))

        result = group(chunk_task(i) for i in range(len(chunks))).apply_async()
        wait = _Wait(result, chunks, journal, keys, since, timeout)

        def resend(i: int, task_id: str) -> Any:
            return chunk_task(i).apply_async(task_id=task_id)

        got = wait.gather(update if progress is not False else None, poll, lost_after, resend)
        update(*_tally(chunks, got))  # the rows' own word, last
    finally:
        bar.close()
    outcomes: list[dict[str, Any] | None] = []
    for chunk, part in zip(chunks, got, strict=True):
        for o in _chunk_outcomes(chunk, part):
            i = len(outcomes)
            outcomes.append(_outcome(i, keys[i], o))
    return table.result(outcomes)


def _tally(chunks: list[list[dict[str, Any]]], parts: list[Any]) -> tuple[int, ...]:
    """``(done, total, booked, replayed, unknown, refused)`` of the chunks whose results
    ``parts`` holds (None: not back yet)."""
    counts = dict.fromkeys(("booked", "replayed", "unknown", "refused"), 0)
    for chunk, part in zip(chunks, parts, strict=True):
        if part is None:
            continue
        for o in _chunk_outcomes(chunk, part):
            if isinstance(o, Mapping) and o.get("status") in counts:
                counts[o["status"]] += 1
    return (sum(counts.values()), sum(len(c) for c in chunks), *counts.values())


class _Wait:
    """Waiting for a sent table's chunks: their results, the journal's counts while they are
    paid, and the chunks a broker lost, sent again."""

    def __init__(
        self,
        result: Any,
        chunks: list[list[dict[str, Any]]],
        journal: JournalBase | None,
        keys: list[str],
        since: Any,
        timeout: float | None,
    ) -> None:
        self.result = result
        self.chunks = chunks
        self.journal = journal
        self.keys = keys
        self.since = since
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def gather(
        self, update: Callable[..., None] | None, poll: float, lost_after: float | None, resend: Callable[[int, str], Any]
    ) -> list[Any]:
        """Every chunk's result, in order, once all are back: until then the counts go to
        ``update`` every ``poll`` seconds (the journal's, or the rows of the chunks back),
        and a chunk the broker lost is sent again with ``resend(index, task_id)``. Past the
        deadline, Celery's ``TimeoutError``."""
        from celery.exceptions import TimeoutError as CeleryTimeoutError  # type: ignore[import-untyped,unused-ignore]

        parts = self.result.results
        stillness = [lost_after] * len(parts)  # per chunk: how long nothing may move before it is sent again
        moved_at, last = time.monotonic(), None
        while True:
            back = [r.ready() for r in parts]
            counts = self.counts(back)
            if update is not None:
                update(*counts)
            if all(back):
                return [r.result for r in parts]
            t = time.monotonic()
            if (sum(back), counts) != last:
                moved_at, last = t, (sum(back), counts)
            if self.deadline is not None and t >= self.deadline:
                raise CeleryTimeoutError(f"{len(parts) - sum(back)} of {len(parts)} chunks did not come back in time")
            for i, r in enumerate(parts):
                wait = stillness[i]
                if wait is not None and not back[i] and t - moved_at >= wait and self.never_started(i):
                    logger.warning(
                        "pay_out_celery: chunk %d of %d (task %s) had not started after %.1f s in which nothing moved: sent again",
                        i, len(parts), r.id, t - moved_at,
                    )  # fmt: skip
                    resend(i, r.id)
                    stillness[i] = 2 * wait
            time.sleep(poll)

    def counts(self, back: list[bool]) -> tuple[int, ...]:
        """``(done, total, booked, replayed, unknown, refused)``: the journal's, or without
        one, the rows of the chunks back."""
        if self.journal is not None:
            p = self.journal.payout_progress(self.keys, since=self.since)
            return (p.done, len(self.keys), p.booked, p.replayed, p.unknown, p.refused)
        return _tally(self.chunks, [r.result if b else None for r, b in zip(self.result.results, back, strict=True)])

    def never_started(self, i: int) -> bool:
        """Chunk ``i`` started nowhere, as far as the journal can tell: none of its rows is in
        flight (``pending``) or was booked in this run. (A chunk of rows booked before only
        replays, which writes nothing: sent again, it replays again.) Without a journal,
        nothing can tell a lost chunk from one still running: never."""
        if self.journal is None:
            return False
        ks = [r["key"] for r in self.chunks[i]]
        return not self.journal.leased(ks) and self.journal.payout_progress(ks, since=self.since).booked == 0


def _check_seconds(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or None, not {type(value).__name__}")
    if not value > 0:
        raise InvalidRequestError(f"{name} must be more than 0 seconds, or None")
    return float(value)

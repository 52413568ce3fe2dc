"""Payouts of a ``dask.dataframe`` (``pip install fxpay[dask]``).

::

    paid = fxpay.contrib.dask.pay_out_dask(ddf, client_factory=make_client, funding_source="Own account")
    out = paid.compute()          # or paid.to_parquet(...): the rows are paid when computed

:func:`pay_out_dask` is a ``map_partitions``: each partition is paid by ``Client.pay_out`` in
the worker that holds it, with the client ``client_factory()`` makes there (once per worker
process; the factory is pickled to the workers, so a module-level function or a
``functools.partial`` of one). Its journal must be one every worker shares
(:class:`fxpay.RedisJournal`, :class:`fxpay.PostgresJournal`). Keys come from the rows'
``key`` column, never from partition numbers: Dask reruns the partitions of a lost worker (and
recomputes a result that was lost with it), and a rerun finds its rows in the journal and
replays them. docs/payouts.md, "More than one process".
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequestError
from .fanout import RESULT_FIELDS, Client, Progress, check_concurrency, check_journal, check_max_rate, check_poll, follow, now

if TYPE_CHECKING:
    import datetime

    from ..journals import JournalBase

__all__ = ["pay_out_dask", "watch"]

#: Each worker process's clients, by the pickled factory that made them.
_clients: dict[tuple[int, bytes | int], Any] = {}
_clients_lock = threading.Lock()


def _factory_key(factory: Callable[[], Any]) -> bytes | int:
    """What tells factories apart in a worker: their pickle (each task unpickles its own copy
    of the factory, so the object's identity would make a client per partition)."""
    try:
        return pickle.dumps(factory)
    except Exception:  # defined in a notebook or __main__: pickled by value
        try:
            import cloudpickle  # type: ignore[import-untyped,unused-ignore]

            return bytes(cloudpickle.dumps(factory))
        except Exception:
            return id(factory)


def _client_for(factory: Callable[[], Client]) -> Client:
    key = (os.getpid(), _factory_key(factory))
    with _clients_lock:
        c = _clients.get(key)
        if c is None:
            c = _clients[key] = factory()
        return c


def _pay_partition(part: Any, factory: Callable[[], Client], funding_source: str, concurrency: int, max_rate: float | None) -> Any:
    """One partition, paid: the partition's rows with the result columns."""
    if len(part) == 0:
        import pandas as pd

        out = part.copy()
        for f in RESULT_FIELDS:
            out[f] = pd.Series([], index=part.index, dtype="object")
        return out
    c = _client_for(factory)
    return c.pay_out(part, funding_source=funding_source, concurrency=concurrency, max_rate=max_rate, progress=False)


def pay_out_dask(
    ddf: Any,
    *,
    client_factory: Callable[[], Client],
    funding_source: str,
    concurrency: int = 8,
    max_rate: float | None = None,
) -> Any:
    """``ddf`` (a ``dask.dataframe.DataFrame`` of payout rows, the columns ``pay_out`` reads)
    with the result columns (``quote_id``, ``beneficiary_id``, ``deal_id``, ``sell_amount``
    as ``Decimal``, ``status``, ``error``; object dtype) added: a lazy dataframe, as Dask's own
    operations return. Nothing is paid until it is computed; each partition is then paid by
    ``pay_out`` in its worker, ``concurrency`` rows in flight (``max_rate``: rows started per
    second, per partition being paid).

    Computing it again pays nothing again: every row replays from the journal (status
    ``replayed``). Persist or write the computed result rather than compute it twice.
    """
    if type(ddf).__module__.split(".")[0] != "dask" or not hasattr(ddf, "map_partitions"):
        raise TypeError(f"ddf must be a dask.dataframe.DataFrame, not {type(ddf).__name__}")
    if not callable(client_factory):
        raise TypeError(f"client_factory must be a callable that returns a fxpay.Client, not {type(client_factory).__name__}")
    if not isinstance(funding_source, str):
        raise TypeError(f"funding_source must be a str, not {type(funding_source).__name__}")
    check_concurrency(concurrency)
    check_max_rate(max_rate)
    if "key" not in ddf.columns:
        raise InvalidRequestError("ddf has no 'key' column: keys come from the rows, never from partition numbers")
    meta = ddf._meta.copy()
    import pandas as pd

    for f in RESULT_FIELDS:
        meta[f] = pd.Series([], index=meta.index, dtype="object")
    return ddf.map_partitions(_pay_partition, client_factory, funding_source, concurrency, max_rate, meta=meta)


def watch(
    paid: Any,
    *,
    journal: JournalBase,
    keys: Any,
    progress: bool | Callable[..., None] = True,
    poll: float = 0.5,
    since: datetime.datetime | None = None,
) -> Any:
    """Computes ``paid`` (:func:`pay_out_dask`'s dataframe) and returns the computed frame,
    showing the payout's progress while the workers pay: the counts of the workers' shared
    ``journal`` (``journal.payout_progress(keys, since=...)``), read every ``poll`` seconds, as
    a tqdm bar (``progress=True``) or as :class:`fxpay.PayoutProgress` given to a callable.

    ``paid`` may be the lazy dataframe (computed here: on the ``distributed`` client in use,
    if any, else by Dask's default scheduler in a thread; deals booked before this call count
    as ``replayed``) or a future already submitted (``dask_client.compute(paid)``: anything
    with ``done()`` and ``result()``; deals booked before ``since`` count as ``replayed``,
    and without ``since`` every deal done counts as ``booked``). ``keys``: the table's keys (a
    list, a pandas Series, or a dask Series, computed here).

    The last report (the bar's last line) is the computed frame's own count of its
    ``status`` column: what the run returned, which may differ from the journal's count (a
    row that a killed worker booked comes back ``replayed`` from the rerun).
    """
    j = check_journal(journal)
    if j is None:
        raise TypeError("journal must be the workers' shared fxpay journal, not None")
    interval = check_poll(poll)
    if hasattr(keys, "compute"):
        keys = keys.compute()
    wanted = list(keys)
    if callable(getattr(paid, "done", None)) and callable(getattr(paid, "result", None)):
        future = paid
    elif callable(getattr(paid, "compute", None)) and type(paid).__module__.split(".")[0] == "dask":
        since = now()
        future = _submit(paid)
    else:
        raise TypeError(f"paid must be a dask dataframe or a future (done() and result()), not {type(paid).__name__}")
    bar = Progress(progress, len(wanted))
    try:
        follow(j, wanted, since, bar.update, future.done, interval)
        out = future.result()
        counts = _tally(out, len(wanted))
        if counts is not None:
            bar.update(*counts)  # the rows' own word, last: the bar ends on the frame returned
    finally:
        bar.close()
    return out


def _tally(out: Any, total: int) -> tuple[int, ...] | None:
    """``(done, total, booked, replayed, unknown, refused)`` of a computed frame's ``status``
    column (None when it holds no such column, or not one row per key)."""
    try:
        statuses = list(out["status"])
    except (KeyError, TypeError):
        return None
    if len(statuses) != total:
        return None
    counts = dict.fromkeys(("booked", "replayed", "unknown", "refused"), 0)
    for s in statuses:
        if s in counts:
            counts[s] += 1
    return (sum(counts.values()), total, *counts.values())


def _submit(paid: Any) -> Any:
    """``paid`` computing: on the ``distributed`` client in use, else in a thread."""
    try:
        from distributed import default_client  # type: ignore[import-untyped,unused-ignore]

        return default_client().compute(paid)  # type: ignore[no-untyped-call,unused-ignore]
    except (ImportError, ValueError):  # no distributed, or no client in use
        import concurrent.futures

        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fxpay-dask-watch")
        future = pool.submit(paid.compute)
        pool.shutdown(wait=False)
        return future

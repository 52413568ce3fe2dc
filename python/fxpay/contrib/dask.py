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

from .._payouts import RESULT_FIELDS
from ..errors import InvalidRequestError

if TYPE_CHECKING:
    from .._fxpay import Client

__all__ = ["pay_out_dask"]

#: Each worker process's clients, by the pickled factory that made them.
_clients: dict[tuple[int, bytes | int], Any] = {}
_clients_lock = threading.Lock()


def _factory_key(factory: Callable[[], Any]) -> bytes | int:
    try:
        return pickle.dumps(factory)
    except Exception:  # a factory only cloudpickle can carry: one client per factory object
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
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise TypeError(f"concurrency must be an int, not {type(concurrency).__name__}")
    if not 1 <= concurrency <= 1024:
        raise InvalidRequestError("concurrency must be 1 to 1024")
    if "key" not in ddf.columns:
        raise InvalidRequestError("ddf has no 'key' column: keys come from the rows, never from partition numbers")
    meta = ddf._meta.copy()
    import pandas as pd

    for f in RESULT_FIELDS:
        meta[f] = pd.Series([], index=meta.index, dtype="object")
    return ddf.map_partitions(_pay_partition, client_factory, funding_source, concurrency, max_rate, meta=meta)

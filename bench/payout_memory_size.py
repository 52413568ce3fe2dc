"""The deep size of a payout's result table, for bench/payout_memory.py and the memory test:
what the caller holds once ``pay_out`` returned, beyond its own input."""

from __future__ import annotations

import sys
from typing import Any

RESULT_FIELDS = ("quote_id", "beneficiary_id", "deal_id", "sell_amount", "status", "error")


def result_bytes(out: Any, kind: str) -> int:
    """``out``'s size in bytes: for a list, the list, its dicts and the result values; for a
    frame, its result columns (pandas ``memory_usage(deep=True)``; polars' estimate of its
    Arrow columns, and the ``Decimal`` objects of a ``sell_amount`` of ``pl.Object``)."""
    if kind == "list":
        size = sys.getsizeof(out)
        for row in out:
            size += sys.getsizeof(row) + sum(sys.getsizeof(row[f]) for f in RESULT_FIELDS if row.get(f) is not None)
        return size
    if kind == "pandas":
        return int(out[list(RESULT_FIELDS)].memory_usage(deep=True, index=False).sum())
    if str(out["sell_amount"].dtype) != "Object":  # Arrow (a Decimal column): polars' own estimate
        return int(out.select(list(RESULT_FIELDS)).estimated_size())
    size = int(out.select([f for f in RESULT_FIELDS if f != "sell_amount"]).estimated_size())
    return size + sum(8 + sys.getsizeof(v) for v in out["sell_amount"].to_list())

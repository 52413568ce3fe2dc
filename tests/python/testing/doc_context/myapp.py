"""The reader's application (a stand-in): ``db.orders`` as README.md uses it."""

from __future__ import annotations

import itertools
from typing import Any


class _Orders:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.ids = itertools.count(1)

    def create(self, **fields: Any) -> Any:
        order_id = str(next(self.ids))
        self.rows[order_id] = {"id": order_id, **fields}
        return type("Order", (), self.rows[order_id])

    def nonce(self, ref: str) -> str | None:
        row = self.rows.get(ref)
        return None if row is None else row["nonce"]

    def set_process_id(self, ref: str, process_id: str) -> None:
        self.rows[ref]["process_id"] = process_id

    def settle(self, ref: str, deal_id: str | None, errors: Any) -> None:
        self.rows[ref].update(deal_id=deal_id, errors=errors)


class _Db:
    orders = _Orders()


db = _Db()

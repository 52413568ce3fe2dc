"""A stand-in for a Django model ``Order`` with the part of the ORM the docs use:
``Order.objects.create(...)``, ``.filter(...).first()``, ``.filter(...).update(...)``."""

from __future__ import annotations

from typing import Any


class _Query:
    def __init__(self, rows: list[Order]) -> None:
        self.rows = rows

    def first(self) -> Order | None:
        return self.rows[0] if self.rows else None

    def update(self, **fields: Any) -> int:
        for row in self.rows:
            row.__dict__.update(fields)
        return len(self.rows)


class _Manager:
    def __init__(self) -> None:
        self.rows: list[Order] = []

    def create(self, **fields: Any) -> Order:
        row = Order(**fields)
        self.rows.append(row)
        return row

    def filter(self, **where: Any) -> _Query:
        return _Query([r for r in self.rows if all(getattr(r, k, None) == v for k, v in where.items())])


class Order:
    objects = _Manager()

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

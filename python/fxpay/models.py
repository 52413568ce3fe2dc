"""Typed, immutable models. Money and rates are exact :class:`decimal.Decimal`.

Every model is a class of the compiled core (``fxpay.Quote is fxpay._fxpay.Quote``), made
from the one Rust definition of its fields. Each compares and hashes by value, pickles,
has a readable ``repr`` without secrets, ``to_dict()`` (the wire form: camelCase, amounts as
``Decimal``), ``replace(**changes)``, ``__match_args__`` and ``_repr_html_``. Models read
from the service keep the whole JSON they came from in ``raw``, unknown fields included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._fxpay import (
    Address,
    AuthorizationRequest,
    BankDetails,
    Beneficiary,
    Deal,
    DealBeneficiary,
    DealCreated,
    FieldError,
    Freebies,
    Quote,
    SpotDeal,
    Token,
    VirtualAccount,
)

__all__ = [
    "Address",
    "AuthorizationRequest",
    "BankDetails",
    "Beneficiary",
    "Deal",
    "DealBeneficiary",
    "DealCreated",
    "FieldError",
    "Freebies",
    "Quote",
    "SpotDeal",
    "Token",
    "VirtualAccount",
    "to_records",
]


_MODELS = (
    Address,
    AuthorizationRequest,
    BankDetails,
    Beneficiary,
    Deal,
    DealBeneficiary,
    DealCreated,
    FieldError,
    Freebies,
    Quote,
    SpotDeal,
    Token,
)


def to_records(models: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows for ``pandas.DataFrame``: one flat dict of snake_case fields per model (a nested
    model's fields as ``<field>_<subfield>``), amounts kept as ``Decimal``. A nested model
    that some rows lack (``None``) gets the same columns, all ``None``, in those rows."""
    out: list[dict[str, Any]] = []
    expanded: dict[str, tuple[str, ...]] = {}
    for i, m in enumerate(models):
        if isinstance(m, VirtualAccount):
            out.append(m.to_dict())
            continue
        if not isinstance(m, _MODELS):
            raise TypeError(f"models[{i}] must be a fxpay model, not {type(m).__name__}")
        row: dict[str, Any] = {}
        for name in type(m).__match_args__:
            v = getattr(m, name)
            sub_fields = getattr(type(v), "__match_args__", None)
            if sub_fields is not None and not isinstance(v, tuple):
                expanded[name] = sub_fields
                for sub in sub_fields:
                    row[f"{name}_{sub}"] = getattr(v, sub)
            else:
                row[name] = v
        out.append(row)
    if expanded:
        for j, row in enumerate(out):
            if any(row.get(name, 0) is None for name in expanded):
                out[j] = {
                    k2: v2
                    for k, v in row.items()
                    for k2, v2 in ([(f"{k}_{sub}", None) for sub in expanded[k]] if k in expanded and v is None else [(k, v)])
                }
    return out

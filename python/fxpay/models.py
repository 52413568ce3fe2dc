"""Typed, immutable models. Money and rates are exact :class:`decimal.Decimal`.

Every model compares by value, pickles, has a readable ``repr`` without secrets and a
``to_dict()`` that gives the wire form (camelCase, amounts as ``Decimal``). Models read from
the service keep the whole JSON they came from in ``raw``, unknown fields included.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any, Literal

from . import _fxpay

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
]


class _Model:
    """Shared behaviour: ``_repr_html_`` for notebooks."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every model overrides it
        raise NotImplementedError

    def _repr_html_(self) -> str:
        import html  # imported on use: `import fxpay` stays cheap

        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(f.name)}</th>"
            f"<td>{html.escape(str(getattr(self, f.name)))}</td></tr>"
            for f in fields(self)  # type: ignore[arg-type]
            if f.repr
        )
        return f"<table><caption>{type(self).__name__}</caption>{rows}</table>"


def _require(obj: object, name: str, types: type | tuple[type, ...], what: str, *, optional: bool = False) -> None:
    """A ``TypeError`` naming the field unless ``obj.<name>`` is one of ``types`` (or None when optional)."""
    value = getattr(obj, name)
    if value is None and optional:
        return
    allowed = types if isinstance(types, tuple) else (types,)
    wrong_bool = isinstance(value, bool) and bool not in allowed  # True is an int, but not a count
    if wrong_bool or not isinstance(value, allowed):
        raise TypeError(f"{type(obj).__name__}.{name} must be {what}, not {type(value).__name__}")


def _require_text(obj: object, *names: str) -> None:
    for name in names:
        _require(obj, name, str, "a str")


def _amount(field_name: str, value: object) -> Decimal:
    """An amount as an exact Decimal, refused unless positive and finite."""
    return _fxpay.parse_amount(field_name, value)


@dataclass(frozen=True)
class Freebies(_Model):
    """Fee-free deals of a client: ``total``, ``claimed`` and ``remaining``."""

    total: Decimal | int
    claimed: Decimal | int
    remaining: Decimal | int

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "claimed": self.claimed, "remaining": self.remaining}


def _decode_int(text: str) -> int | Decimal:
    # Python refuses int() of text over 4300 digits (sys.int_max_str_digits); such a number
    # stays exact as a Decimal, which has no such limit, so decoding never fails.
    return int(text) if len(text) <= 4000 else Decimal(text)


def _decode_raw(text: str) -> Any:
    """Decodes a JSON text into ``raw``: non-integer numbers as exact ``Decimal``, whole numbers as ``int``
    (as ``Decimal`` beyond 4000 digits)."""
    import json  # imported on use: `import fxpay` stays cheap

    return json.loads(text, parse_float=Decimal, parse_int=_decode_int)


def _lazy_raw(obj: object, name: str) -> Any:
    """``__getattr__`` of the models whose ``raw`` is kept as the JSON text ``_body`` until first used."""
    if name == "raw":
        d = obj.__dict__
        body = d.get("_body")
        if body is not None:
            text = body.decode("utf-8") if isinstance(body, bytes) else body
            raw = d["raw"] = _decode_raw(text)
            d.pop("_body", None)
            return raw
    raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")


@dataclass(frozen=True)
class Quote(_Model):
    """A currency quote: ``sell_amount`` is ``buy_amount`` at ``customer_rate``.

    ``fee``, ``fee_currency`` and ``freebies`` are ``None`` when the service leaves them out
    (or sends ``null``); fields the service adds are kept in ``raw``.
    """

    id: str
    buy_currency: str
    buy_amount: Decimal
    sell_currency: str
    sell_amount: Decimal
    customer_rate: Decimal
    inverse_customer_rate: Decimal
    fee: Decimal | None
    fee_currency: str | None
    freebies: Freebies | None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __getattr__(self, name: str) -> Any:
        # A Quote from the client holds its answer's JSON text, not yet `raw`: it is decoded
        # (exact Decimals, whole numbers as int) on first use and then kept.
        return _lazy_raw(self, name)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "buyCurrency": self.buy_currency,
            "buyAmount": self.buy_amount,
            "sellCurrency": self.sell_currency,
            "sellAmount": self.sell_amount,
            "customerRate": self.customer_rate,
            "inverseCustomerRate": self.inverse_customer_rate,
        }
        # The optional fields appear as the service sent them: absent ones stay absent.
        if self.fee is not None:
            d["fee"] = self.fee
        if self.fee_currency is not None:
            d["feeCurrency"] = self.fee_currency
        if self.freebies is not None:
            d["freebies"] = self.freebies.to_dict()
        return d


@dataclass(frozen=True)
class Address(_Model):
    """A postal address; ``country`` is an ISO 3166-1 alpha-2 code."""

    address_line: str
    city_suburb: str
    state_province: str
    post_code: str
    country: str

    def __post_init__(self) -> None:
        _require_text(self, "address_line", "city_suburb", "state_province", "post_code", "country")

    def to_dict(self) -> dict[str, Any]:
        return {
            "addressLine": self.address_line,
            "citySuburb": self.city_suburb,
            "stateProvince": self.state_province,
            "postCode": self.post_code,
            "country": self.country,
        }


@dataclass(frozen=True)
class BankDetails(_Model):
    """The beneficiary's bank account."""

    bank_name: str
    bank_branch_name: str
    branch_code: str
    account: str
    bank_address: Address

    def __post_init__(self) -> None:
        _require_text(self, "bank_name", "bank_branch_name", "branch_code", "account")
        _require(self, "bank_address", Address, "a fxpay.Address")

    def to_dict(self) -> dict[str, Any]:
        return {
            "bankName": self.bank_name,
            "bankBranchName": self.bank_branch_name,
            "branchCode": self.branch_code,
            "account": self.account,
            "bankAddress": self.bank_address.to_dict(),
        }


@dataclass(frozen=True)
class Beneficiary(_Model):
    """A payment recipient, as sent to ``Client.create_beneficiary``."""

    currency: str
    name: str
    classification: str
    payment_reason: str
    bank_details: BankDetails
    address: Address

    def __post_init__(self) -> None:
        _require_text(self, "currency", "name", "classification", "payment_reason")
        _require(self, "bank_details", BankDetails, "a fxpay.BankDetails")
        _require(self, "address", Address, "a fxpay.Address")

    def to_dict(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "name": self.name,
            "classification": self.classification,
            "paymentReason": self.payment_reason,
            "beneficiaryBankDetails": self.bank_details.to_dict(),
            "beneficiaryAddress": self.address.to_dict(),
        }


@dataclass(frozen=True)
class DealBeneficiary(_Model):
    """One recipient of a deal and the amount paid to it.

    ``amount`` accepts ``Decimal``, ``int``, ``str`` or a ``float`` (through its shortest
    repr) and is kept as an exact ``Decimal``; zero, negative and non-finite amounts raise
    :class:`fxpay.InvalidRequestError`.
    """

    beneficiary_id: str
    amount: Decimal
    pay_reason: str
    pay_reference: str

    def __post_init__(self) -> None:
        _require_text(self, "beneficiary_id", "pay_reason", "pay_reference")
        object.__setattr__(self, "amount", _amount("amount", self.amount))

    def to_dict(self) -> dict[str, Any]:
        return {
            "beneficiaryId": self.beneficiary_id,
            "amount": self.amount,
            "payReason": self.pay_reason,
            "payReference": self.pay_reference,
        }


@dataclass(frozen=True)
class Deal(_Model):
    """A booked deal."""

    deal_id: str
    quote_id: str
    funding_source: str
    channel: str | None
    beneficiaries: tuple[DealBeneficiary, ...]
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "dealId": self.deal_id,
            "quoteId": self.quote_id,
            "fundingSource": self.funding_source,
            "beneficiaries": [b.to_dict() for b in self.beneficiaries],
        }
        if self.channel is not None:
            d["channel"] = self.channel
        return d


@dataclass(frozen=True)
class SpotDeal(_Model):
    """An accepted spot deal; its outcome arrives in a ``DealCreated`` notification.

    Store ``callback_nonce`` next to ``process_id`` to verify that notification.
    """

    process_id: str
    callback_url: str | None
    callback_nonce: str | None = field(repr=False)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"processId": self.process_id}


@dataclass(frozen=True)
class AuthorizationRequest(_Model):
    """Where to send the user's browser, with the state to check when it comes back and the
    PKCE ``code_verifier`` to send with the code (``None`` without PKCE).

    ``to_dict()`` keeps every field, so ``AuthorizationRequest(**auth.to_dict())`` rebuilds it
    after a trip through the user's session; ``repr`` shows none of the secrets.
    """

    url: str = field(repr=False)
    state: str = field(repr=False)
    redirect_uri: str
    code_verifier: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _require_text(self, "url", "state", "redirect_uri")

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "state": self.state,
            "redirect_uri": self.redirect_uri,
            "code_verifier": self.code_verifier,
        }


@dataclass(frozen=True)
class Token(_Model):
    """An OAuth access token with its expiry. The token values never show in ``repr``."""

    access_token: str = field(repr=False)
    token_type: str
    expires_in: int
    expires_at: _dt.datetime
    refresh_token: str | None = field(default=None, repr=False)
    scope: str | None = None

    def __post_init__(self) -> None:
        _require_text(self, "access_token", "token_type")
        _require(self, "expires_in", int, "an int")
        _require(self, "expires_at", _dt.datetime, "a datetime")
        _require(self, "refresh_token", str, "a str or None", optional=True)
        _require(self, "scope", str, "a str or None", optional=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": self.token_type,
            "expires_in": self.expires_in,
            "expires_at": self.expires_at.timestamp(),
            "refresh_token": self.refresh_token,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Token:
        """Rebuilds a token saved with :meth:`to_dict` (``expires_at`` as unix seconds or ISO text).

        A ``d`` that is not a mapping is a ``TypeError``; a missing ``access_token`` or a value
        that cannot be a token's is a :class:`fxpay.InvalidRequestError`.
        """
        from .errors import InvalidRequestError

        if not isinstance(d, Mapping):
            raise TypeError(f"d must be a mapping such as Token.to_dict() gives, not {type(d).__name__}")
        if "access_token" not in d:
            raise InvalidRequestError("d has no access_token: it is not a saved Token")
        try:
            expires_in = d.get("expires_in", 0)
            if isinstance(expires_in, float):
                expires_in = int(expires_in)
            expires_at = d.get("expires_at")
            if isinstance(expires_at, bool):
                raise TypeError("expires_at must be unix seconds, ISO 8601 text or a datetime, not bool")
            if isinstance(expires_at, (int, float)):
                when = _dt.datetime.fromtimestamp(float(expires_at), tz=_dt.timezone.utc)
            elif isinstance(expires_at, str):
                when = _dt.datetime.fromisoformat(expires_at)
            elif isinstance(expires_at, _dt.datetime):
                when = expires_at
            elif isinstance(expires_in, int) and not isinstance(expires_in, bool):
                when = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=expires_in)
            else:
                raise TypeError(f"expires_in must be an int, not {type(expires_in).__name__}")
        except (ValueError, OverflowError, OSError) as e:
            raise InvalidRequestError(f"d does not hold a valid token expiry: {e}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
        return cls(
            access_token=d["access_token"],
            token_type=d.get("token_type", "Bearer"),
            expires_in=expires_in,
            expires_at=when,
            refresh_token=d.get("refresh_token"),
            scope=d.get("scope"),
        )

    @property
    def expired(self) -> bool:
        return self.expires_at <= _dt.datetime.now(_dt.timezone.utc)


@dataclass(frozen=True)
class FieldError(_Model):
    """One error entry: ``error_code`` is ``<layer>:<component>:<number>`` when well formed."""

    error_code: str
    field_name: str | None
    message: str
    layer: str | None = None
    component: str | None = None
    number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"errorCode": self.error_code, "fieldName": self.field_name, "message": self.message}


@dataclass(frozen=True)
class DealCreated(_Model):
    """A verified ``DealCreated`` notification; ``raw`` is the whole JSON body."""

    status: Literal["success", "fail"]
    process_id: str
    deal_id: str | None
    errors: list[FieldError] = field(default_factory=list, hash=False)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def __getattr__(self, name: str) -> Any:
        # An event from fxpay.parse_deal_created holds the checked body, not yet `raw`:
        # it is decoded (exact Decimals, as everywhere else) on first use and then kept.
        return _lazy_raw(self, name)

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"processId": self.process_id}
        if self.ok:
            body["dealId"] = self.deal_id
        else:
            body["errors"] = [e.to_dict() for e in self.errors]
        return {"eventType": "DealCreated", "status": self.status, "eventBody": body}


class VirtualAccount(Mapping[str, Any]):
    """A virtual account: a read-only mapping over the JSON object the service sent."""

    __slots__ = ("_data",)
    _data: dict[str, Any]

    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, (dict, Mapping)):
            raise TypeError(f"data must be a mapping (the account's JSON object), not {type(data).__name__}")
        object.__setattr__(self, "_data", dict(data))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("VirtualAccount is read-only")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, VirtualAccount):
            return bool(self._data == other._data)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._data.items())))

    def __repr__(self) -> str:
        keys = ("id", "currency", "accountName", "status")
        shown = ", ".join(f"{k}={self._data[k]!r}" for k in keys if k in self._data)
        return f"VirtualAccount({shown})"

    def __reduce__(self) -> Any:
        return (VirtualAccount, (self._data,))

    @property
    def raw(self) -> dict[str, Any]:
        return dict(self._data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in self._data.items()
        )
        return f"<table><caption>VirtualAccount</caption>{rows}</table>"


def to_records(models: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows for ``pandas.DataFrame``: one flat dict of snake_case fields per model, amounts kept as ``Decimal``."""
    out: list[dict[str, Any]] = []
    for m in models:
        if isinstance(m, VirtualAccount):
            out.append(m.to_dict())
            continue
        row: dict[str, Any] = {}
        for f in fields(m):
            if f.name == "raw":
                continue
            v = getattr(m, f.name)
            if isinstance(v, _Model) and not isinstance(v, VirtualAccount):
                for sub in fields(v):  # type: ignore[arg-type]
                    row[f"{f.name}_{sub.name}"] = getattr(v, sub.name)
            elif v is None and f.name == "freebies":
                # An absent optional sub-model keeps the columns of a present one.
                for sub in fields(Freebies):
                    row[f"{f.name}_{sub.name}"] = None
            else:
                row[f.name] = v
        out.append(row)
    return out

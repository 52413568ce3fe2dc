"""``DealCreated`` events of a test's choosing: the body and headers the sandbox would send
(``deal_created_request``), shared by ``Sandbox.send_deal_created`` and
``RemoteSandbox.send_deal_created`` so that all three build the same bytes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .._fxpay import FieldError
from ..errors import InvalidRequestError
from ._checks import check_type

__all__ = ["deal_created_request", "event_json"]

STATUSES = ("success", "fail")

#: The one error of a ``fail`` event made without ``errors``: a ``fail`` event carries at least
#: one (``parse_deal_created`` refuses an empty list), so, as a missing id is, it is made up.
DEFAULT_FAIL_ERROR = {"errorCode": "sandbox:event:5003", "fieldName": "", "message": "the deal was not created (an event made by a test)"}


def _error(i: int, e: object) -> dict[str, Any]:
    name = f"errors[{i}]"
    if isinstance(e, FieldError):
        return {"errorCode": e.error_code, "fieldName": e.field_name or "", "message": e.message}
    if not isinstance(e, Mapping):
        raise TypeError(f"{name} must be a fxpay.FieldError or a mapping, got {type(e).__name__}")
    unknown = set(e) - {"errorCode", "fieldName", "message"}
    if unknown:
        raise InvalidRequestError(f"{name} has unknown keys {sorted(map(str, unknown))} (errorCode, fieldName, message)")
    code, field, message = e.get("errorCode"), e.get("fieldName"), e.get("message", "")
    check_type(f"{name}['errorCode']", code, str, "a str")
    if field is not None:
        check_type(f"{name}['fieldName']", field, str, "a str or None")
    check_type(f"{name}['message']", message, str, "a str")
    # The wire's fieldName is a string: an error about no one field has "".
    return {"errorCode": code, "fieldName": field or "", "message": message}


def event_json(
    *,
    status: str = "success",
    process_id: str | None = None,
    deal_id: str | None = None,
    errors: Sequence[FieldError | Mapping[str, Any]] = (),
    nonce: str | None = None,
) -> str:
    """The event as the sandbox serializes it (compact JSON, wire names). Checks every
    argument: a ``TypeError`` naming a parameter of the wrong type, an
    ``InvalidRequestError`` for a wrong value."""
    check_type("status", status, str, "a str")
    if status not in STATUSES:
        raise InvalidRequestError(f"status must be 'success' or 'fail', got {status!r}")
    for name, value in (("process_id", process_id), ("deal_id", deal_id), ("nonce", nonce)):
        if value is not None:
            check_type(name, value, str, "a str or None")
            if not value:
                raise InvalidRequestError(f"{name} must not be empty")
    if nonce is not None and not (len(nonce) <= 512 and all("!" <= ch <= "~" for ch in nonce)):
        # What create_spot_deal takes as a callback_nonce, and a header value can carry.
        raise InvalidRequestError(f"nonce must be 1 to 512 visible ASCII characters, as a callback_nonce is, got {nonce!r}")
    if isinstance(errors, (str, bytes, Mapping)) or not isinstance(errors, Sequence):
        raise TypeError(f"errors must be a sequence of fxpay.FieldError or mappings, got {type(errors).__name__}")
    wire_errors = [_error(i, e) for i, e in enumerate(errors)]
    body: dict[str, Any] = {"processId": process_id or str(uuid.uuid4())}
    if status == "success":
        if wire_errors:
            raise InvalidRequestError("errors are for a 'fail' event; a 'success' event carries none")
        body["dealId"] = deal_id or str(uuid.uuid4())
    else:
        if deal_id is not None:
            raise InvalidRequestError("deal_id is for a 'success' event; a 'fail' event has no deal")
        body["errors"] = wire_errors or [dict(DEFAULT_FAIL_ERROR)]
    event = {"eventType": "DealCreated", "status": status, "eventBody": body}
    text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(
            "process_id, deal_id and errors must be text: one holds a lone surrogate, which no UTF-8 body can carry"
        ) from None
    return text


def deal_created_request(
    *,
    status: str = "success",
    process_id: str | None = None,
    deal_id: str | None = None,
    errors: Sequence[FieldError | Mapping[str, Any]] = (),
    nonce: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """``(body, headers)`` of a ``DealCreated`` notification, as the sandbox (and the
    service) would POST it, for a framework's test client (``TestClient.post(url,
    content=body, headers=headers)``, Django's ``Client.post(url, body,
    content_type=..., headers=...)``).

    ``status`` is ``"success"`` or ``"fail"``; ``errors`` (for ``"fail"``) are
    :class:`fxpay.FieldError`s or mappings as on the wire (``errorCode``, ``fieldName``,
    ``message``). A missing ``process_id``, or ``deal_id`` of a success, is a fresh UUID; a
    ``"fail"`` without ``errors`` gets one (``sandbox:event:5003``), since a fail event
    carries at least one.
    ``headers`` holds ``content-type`` and, when ``nonce`` is given, ``callback-nonce``.
    """
    text = event_json(status=status, process_id=process_id, deal_id=deal_id, errors=errors, nonce=nonce)
    headers = {"content-type": "application/json"}
    if nonce is not None:
        headers["callback-nonce"] = nonce
    return text.encode(), headers

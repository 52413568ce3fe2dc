"""Receiving the ``DealCreated`` notification (spec section 6).

Framework receivers built on :func:`parse_deal_created` live in :mod:`fxpay.contrib.fastapi`
and :mod:`fxpay.contrib.django`.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import _fxpay
from .models import DealCreated

__all__ = ["MAX_BODY_BYTES", "NONCE_HEADER", "parse_deal_created"]

#: Bodies larger than this are refused before they are parsed.
MAX_BODY_BYTES = 1_048_576

#: The header in which the service sends back the nonce of the spot-deal request.
NONCE_HEADER = "callback-nonce"


def parse_deal_created(
    body: bytes | str,
    headers: Mapping[str, str] | None = None,
    *,
    nonce: str | None = None,
) -> DealCreated:
    """Verifies and parses a ``DealCreated`` notification.

    ``body`` is the request body exactly as received (``bytes``, or ``str`` that is encoded
    to UTF-8). ``headers`` is any mapping of the request headers (``dict``, Starlette's
    ``request.headers``, Django's ``request.headers``); only its ``items()`` are read.

    With ``nonce`` (the ``callback_nonce`` of the :class:`~fxpay.SpotDeal`), exactly one
    ``callback-nonce`` header, name in any case, must carry that value; it is compared in
    constant time, and neither value ever appears in an error message. Failure raises
    :class:`fxpay.WebhookVerificationError`.

    The body must be at most 1 MiB of UTF-8 JSON forming a ``DealCreated`` event (spec 6.2):
    ``eventType`` ``"DealCreated"``, ``status`` ``"success"`` or ``"fail"``, an
    ``eventBody`` with a UUID ``processId``, and either a UUID ``dealId`` (success) or a
    non-empty ``errors`` list of ``{errorCode, fieldName, message}`` strings (fail).
    Duplicate keys in those objects are refused; unknown extra fields are allowed and kept
    in ``raw``. Anything else raises :class:`fxpay.WebhookPayloadError` naming the field.
    """
    return _fxpay.parse_deal_created(body, headers, nonce=nonce)

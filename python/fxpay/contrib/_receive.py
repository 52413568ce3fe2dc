"""What every receiver shares: the nonce settings and the verify-then-parse steps."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .._otel import receiving as traced
from ..errors import ConfigurationError, WebhookVerificationError
from ..models import DealCreated
from ..webhooks import MAX_BODY_BYTES, parse_deal_created

__all__ = [
    "MAX_BODY_BYTES",
    "NonceFor",
    "check_nonce_settings",
    "logger",
    "nonce_for_unknown",
    "parse_unverified",
    "traced",
    "verify",
]

logger = logging.getLogger("fxpay.webhooks")

#: Looks up the ``callback_nonce`` stored with the ``SpotDeal`` of a ``processId``.
NonceFor = Callable[[str], Any]


def check_nonce_settings(nonce: str | None, nonce_for: NonceFor | None) -> None:
    """Exactly one of ``nonce`` and ``nonce_for`` must be given."""
    if (nonce is None) == (nonce_for is None):
        raise ConfigurationError("give exactly one of nonce= and nonce_for=")
    if nonce is not None and not nonce:
        raise ConfigurationError("nonce= must not be empty")


def parse_unverified(body: bytes) -> DealCreated:
    """The event, read only to learn its ``processId`` before the nonce is looked up."""
    return parse_deal_created(body)


def nonce_for_unknown() -> WebhookVerificationError:
    return WebhookVerificationError("no callback-nonce is known for this processId")


def verify(body: bytes, headers: Mapping[str, str], nonce: str | None) -> DealCreated:
    """The event, verified against ``nonce`` (refused when no nonce was found)."""
    if not nonce:
        raise nonce_for_unknown()
    return parse_deal_created(body, headers, nonce=nonce)

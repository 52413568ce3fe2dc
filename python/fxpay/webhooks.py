"""Receiving the ``DealCreated`` notification (spec section 6).

Framework receivers built on :func:`parse_deal_created` live in :mod:`fxpay.contrib.fastapi`
and :mod:`fxpay.contrib.django`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .models import DealCreated

if TYPE_CHECKING:
    from .journals import Journal

__all__ = ["MAX_BODY_BYTES", "NONCE_HEADER", "parse_deal_created", "settle_deal_created"]

#: Bodies larger than this are refused before they are parsed.
MAX_BODY_BYTES = 1_048_576

#: The header in which the service sends back the nonce of the spot-deal request.
NONCE_HEADER = "callback-nonce"


if TYPE_CHECKING:

    def parse_deal_created(
        body: bytes | str,
        headers: Mapping[str, str] | None = None,
        *,
        nonce: str | None = None,
    ) -> DealCreated:
        """Verifies and parses a ``DealCreated`` notification."""
        ...

else:
    # The compiled function itself (its docstring says every rule), with no Python frame in
    # between: receivers call it once per notification.
    from ._fxpay import parse_deal_created


def settle_deal_created(body: bytes | str, headers: Mapping[str, str], *, journal: Journal) -> DealCreated:
    """Verifies a ``DealCreated`` notification against the callback nonces ``journal`` issued
    to keyed spot deals, settles that spot deal's key, and returns the event: for a receiver
    written by hand, it does what the receivers of :mod:`fxpay.contrib` do when given
    ``journal=`` alone.

    The key is settled whatever state it is in: ``done`` on success (``result`` the
    ``processId``, ``deal_id`` set), ``released`` on failure. So a keyed spot deal whose answer
    was lost (:class:`fxpay.OutcomeUnknownError`) settles itself when its notification comes,
    and a later call with its key returns the ``SpotDeal`` without sending anything. Settling
    is idempotent: a repeated delivery changes nothing.

    Raises :class:`fxpay.WebhookVerificationError` when the ``callback-nonce`` header is
    missing, repeated or was never issued by ``journal`` (answer 401),
    :class:`fxpay.WebhookPayloadError` when the body is not a ``DealCreated`` event (400), and
    :class:`fxpay.JournalError` when the journal fails (answer 503, so the service delivers
    again). Run ``on_event``-like work after it, once per ``processId``
    (:class:`fxpay.seen.SeenSet`).
    """
    from ._fxpay import _journal_settle_spot, _journal_verify_deal_created

    event, key = _journal_verify_deal_created(journal, body, headers)
    _journal_settle_spot(journal, key, event)
    return event

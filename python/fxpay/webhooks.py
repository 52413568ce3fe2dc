"""Receiving the ``DealCreated`` notification (spec section 6).

Framework receivers built on :func:`parse_deal_created` live in :mod:`fxpay.contrib.fastapi`
and :mod:`fxpay.contrib.django`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .models import DealCreated

__all__ = ["MAX_BODY_BYTES", "NONCE_HEADER", "parse_deal_created"]

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

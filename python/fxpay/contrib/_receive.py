"""What every receiver shares: the settings, the verify-then-parse steps and the answers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._otel import receiving as traced
from ..errors import ConfigurationError, WebhookVerificationError
from ..models import DealCreated
from ..seen import MemorySeenSet, SeenSet
from ..webhooks import MAX_BODY_BYTES, parse_deal_created

__all__ = [
    "MAX_BODY_BYTES",
    "Answer",
    "NonceFor",
    "Settings",
    "after_claim",
    "check_journal",
    "check_nonce_settings",
    "complete_spot",
    "headers_of",
    "logger",
    "nonce_for_unknown",
    "parse_unverified",
    "seen_key",
    "settings",
    "traced",
    "verify",
]

logger = logging.getLogger("fxpay.webhooks")

#: Looks up the ``callback_nonce`` stored with the ``SpotDeal`` of a ``processId``.
NonceFor = Callable[[str], Any]

#: (HTTP status, JSON body) of each answer that is not "handled".
Answer = tuple[int, dict[str, Any]]

OK: Answer = (200, {"ok": True})
DUPLICATE: Answer = (200, {"ok": True, "duplicate": True})
BUSY: Answer = (409, {"ok": False, "error": "another delivery of this processId is being handled; try again"})
LOOKUP_FAILED: Answer = (500, {"ok": False, "error": "nonce lookup failed"})
#: How long a sender should wait before it tries again when the seen-set is down (seconds).
SEEN_RETRY_AFTER = 5
#: The seen-set raised (Redis down): 503 with ``Retry-After``, so the sender backs off until
#: it is back instead of spending its retries on an outage.
SEEN_UNAVAILABLE: Answer = (503, {"ok": False, "error": "the seen-set is unavailable; try again later"})
#: The seen-set answered something that is none of "claimed", "seen", "busy" (a bug).
SEEN_FAILED: Answer = (500, {"ok": False, "error": "the seen-set failed"})
HANDLER_FAILED: Answer = (500, {"ok": False, "error": "the event handler failed"})


@dataclass(frozen=True)
class Settings:
    """A receiver's checked settings."""

    nonce: str | None
    nonce_for: NonceFor | None
    nonce_for_ref: NonceFor | None
    ref_param: str
    seen: Any  # a SeenSet
    # The seen-set never blocks (kept in memory): async receivers call it inline.
    seen_inline: bool


def check_nonce_settings(nonce: str | None, nonce_for: NonceFor | None, nonce_for_ref: NonceFor | None = None) -> None:
    """Exactly one of ``nonce``, ``nonce_for`` and ``nonce_for_ref`` must be given."""
    if sum(x is not None for x in (nonce, nonce_for, nonce_for_ref)) != 1:
        raise ConfigurationError("give exactly one of nonce=, nonce_for= and nonce_for_ref=")
    if nonce is not None and not nonce:
        raise ConfigurationError("nonce= must not be empty")


def settings(
    *,
    nonce: str | None,
    nonce_for: NonceFor | None,
    nonce_for_ref: NonceFor | None,
    ref_param: str,
    seen: SeenSet | None,
    on_event: Any,
) -> Settings:
    check_nonce_settings(nonce, nonce_for, nonce_for_ref)
    if not callable(on_event):
        raise TypeError("on_event must be callable")
    for name, fn in (("nonce_for", nonce_for), ("nonce_for_ref", nonce_for_ref)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable")
    if not isinstance(ref_param, str):
        raise TypeError("ref_param must be str")
    if not ref_param:
        raise ConfigurationError("ref_param= must not be empty")
    if seen is None:
        seen = MemorySeenSet()
    elif not isinstance(seen, SeenSet):
        raise TypeError("seen must be a SeenSet (with claim, commit and release methods)")
    return Settings(nonce, nonce_for, nonce_for_ref, ref_param, seen, type(seen) is MemorySeenSet)


def seen_key(event: DealCreated) -> str:
    """The seen-set key of an event: its ``processId`` (a UUID, so its case does not matter)."""
    return event.process_id.lower()


def after_claim(claim: Any, event: DealCreated) -> Answer:
    """The answer when the seen-set did not give this delivery the claim."""
    if claim == "seen":
        return DUPLICATE
    if claim == "busy":
        return BUSY
    logger.error("the seen-set's claim returned %r for DealCreated %s", claim, event.process_id)
    return SEEN_FAILED


def headers_of(answer: Answer) -> dict[str, str] | None:
    """The headers an answer carries: ``Retry-After`` on a 503."""
    return {"Retry-After": str(SEEN_RETRY_AFTER)} if answer[0] == 503 else None


def parse_unverified(body: bytes) -> DealCreated:
    """The event, read only to learn its ``processId`` before the nonce is looked up."""
    return parse_deal_created(body)


def nonce_for_unknown() -> WebhookVerificationError:
    return WebhookVerificationError("no callback-nonce is known for this processId")


def no_ref(param: str) -> WebhookVerificationError:
    return WebhookVerificationError(f"the callback URL carries no {param} query parameter")


def complete_spot(journal: Any, event: DealCreated) -> None:
    """Records a verified successful event's ``dealId`` on its spot deal's journal entry
    (``journal`` given to the receiver). Idempotent; a journal that fails is logged, and the
    delivery is still handled: the entry's deal id is bookkeeping, ``on_event`` is the job."""
    if journal is None or not event.ok or event.deal_id is None:
        return
    try:
        journal.complete_spot(event.process_id, event.deal_id)
    except Exception:
        logger.exception("the journal failed to record the deal of DealCreated %s", event.process_id)


def check_journal(journal: Any) -> None:
    if journal is not None and not callable(getattr(journal, "complete_spot", None)):
        raise TypeError(f"journal must be a fxpay journal (with complete_spot), not {type(journal).__name__}")


def verify(body: bytes, headers: Mapping[str, str], nonce: str | None) -> DealCreated:
    """The event, verified against ``nonce`` (refused when no nonce was found)."""
    if not nonce:
        raise nonce_for_unknown()
    return parse_deal_created(body, headers, nonce=nonce)

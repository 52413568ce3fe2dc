"""What the receivers of :mod:`fxpay.contrib` (FastAPI, Django) share: the settings, the answers, and the receive flow itself.

The flow (:func:`flow`) is written once, with no I/O: a generator that yields each call it
needs made (a nonce lookup, the journal, the seen-set, ``on_event``) as a :class:`Call` and
is sent back its result (or thrown its exception), and returns the answer. A front drives
it: the Django view with :func:`drive` (each call made on the request's thread), the FastAPI
router with :func:`drive_async` (each call awaited). The fronts only read the request and
write the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from .._otel import receiving as traced
from ..errors import ConfigurationError, WebhookPayloadError, WebhookVerificationError
from ..journals import settle_spot_key, verify_deal_created
from ..models import DealCreated
from ..seen import MemorySeenSet, SeenSet
from ..webhooks import MAX_BODY_BYTES, parse_deal_created

__all__ = [
    "MAX_BODY_BYTES",
    "Answer",
    "Call",
    "Flow",
    "NonceFor",
    "Settings",
    "after_claim",
    "by_journal",
    "check_journal",
    "check_nonce_settings",
    "complete_spot",
    "drive",
    "drive_async",
    "flow",
    "handle",
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
#: The journal failed while it verified or settled the event: 503 with ``Retry-After``, so the
#: sender delivers it again once the journal is back (the event is what settles the key).
JOURNAL_UNAVAILABLE: Answer = (503, {"ok": False, "error": "the journal is unavailable; try again later"})


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
    on_event: Callable[..., Any]
    # No nonce setting, a journal given: notifications are verified against the nonces the
    # journal issued to keyed spot deals, and settle their keys.
    by_journal: bool = False


def check_nonce_settings(
    nonce: str | None, nonce_for: NonceFor | None, nonce_for_ref: NonceFor | None = None, *, journal: Any = None
) -> None:
    """Exactly one of ``nonce``, ``nonce_for`` and ``nonce_for_ref`` must be given, or none of
    them with a ``journal`` (whose issued nonces then verify each notification)."""
    if nonce is not None and not isinstance(nonce, str):
        raise TypeError(f"nonce must be a str, not {type(nonce).__name__}")
    given = sum(x is not None for x in (nonce, nonce_for, nonce_for_ref))
    if given == 0 and journal is not None:
        return
    if given != 1:
        raise ConfigurationError("give exactly one of nonce=, nonce_for= and nonce_for_ref=, or journal= alone")
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
    journal: Any = None,
) -> Settings:
    check_nonce_settings(nonce, nonce_for, nonce_for_ref, journal=journal)
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
    by_journal = journal is not None and nonce is None and nonce_for is None and nonce_for_ref is None
    return Settings(nonce, nonce_for, nonce_for_ref, ref_param, seen, type(seen) is MemorySeenSet, on_event, by_journal)


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


# -- the flow ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A call the flow needs made: ``fn(*args)``. The front decides how (on this thread, in a
    thread pool, awaited); ``seen`` marks a seen-set method."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    seen: bool = False


#: Yields the calls to make, is sent their results, returns the answer.
Flow = Generator[Call, Any, Answer]


def by_journal(journal: Any, body: bytes, headers: Mapping[str, str]) -> Generator[Call, Any, Answer | DealCreated]:
    """Verifies a notification against the nonces ``journal`` issued and settles its spot
    deal's key; returns the event, or the answer when it cannot be handled."""
    try:
        verified = yield Call(verify_deal_created, (journal, body, headers))
        event: DealCreated = verified[0]
        key: str = verified[1]
    except WebhookVerificationError as e:
        return (401, {"ok": False, "error": str(e)})
    except WebhookPayloadError as e:
        return (400, {"ok": False, "error": str(e)})
    except Exception:
        logger.exception("the journal failed to verify a DealCreated notification")
        return JOURNAL_UNAVAILABLE
    try:
        yield Call(settle_spot_key, (journal, key, event))
    except Exception:
        logger.exception("the journal failed to settle the key of DealCreated %s", event.process_id)
        return JOURNAL_UNAVAILABLE
    return event


def flow(conf: Settings, journal: Any, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]) -> Flow:
    """Receives one delivery: verifies it, claims its ``processId``, runs ``on_event`` once."""
    ref: str | None = None
    if conf.by_journal:
        got = yield from by_journal(journal, body, headers)
        if not isinstance(got, DealCreated):
            return got
        return (yield from handle(conf, got, None))
    try:
        lookup: NonceFor | None = None
        if conf.nonce_for_ref is not None:
            ref = query.get(conf.ref_param)
            if not ref:
                raise no_ref(conf.ref_param)
            lookup, by = conf.nonce_for_ref, ref
        elif conf.nonce_for is not None:
            lookup, by = conf.nonce_for, parse_unverified(body).process_id
        if lookup is None:
            event = verify(body, headers, conf.nonce)
        else:
            try:
                expected = yield Call(lookup, (by,))
            except Exception:
                logger.exception("nonce lookup failed for a DealCreated notification")
                return LOOKUP_FAILED
            event = verify(body, headers, expected)
    except WebhookVerificationError as e:
        return (401, {"ok": False, "error": str(e)})
    except WebhookPayloadError as e:
        return (400, {"ok": False, "error": str(e)})

    yield Call(complete_spot, (journal, event))
    return (yield from handle(conf, event, ref))


def handle(conf: Settings, event: DealCreated, ref: str | None) -> Flow:
    """Runs ``on_event`` for a verified event, once per ``processId`` (the seen-set)."""
    key = seen_key(event)
    try:
        claim = yield Call(conf.seen.claim, (key,), seen=True)
    except Exception:
        logger.exception("the seen-set failed to claim DealCreated %s", event.process_id)
        return SEEN_UNAVAILABLE
    if claim != "claimed":
        return after_claim(claim, event)
    try:
        yield Call(conf.on_event, (event,) if ref is None else (event, ref))
    except Exception:
        logger.exception("on_event failed for DealCreated %s", event.process_id)
        try:
            yield Call(conf.seen.release, (key,), seen=True)
        except Exception:
            logger.exception("the seen-set failed to release DealCreated %s", event.process_id)
        return HANDLER_FAILED
    try:
        yield Call(conf.seen.commit, (key,), seen=True)
    except Exception:
        # on_event did run: answer 200, so the service does not send it again.
        logger.exception("the seen-set failed to commit DealCreated %s", event.process_id)
    return OK


def drive(steps: Flow, make: Callable[[Call], Any]) -> Answer:
    """Runs the flow, making each call with ``make`` (blocking) and sending its outcome back."""
    try:
        step = next(steps)
        while True:
            try:
                result = make(step)
            except Exception as e:
                step = steps.throw(e)
            else:
                step = steps.send(result)
    except StopIteration as done:
        answer: Answer = done.value
        return answer


async def drive_async(steps: Flow, make: Callable[[Call], Awaitable[Any]]) -> Answer:
    """:func:`drive`, awaiting each call that ``make`` starts."""
    try:
        step = next(steps)
        while True:
            try:
                result = await make(step)
            except Exception as e:
                step = steps.throw(e)
            else:
                step = steps.send(result)
    except StopIteration as done:
        answer: Answer = done.value
        return answer

"""Idempotency journals: where fxpay keeps its own idempotency keys (the service has none).

A creating call with ``idempotency_key=`` claims its key in the client's journal, durably,
before any byte of the request is sent; records the created id when the answer comes; and
any later call with the key replays, refuses or reports an unknown outcome instead of sending
again. The states, the guarantees and their limits: docs/idempotency.md.

- :class:`SqliteJournal`: one machine (every process on it); the embedded default.
- :class:`RedisJournal`: many machines sharing one Redis.
- :class:`MemoryJournal`: one process (tests).

All three implement the :class:`Journal` protocol, as :class:`fxpay.PostgresJournal` does
(``fxpay[postgres]``, in :mod:`fxpay.journals.postgres`, imported on first use); a journal
of your own implements its four storage methods and inherits the rest from
:class:`JournalBase`. The state machine itself (what a repeat means, leases, what a failure
leaves behind) is fxpay's, in its Rust core: a journal only stores entries.

One module per store (``memory``, ``sqlite``, ``redis``, ``postgres``), each on
``_base`` (:class:`JournalBase`, the checks of keys and entries, the seconds parser).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from .._fxpay import DealCreated, JournalEntry, _journal_settle_spot, _journal_verify_deal_created
from ._base import JournalBase, logger
from .memory import MemoryJournal
from .redis import RedisJournal
from .sqlite import SqliteJournal

__all__ = [
    "Journal",
    "JournalBase",
    "JournalEntry",
    "MemoryJournal",
    "RedisJournal",
    "SqliteJournal",
    "settle_deal_created",
    "settle_spot_key",
    "verify_deal_created",
]


@runtime_checkable
class Journal(Protocol):
    """What a journal is. The client calls ``get``, ``claim``, ``swap`` and ``find``; people
    call ``get``, ``unknown`` and ``resolve``.

    Storage methods (each atomic; an exception is an outage, and a call that meets one fails
    closed with :class:`fxpay.JournalError`, nothing sent):

    - ``get(key)``: the entry under ``key``, or None.
    - ``claim(entry)``: store ``entry`` if nothing is stored under ``entry.key``; return
      None when stored, else the stored entry. This is what makes a key at most once: it
      must be atomic across every process that shares the journal.
    - ``swap(old, new)``: replace ``old`` by ``new`` only if the stored entry is still
      ``old`` (compare their :meth:`~fxpay.JournalEntry.to_json` texts); True when replaced.
    - ``find(result)``: the entry whose ``result`` is ``result`` (a spot deal's process id).

    A journal whose processes all run on one machine may set ``single_host = True``: a
    pending key whose holder process has exited is then known to be gone at once, rather
    than when its 30 s lease lapses.
    """

    def get(self, key: str) -> JournalEntry | None: ...

    def claim(self, entry: JournalEntry) -> JournalEntry | None: ...

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool: ...

    def find(self, result: str) -> JournalEntry | None: ...

    def unknown(self) -> list[JournalEntry]: ...

    def resolve(self, key: str, *, result: str | None) -> JournalEntry: ...


def settle_spot_key(journal: Journal, key: str, event: DealCreated) -> JournalEntry | None:
    """Settles the spot deal under ``key`` by its verified ``event``, forward only, and logs a
    contradiction (a ``fail`` for a ``done`` key, another deal) at error level: the key keeps
    what it had, and the notification is still answered 200, so that the provider does not
    deliver it again for ever. The entry as it now stands, or None when the journal holds no
    spot deal under ``key``."""
    entry, contradiction = _journal_settle_spot(journal, key, event)
    if contradiction is not None:
        logger.error("DealCreated left key %r as it was: %s", key, contradiction)
    return entry


def verify_deal_created(journal: Journal, body: bytes | str, headers: Mapping[str, str]) -> tuple[DealCreated, str]:
    """Verifies a ``DealCreated`` notification against the callback nonces ``journal`` issued
    to keyed spot deals, and returns the event and the key whose claim its nonce was issued
    to; settles nothing (:func:`settle_spot_key` does, :func:`settle_deal_created` does both).
    Raises as :func:`settle_deal_created` does."""
    event, key = _journal_verify_deal_created(journal, body, headers)
    return event, key


def settle_deal_created(body: bytes | str, headers: Mapping[str, str], *, journal: Journal) -> DealCreated:
    """Verifies a ``DealCreated`` notification against the callback nonces ``journal`` issued
    to keyed spot deals, settles that spot deal's key, and returns the event: for a receiver
    written by hand, it does what the receivers of :mod:`fxpay.contrib` do when given
    ``journal=`` alone.

    A nonce is issued to one claim of one key, and the notification settles that claim only,
    forward: a ``pending`` or ``unknown`` key becomes ``done`` on success (``result`` the
    ``processId``, ``deal_id`` set) and ``released`` on failure. So a keyed spot deal whose
    answer was lost (:class:`fxpay.OutcomeUnknownError`) settles itself when its notification
    comes, and a later call with its key returns the ``SpotDeal`` without sending anything.
    A notification never moves a key back: a ``fail`` never releases a ``done`` key, and a
    success never replaces another deal's result. Such a contradiction is logged at error
    level on the ``fxpay.journal`` logger, the key keeps what it had, and the event is
    returned (answer 200: a redelivery would say the same). Settling is idempotent: a repeated
    delivery changes nothing.

    Raises :class:`fxpay.WebhookVerificationError` when the ``callback-nonce`` header is
    missing, repeated, was never issued by ``journal``, or was issued to an earlier claim of
    its key (answer 401), :class:`fxpay.WebhookPayloadError` when the body is not a
    ``DealCreated`` event (400), and :class:`fxpay.JournalError` when the journal fails
    (answer 503, so the service delivers again). Run ``on_event``-like work after it, once per
    ``processId`` (:class:`fxpay.seen.SeenSet`).
    """
    event, key = verify_deal_created(journal, body, headers)
    settle_spot_key(journal, key, event)
    return event

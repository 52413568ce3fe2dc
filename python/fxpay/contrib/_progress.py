"""The progress of a payout that other processes pay (Celery or Dask workers), followed from
the process that submitted it: ``journal.payout_progress(keys)`` read every ``poll`` seconds
and reported as ``pay_out`` reports its own (a tqdm bar, or a callable)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..journals import JournalBase

__all__ = ["check_journal", "check_poll", "follow", "now"]


def check_journal(journal: object) -> JournalBase | None:
    """``journal`` as a journal that can count a payout (or None)."""
    if journal is not None and not callable(getattr(journal, "payout_progress", None)):
        raise TypeError(f"journal must be a fxpay journal (with payout_progress), not {type(journal).__name__}")
    return journal  # type: ignore[return-value]


def check_poll(poll: object) -> float:
    from ..errors import InvalidRequestError

    if isinstance(poll, bool) or not isinstance(poll, (int, float)):
        raise TypeError(f"poll must be a number of seconds, not {type(poll).__name__}")
    if not 0.01 <= poll <= 3600:
        raise InvalidRequestError("poll must be 0.01 to 3600 seconds")
    return float(poll)


def follow(
    journal: JournalBase,
    keys: Sequence[str],
    since: datetime.datetime | None,
    update: Callable[..., None],
    finished: Callable[[], bool],
    poll: float,
    timeout: float | None = None,
) -> None:
    """Reports the journal's counts of ``keys`` to ``update`` until ``finished()`` (checked
    before each read, so that the last report comes after the end) or ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        end = finished()
        p = journal.payout_progress(keys, since=since)
        update(p.done, len(keys), p.booked, p.replayed, p.unknown, p.refused)
        if end or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(poll)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)

"""What every journal shares: :class:`JournalBase` (the hand operations built on a
journal's four storage methods, and what every swap starts with), the checks of a key and
an entry, the seconds parser, and the fork registry of fxpay's own journals."""

from __future__ import annotations

import datetime
import functools
import logging
import math
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .._fxpay import JournalEntry, _journal_complete_spot, _journal_resolve, _journal_unknown, _MemoryStore, _NativeStore
from .._group_commit import _GroupCommit
from .._later import _Later
from .._payouts import PayoutProgress
from ..errors import ConfigurationError, InvalidRequestError, JournalError

_T = TypeVar("_T")

logger = logging.getLogger("fxpay.journal")


def _seconds(name: str, value: object, *, most: float = 86400.0) -> float:
    """A number of seconds above 0 and at most ``most`` (``math.inf``: any finite number):
    ``TypeError`` for another type, :class:`ConfigurationError` for another value (NaN,
    infinities, 0, a negative, an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not (math.isfinite(v) and 0 < v <= most):
        shown = f"{value:.6g}" if isinstance(value, float) else (str(value) if len(str(value)) <= 20 else "a number that large")
        bound = f"more than 0 and at most {most:g} seconds" if math.isfinite(most) else "a finite number of seconds more than 0"
        raise ConfigurationError(f"{name} must be {bound}, got {shown}")
    return v


def _fails_closed(what: str) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """A storage method whose storage errors become :class:`JournalError`."""

    def wrap(f: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(f)
        def method(self: Any, *args: Any, **kwargs: Any) -> _T:
            try:
                return f(self, *args, **kwargs)
            except JournalError:
                raise
            except (TypeError, ValueError):
                raise
            except _ServerRefused as e:
                raise JournalError(str(e)) from None
            except Exception as e:
                raise JournalError(f"{type(self).__name__}.{what}() failed: {type(e).__name__}: {e}") from e

        return method

    return wrap


class JournalBase:
    """The hand operations every journal shares, built on its storage methods."""

    single_host: bool = False

    def _before_fork(self) -> None:
        """Runs in the forking thread before a fork (a journal with per-process state)."""

    def _after_fork(self, *, child: bool) -> None:
        """Runs after a fork, in the parent and in the child."""

    def get(self, key: str) -> JournalEntry | None:
        raise NotImplementedError

    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        raise NotImplementedError

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        raise NotImplementedError

    def _waiting(self) -> _Later | None:
        """The results of this process's keyed calls waiting for this journal's next commit
        (a durable journal's; None: every write is at once)."""
        return None

    def _flush_results(self) -> None:
        """Writes the results waiting now, in one commit (Python's storage: a Redis or
        PostgreSQL journal over the user's client or connections; the flusher's, a payout's
        end, the exit's). A store of the core writes its own."""

    def _not_recorded(self, where: str, key: str, result: str | None) -> None:
        """Logs a result that found its key changed otherwise, with the id for :meth:`resolve`."""
        logger.error(
            "%s %r: the result of key %r (%s) could not be recorded: the key changed meanwhile; "
            "if it reads unknown, settle it with journal.resolve(%r, result=%r)",
            type(self).__name__,
            where,
            key,
            result,
            key,
            result,
        )

    def _swap_pair(self, old: object, new: object) -> tuple[JournalEntry, JournalEntry]:
        """A swap's ``old`` and ``new``, checked as every journal checks them: each a
        :class:`JournalEntry` (else a ``TypeError`` naming it), of one key (else
        :class:`fxpay.InvalidRequestError`, a wrong value; nothing is swapped)."""
        o, n = _check_entry(old, "old"), _check_entry(new, "new")
        if o.key != n.key:
            raise InvalidRequestError(f"{type(self).__name__}.swap(): old and new must have the same key")
        return o, n

    def _swap_ready(self, old: JournalEntry, new: JournalEntry) -> tuple[JournalEntry, JournalEntry, str, str] | None:
        """What every swap starts with: the entries checked, and a call's own result left to
        ride the next commit (None: done so). Else ``(old, new, old text, new text)`` for the
        store to swap, once a result of the key still waiting is written first."""
        o, n = self._swap_pair(old, new)
        old_text, text = o.to_json(), n.to_json()
        later = self._waiting()
        if later is not None:
            if _Later.may_wait(o, n) and later.defer(o.key, old_text, n, text):
                _Later.wake(self)
                return None
            if later.get(o.key) is not None:
                self._flush_results()
        return o, n, old_text, text

    def find(self, result: str) -> JournalEntry | None:
        raise NotImplementedError

    def candidates(self) -> list[JournalEntry]:
        """Every entry that is ``pending`` or ``unknown`` (for :meth:`unknown`)."""
        raise NotImplementedError

    def unknown(self) -> list[JournalEntry]:
        """Every key whose outcome is unknown, oldest first. A pending key whose holder is
        gone (its lease lapsed, or, on one host, its process exited) is marked unknown here.
        Settle each with :meth:`resolve`."""
        return _journal_unknown(self, self.candidates())

    def leased(self, keys: Iterable[str] | None = None) -> list[JournalEntry]:
        """Every key still ``pending`` under a holder's lease, the soonest lease to lapse
        first: a call in flight, or one whose process died while its lease runs on. With
        ``keys`` (a payout's row keys, as ``payout_progress`` takes them), only the steps of
        those rows (``K/quote``, ``K/beneficiary``, ``K/deal``).

        A key's ``lease_until`` says when :meth:`unknown` lists it if its holder is gone: a
        live holder renews its lease while its call runs (at most 30 s ahead), a dead one
        cannot. The journal's lease is its only evidence that a holder on another machine is
        gone (a Celery or Dask worker that the broker or the cluster reports lost is a
        process the journal cannot check), so no key is taken from its holder before the
        lease lapses. What the journal can prove gone is marked unknown first, as
        :meth:`unknown` does (a lapsed lease; on one host, a holder whose process exited),
        and is not listed here."""
        if keys is None:
            found = self.candidates()
        else:
            if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
                raise TypeError(f"keys must be an iterable of str or None, not {type(keys).__name__}")
            wanted = [f"{_check_key(k)}/{step}" for k in keys for step in _STEPS]
            found = [e for e in self.entries(wanted).values() if e.state in ("pending", "unknown")]
        pending = [e for e in found if e.state == "pending"]
        if not pending:
            return []
        _journal_unknown(self, pending)  # what the journal can prove gone: unknown, not leased
        still = self.entries([e.key for e in pending]).values()
        out = [e for e in still if e.state == "pending"]
        out.sort(key=lambda e: (e.lease_until, e.key))
        return out

    def resolve(self, key: str, *, result: str | None) -> JournalEntry:
        """Settles an unknown key: ``result`` is the id that the request created (later
        calls with the key return it without sending), or None when it created nothing (the
        key is released, and may be used again). Returns the entry as settled."""
        return _journal_resolve(self, key, result)

    def entries(self, keys: Iterable[str]) -> dict[str, JournalEntry]:
        """The entries stored under ``keys`` (keys with none are left out). A journal may
        read them in fewer round trips than one :meth:`get` each."""
        out = {}
        for key in keys:
            e = self.get(key)
            if e is not None:
                out[key] = e
        return out

    def payout_progress(self, keys: Iterable[str], *, since: datetime.datetime | None = None) -> PayoutProgress:
        """How far a payout of the rows keyed ``keys`` is, read from the journal alone, so
        that it counts the rows of every process that shares the journal (Celery workers,
        Dask workers, a resumed run). A row keyed ``K`` is, in this order:

        - ``booked``: ``K/deal`` is ``done`` (and, with ``since``, was last written at or
          after ``since``);
        - ``replayed``: ``K/deal`` is ``done`` and was last written before ``since`` (the
          run found it booked; without ``since`` no row counts here);
        - ``unknown``: one of ``K/quote``, ``K/beneficiary``, ``K/deal`` is ``unknown``;
        - ``refused``: none of its entries is ``pending`` or ``unknown``, and one is
          ``released`` (a 4xx proved nothing was created; a row waiting out a 429 counts
          here until it goes on);
        - still to do (``total - done``): no entry yet, or a step ``pending`` (in flight).

        A row refused before any step was claimed (an invalid row) leaves nothing in the
        journal and stays "to do": the run's own results tell it.
        """
        if since is not None and not isinstance(since, datetime.datetime):
            raise TypeError(f"since must be a datetime.datetime or None, not {type(since).__name__}")
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise TypeError(f"keys must be an iterable of str, not {type(keys).__name__}")
        rows = [_check_key(k) for k in keys]
        found = self.entries([f"{k}/{step}" for k in rows for step in _STEPS])
        counts = dict.fromkeys(("booked", "replayed", "unknown", "refused"), 0)
        for k in rows:
            status = _row_status([found.get(f"{k}/{step}") for step in _STEPS], since)
            if status is not None:
                counts[status] += 1
        done = sum(counts.values())
        return PayoutProgress(done, len(rows), counts["booked"], counts["replayed"], counts["unknown"], counts["refused"])

    def complete_spot(self, process_id: str, deal_id: str) -> JournalEntry | None:
        """Records a spot deal's ``dealId`` (from its ``DealCreated``) on its entry; the
        receivers of ``fxpay.contrib`` do this when given a journal. None when the journal
        holds no spot deal with that process id."""
        return _journal_complete_spot(self, process_id, deal_id)


#: The journal keys of a payout row keyed ``K``: ``K/quote``, ``K/beneficiary``, ``K/deal``.
_STEPS = ("quote", "beneficiary", "deal")


def _row_status(steps: list[JournalEntry | None], since: datetime.datetime | None) -> str | None:
    """A payout row's status from its steps' entries (quote, beneficiary, deal), as
    :meth:`JournalBase.payout_progress` defines it; None: still to do."""
    deal = steps[-1]
    if deal is not None and deal.state == "done":
        return "replayed" if since is not None and deal.updated_at < since else "booked"
    states = {e.state for e in steps if e is not None}
    if "unknown" in states:
        return "unknown"
    if "released" in states and "pending" not in states:
        return "refused"
    return None


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    return key


def _check_entry(entry: object, name: str = "entry") -> JournalEntry:
    if not isinstance(entry, JournalEntry):
        raise TypeError(f"{name} must be a fxpay.JournalEntry, not {type(entry).__name__}")
    return entry


def _check_result(result: object) -> str:
    if not isinstance(result, str):
        raise TypeError(f"result must be a str, not {type(result).__name__}")
    return result


class _OwnJournal(JournalBase):
    """What fxpay's own journals share. Their storage is a store of the core (``_store``), or
    (a Redis or PostgreSQL journal over the user's client or connections: ``_store`` None)
    Python's, with this process's results waiting for the next commit (``_later``) and its
    claims for their group commit (``_group``).

    Each registers with :mod:`fxpay._forks`: its per-process state (locks, the group commit,
    connections, a store's per-process side) is made anew in a child forked while other
    threads of the parent were inside a claim or a commit. A lock held, or a commit's leader
    flag set, by a thread that does not exist in the child would hang the child's first keyed
    call forever."""

    _store: _MemoryStore | _NativeStore | None
    _later: _Later
    _group: _GroupCommit
    #: The fxpay class whose storage methods the client may skip (set for each below).
    _storage_of: type[_OwnJournal]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _OwnJournal in cls.__bases__:  # fxpay's own class, not a user's subclass of it
            cls._storage_of = cls

    @property
    def _native_store(self) -> _MemoryStore | _NativeStore | None:
        """The store the client uses directly, unless a subclass changed how it is used (it
        overrides ``get``, ``claim``, ``swap`` or ``find``: then it is called through them)."""
        cls, own = type(self), self._storage_of
        if self._store is not None and all(getattr(cls, m) is getattr(own, m) for m in ("get", "claim", "swap", "find")):
            return self._store
        return None

    def _before_fork(self) -> None:
        # The store's state a child starts from, taken by this (the forking) thread: the
        # child never inherits a lock another thread held at the fork.
        if self._store is not None:
            self._store.before_fork()

    def _after_fork(self, *, child: bool) -> None:
        if self._store is not None and not child:
            self._store.after_fork_in_parent()

    def _waiting(self) -> _Later | None:
        return None if self._store is not None else self._later

    def _swap_begun(self, old: JournalEntry, new: JournalEntry) -> tuple[JournalEntry, JournalEntry, str, str] | None:
        """A swap on Python's storage: the call's claim settled (no longer in flight), then
        :meth:`~JournalBase._swap_ready` (None: the call's result waits for the next commit)."""
        if isinstance(old, JournalEntry):
            self._group.answered(old.key)
        return self._swap_ready(old, new)

    @_fails_closed("find")
    def find(self, result: str) -> JournalEntry | None:
        result = _check_result(result)
        if self._store is not None:
            return self._store.find(result)
        for n in self._later.entries():
            if n.result == result:  # on its way: what the key reads (the store may be ahead)
                got = self.get(n.key)
                if got is not None and got.result == result:
                    return got
        return self._find_stored(result)

    def _find_stored(self, result: str) -> JournalEntry | None:
        """The entry whose result is ``result``, read from Python's storage."""
        raise NotImplementedError


def _result_waits() -> None:
    """A journal's first result of this process waits for a commit: the exit writes it
    (``fxpay._later.flush_all`` writes those of every SqliteJournal, even one the client
    alone still holds)."""
    _Later.hook_exit(None)


class _ServerRefused(Exception):
    """A Redis connection that the journal must not use (a replica, a Redis that forgets):
    raised while the connection is being made, so no command is ever sent on it."""

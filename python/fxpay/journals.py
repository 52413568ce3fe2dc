"""Idempotency journals: where fxpay keeps its own idempotency keys (the service has none).

A creating call with ``idempotency_key=`` claims its key in the client's journal, durably,
before any byte of the request is sent; records the created id when the answer comes; and
any later call with the key replays, refuses or reports an unknown outcome instead of sending
again. The states, the guarantees and their limits: docs/idempotency.md.

- :class:`SqliteJournal`: one machine (every process on it); the embedded default.
- :class:`RedisJournal`: many machines sharing one Redis.
- :class:`MemoryJournal`: one process (tests).

All three implement the :class:`Journal` protocol; a journal of your own (say in
PostgreSQL) implements its four storage methods and inherits the rest from
:class:`JournalBase`. The state machine itself (what a repeat means, leases, what a failure
leaves behind) is fxpay's, in its Rust core: a journal only stores entries.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import math
import os
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from ._fxpay import (
    DealCreated,
    JournalEntry,
    _journal_complete_spot,
    _journal_resolve,
    _journal_settle_spot,
    _journal_unknown,
    _journal_verify_deal_created,
    _MemoryStore,
    _NativeStore,
    _redis_scripts,
    _redis_store,
    _sqlite_create,
    _sqlite_store,
)
from ._group_commit import UNANSWERED, _Claim, _GroupCommit
from ._later import RETRY_DELAY, _Later
from ._payouts import PayoutProgress
from .errors import ConfigurationError, InvalidRequestError, JournalError

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

_T = TypeVar("_T")

logger = logging.getLogger("fxpay.journal")


def _seconds(name: str, value: object, *, most: float = 86400.0) -> float:
    """A number of seconds above 0 and at most ``most``: ``TypeError`` for another type,
    :class:`ConfigurationError` for another value (NaN, infinities, 0, a negative, an int too
    large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not (0 < v <= most):
        shown = f"{value:.6g}" if isinstance(value, float) else (str(value) if len(str(value)) <= 20 else "a number that large")
        raise ConfigurationError(f"{name} must be more than 0 and at most {most:g} seconds, got {shown}")
    return v


# Journals whose per-process state (locks, the group commit, connections) is made anew in a
# child forked while other threads of the parent were inside a claim or a commit: a lock
# held, or a commit's leader flag set, by a thread that does not exist in the child would
# hang the child's first keyed call forever.
_live: weakref.WeakSet[JournalBase] = weakref.WeakSet()


# Held while a journal's SQLite connection is closed outside its journal's own lock (a
# journal freed by the garbage collector, on whatever thread it runs), and by the thread that
# forks: SQLite closes with the GIL released, holding its process-wide mutexes, and a fork
# made meanwhile leaves them held for ever in the child, whose first SQLite call then hangs
# (seen: 3 children in 1,200 forks made while 8 threads wrote and old journals were freed).
_closing = threading.RLock()


# The journals whose ``_before_fork`` ran for the fork being made, held (strongly) until their
# ``_after_fork`` has run: each before is paired with its after even if the journal is freed
# meanwhile. Taken again from ``_live`` after the fork, a journal the garbage collector freed in
# between (an earlier journal in a reference cycle, collected by another thread while the
# forking one waited with the GIL released) missed its after; SQLite's fork gate, counted by
# its before, then stayed held, and every SQLite call of the parent hung (seen once in CI).
_forking: list[JournalBase] = []


def _before_fork() -> None:
    _closing.acquire()
    _forking[:] = list(_live)
    for j in _forking:
        j._before_fork()


def _after_fork_in_parent() -> None:
    try:
        for j in _forking:
            j._after_fork(child=False)
    finally:
        _forking.clear()
        _closing.release()


def _after_fork_in_child() -> None:
    global _closing
    _closing = threading.RLock()
    forked = list(_forking)
    _forking.clear()
    for j in forked:
        j._after_fork(child=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


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

    def _write_waiting(self) -> None:
        """Writes the results waiting now (a durable journal's)."""

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

    def _swap_ready(self, old: JournalEntry, new: JournalEntry) -> tuple[JournalEntry, JournalEntry, str, str] | None:
        """What every swap starts with: the entries checked, and a call's own result left to
        ride the next commit (None: done so). Else ``(old, new, old text, new text)`` for the
        store to swap, once a result of the key still waiting is written first."""
        o, n = _check_entry(old, "old"), _check_entry(new, "new")
        if o.key != n.key:
            raise InvalidRequestError(f"{type(self).__name__}.swap(): old and new must have the same key")
        old_text, text = o.to_json(), n.to_json()
        later = self._waiting()
        if later is not None:
            if _Later.may_wait(o, n) and later.defer(o.key, old_text, n, text):
                _Later.wake(self)
                return None
            if later.get(o.key) is not None:
                self._write_waiting()
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


class MemoryJournal(JournalBase):
    """A journal in this process's memory, for tests: it ends with the process.

    Its entries live in Rust (``fxpay._fxpay._MemoryStore``): a client given a
    ``MemoryJournal`` makes its keyed calls without a climb into Python. A subclass that
    overrides ``get``, ``claim``, ``swap`` or ``find`` is called through those methods, as
    any journal is. A child forked with ``os.fork()`` (or multiprocessing) starts with a copy
    of the entries taken by the forking thread; neither sees the other's later ones."""

    single_host = True

    def __init__(self) -> None:
        self._store = _MemoryStore()
        _live.add(self)

    @property
    def _native_store(self) -> _MemoryStore | None:
        """The store the client uses directly, unless a subclass changed how it is used."""
        cls = type(self)
        if all(getattr(cls, m) is getattr(MemoryJournal, m) for m in ("get", "claim", "swap", "find")):
            return self._store
        return None

    def _before_fork(self) -> None:
        # The copy a child starts from, taken by this (the forking) thread: the child never
        # inherits a lock another thread held at the fork (tests/stress found that hang).
        self._store.before_fork()

    def _after_fork(self, *, child: bool) -> None:
        if not child:
            self._store.after_fork_in_parent()

    def get(self, key: str) -> JournalEntry | None:
        return self._store.get(_check_key(key))

    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        # Whatever is stored is another call's, even if equal to `entry`: two calls of one
        # process that claim a key in the same millisecond make equal entries.
        return self._store.claim(_check_entry(entry))

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        ready = self._swap_ready(old, new)
        assert ready is not None  # nothing waits in memory
        o, n, _, _ = ready
        return self._store.swap(o, n)

    def find(self, result: str) -> JournalEntry | None:
        if not isinstance(result, str):
            raise TypeError(f"result must be a str, not {type(result).__name__}")
        return self._store.find(result)

    def candidates(self) -> list[JournalEntry]:
        return [e for e in self._store.entries() if e.state in ("pending", "unknown")]

    def __len__(self) -> int:
        return len(self._store.entries())

    def __repr__(self) -> str:
        return f"MemoryJournal(keys={len(self)})"


def _what_to_do(path: str) -> str:
    return (
        f"If {path!r} is a journal that was emptied or damaged (a restore gone wrong, a bad copy, a full disk), "
        "restore it from a backup: a journal started afresh would send every key it held again. "
        "If it is not a journal, give SqliteJournal another path."
    )


def _is_file_name(path: str | bytes) -> bool:
    """A path SQLite (and the cassette's file) can be given: UTF-8 text with no NUL (a lone
    surrogate, as ``os.fsdecode`` makes of a non-UTF-8 name, is not)."""
    try:
        raw = path.encode("utf-8") if isinstance(path, str) else path.decode("utf-8").encode("utf-8")
    except UnicodeError:
        return False
    return b"\0" not in raw


def _result_waits() -> None:
    """A journal's first result of this process waits for a commit: the exit writes it
    (``fxpay._later.flush_all`` writes those of every SqliteJournal, even one the client
    alone still holds)."""
    _Later.hook_exit(None)


def _not_recorded(path: str, key: str, result: str | None) -> None:
    """A result of the journal at ``path`` found its key changed otherwise (logged, even when
    only the client still holds the journal's store)."""
    JournalBase._not_recorded(SqliteJournal.__new__(SqliteJournal), path, key, result)


class SqliteJournal(JournalBase):
    """A journal in an SQLite file: every process of one machine shares it.

    The file is created with mode 0600 (it holds spot deals' callback nonces), and an
    existing journal's files are made 0600 when opened. It runs in WAL mode with
    ``synchronous=FULL``: a claim is on disk (fsync) before the request is sent, so neither
    a killed process nor a power cut can lose it. ``timeout`` is how long a call waits for
    another process's write lock before failing closed with :class:`fxpay.JournalError`.

    The journal knows its own file. A new journal is made only where no file exists (made
    complete under a temporary name, then linked into place, so no process ever sees it half
    made). An existing file that is not an fxpay journal, an empty one included, is a
    :class:`fxpay.JournalError` saying what was found: it is never taken for a new journal.
    Before each claim the journal checks that its path still names the file it opened (device
    and inode): a file removed or replaced under a live process is a ``JournalError``, and
    nothing is sent.

    Its storage is fxpay's Rust core with SQLite built in (``fxpay._fxpay._sqlite_store``): a
    keyed call on it never climbs into Python. A connection is opened per process (anew
    after a fork, never shared across one), and every ``SqliteJournal`` of one file in a
    process shares it. Do not open the journal's file with another SQLite library (Python's
    ``sqlite3`` included) in a process that uses the journal: two copies of SQLite in one
    process do not see each other's file locks. A subclass that overrides ``get``,
    ``claim``, ``swap`` or ``find`` is called through those methods, as any journal is.
    """

    single_host = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or an os.PathLike, not {type(path).__name__}")
        if os.fspath(path) in ("", b""):
            raise ConfigurationError("SqliteJournal needs the path of its file, got an empty path")
        if os.fspath(path) == ":memory:":
            # SQLite's in-memory database is one connection's own, and this journal opens one
            # connection per process (anew after a fork): each worker would start with an
            # empty journal of its own, and a key claimed in one would be sent again in another.
            raise ConfigurationError(
                "SqliteJournal(':memory:') would keep a journal per process, which other processes "
                "(and a forked child) cannot see: give it a file path, or use MemoryJournal() in one process"
            )
        if not _is_file_name(os.fspath(path)):
            raise ConfigurationError("SqliteJournal's path must be UTF-8 text without NUL characters (SQLite opens files by such names)")
        self._timeout = _seconds("timeout", timeout)
        # Absolute, once: the file is opened again in each forked child, and a child that
        # changed its working directory (a daemon's chdir("/"), Celery's --workdir) would
        # otherwise open another, empty journal there and send a claimed key again.
        self.path = os.path.abspath(os.fspath(path))
        if not os.path.lexists(self.path):
            self._create()
        dev, ino = self._inspect()
        from . import _later

        self._store = _sqlite_store(
            self.path,
            dev,
            ino,
            self._timeout,
            _later.RESULT_DELAY,
            _result_waits,
            functools.partial(_not_recorded, self.path),
        )
        _live.add(self)

    @property
    def _native_store(self) -> _NativeStore | None:
        """The store the client uses directly, unless a subclass changed how it is used."""
        cls = type(self)
        if all(getattr(cls, m) is getattr(SqliteJournal, m) for m in ("get", "claim", "swap", "find")):
            return self._store
        return None

    def _before_fork(self) -> None:
        # What a child inherits (the results waiting, to read), and no thread inside SQLite
        # at the fork: bounded by `timeout` (a thread stuck longer is left; the child makes
        # its own connection).
        self._store.before_fork()

    def _after_fork(self, *, child: bool) -> None:
        if not child:
            self._store.after_fork_in_parent()

    def _create(self) -> None:
        """Makes a new, complete journal at ``path`` if no file is there: built under a
        temporary name in the same folder, then hard-linked into place (which fails if a file
        appeared meanwhile: another process's new journal is then used). The file's schema and
        application id are the core's (``_sqlite_create``), which knows them once."""
        folder = os.path.dirname(self.path)
        try:
            fd, tmp = tempfile.mkstemp(prefix=".fxpay-journal-", suffix=".tmp", dir=folder)  # mode 0600
        except OSError as e:
            raise JournalError(f"SqliteJournal cannot create {self.path!r}: {e}") from e
        os.close(fd)
        try:
            try:
                # The application id, WAL, synchronous=FULL, the table and its indexes; closed by
                # the last connection: WAL checkpointed into the file, -wal removed. Its error
                # names SQLite's as Python's sqlite3 does ("OperationalError: disk I/O error").
                _sqlite_create(tmp)
            except JournalError as e:
                raise JournalError(f"SqliteJournal cannot create {self.path!r}: {e}") from e
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, self.path)
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as e:
            raise JournalError(f"SqliteJournal cannot create {self.path!r}: {type(e).__name__}: {e}") from e
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    def _inspect(self) -> tuple[int, int]:
        """The (device, inode) of the file at ``path``, made private; a :class:`JournalError`
        when it is not a regular file with content. By its name only: a descriptor of the
        journal's file closed in a process whose SQLite has it open would drop SQLite's locks
        (the store checks what the file holds)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise JournalError(
                f"SqliteJournal's file {self.path!r} was removed while the journal was in use; nothing was sent. "
                "A new file there would be an empty journal that sends every key again: restore the journal "
                "(from the file this process still has open, or a backup) before any keyed call."
            ) from None
        except OSError as e:
            raise JournalError(f"SqliteJournal cannot open {self.path!r}: {e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise JournalError(f"SqliteJournal: {self.path!r} is not a regular file, so not a journal")
        if st.st_size == 0:
            raise JournalError(
                f"SqliteJournal found {self.path!r} empty (0 bytes): that is not an fxpay journal, "
                "and it was not made into a new one. " + _what_to_do(self.path)
            )
        for name in (self.path, self.path + "-wal", self.path + "-shm"):
            try:
                if stat.S_IMODE(os.stat(name).st_mode) & 0o077:
                    os.chmod(name, 0o600)
            except FileNotFoundError:
                pass
            except PermissionError:
                if name == self.path:
                    logger.warning("SqliteJournal cannot make %r private (mode 0600): not its owner", self.path)
        return st.st_dev, st.st_ino

    def _flush_results(self) -> None:
        """Writes the results waiting now (a payout's end, and the exit's)."""
        with contextlib.suppress(Exception):
            self._store.flush()

    @property
    def _writes_waiting(self) -> int:
        """How many writes wait for the next group commit in this process."""
        return int(self._store.diagnostic("writes_waiting"))

    @_fails_closed("get")
    def get(self, key: str) -> JournalEntry | None:
        return self._store.get(_check_key(key))

    @_fails_closed("claim")
    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        return self._store.claim(_check_entry(entry))

    @_fails_closed("swap")
    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        o, n = _check_entry(old, "old"), _check_entry(new, "new")
        if o.key != n.key:
            raise InvalidRequestError("SqliteJournal.swap(): old and new must have the same key")
        return self._store.swap(o, n)

    @_fails_closed("find")
    def find(self, result: str) -> JournalEntry | None:
        if not isinstance(result, str):
            raise TypeError(f"result must be a str, not {type(result).__name__}")
        return self._store.find(result)

    @_fails_closed("candidates")
    def candidates(self) -> list[JournalEntry]:
        return self._store.candidates()

    def close(self) -> None:
        """Writes the results waiting, then closes this process's connection (the journal
        reopens it on next use)."""
        self._store.close()

    def __repr__(self) -> str:
        return f"SqliteJournal({self.path!r})"


# The error a script answers when the journal's identity key does not hold the identity this
# process opened (flushed, restarted empty, created again): the claim or swap is not made.
_NOT_THIS_JOURNAL = "FXPAYJOURNAL"

# The claim and swap scripts every Redis journal runs (the core's, crates/fxpay-core/src/journal/redis/texts.rs):
# SET NX, and compare-and-set, each only where the identity key holds the journal this process opened.
_CLAIM, _SWAP = _redis_scripts()


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _new_identity() -> str:
    import uuid

    return f"fxpay-journal:{uuid.uuid4()}"


def _lost_journal_advice(create: str) -> str:
    return (
        f"A journal is made once, by hand or in a deployment's migration step: {create}, or "
        "`python -m fxpay journal create URL`; never at every start-up. If a journal was here and was lost "
        "(flushed, truncated, restarted without its data, replaced by a new server), restore it from a "
        "backup first: creating a new one where a journal was lost sends every key it held again. Nothing was sent."
    )


def _redis_errors() -> Any:
    """redis-py's exceptions module (imported when a Redis journal is used)."""
    import redis.exceptions

    return redis.exceptions


@functools.cache
def _one_write(connection_class: type[Any]) -> type[Any]:
    """``connection_class`` sending a pipeline in one write: redis-py sends it in pieces of
    about 6 kB, and Redis may read, run and fsync its AOF for each piece apart (a group
    commit of 8 claims and their results, some 10 kB, was two or three fsyncs)."""

    class OneWrite(connection_class):  # type: ignore[misc]
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if isinstance(command, list) and len(command) > 1:
                command = [b"".join(command)]
            super().send_packed_command(command, check_health)

    OneWrite.__name__ = OneWrite.__qualname__ = connection_class.__name__
    return OneWrite


def _redis_not_recorded(prefix: str, key: str, result: str | None) -> None:
    """A result of the Redis journal under ``prefix`` found its key changed otherwise."""
    JournalBase._not_recorded(RedisJournal.__new__(RedisJournal), prefix, key, result)


def _redis_warning(message: str) -> None:
    """A warning about a Redis journal's server (each kind once per journal)."""
    logger.warning("%s", message)


class _ServerRefused(Exception):
    """A Redis connection that the journal must not use (a replica, a Redis that forgets):
    raised while the connection is being made, so no command is ever sent on it."""


class RedisJournal(JournalBase):
    """A journal in Redis, shared by every process and machine that uses it.

    ``url_or_client``: a ``redis.Redis`` or a URL (``redis://127.0.0.1:6379/0``);
    ``socket_timeout`` bounds each command of a client made from a URL, so an unreachable
    Redis fails closed quickly. Claims are ``SET NX`` (in a script that also indexes the
    key); swaps compare and set in one script. Keys are ``prefix + "k:" + key``.

    **A journal knows itself.** A journal is made once, by :meth:`create` (or ``python -m
    fxpay journal create URL``), which stores an identity under ``prefix + "journal"``.
    Opening a journal never makes one: a Redis that holds no identity under ``prefix`` (never
    created, or emptied by ``FLUSHALL``, a restart without its data, a new server), or
    another journal's, is a :class:`fxpay.JournalError` and nothing is sent. Every claim and
    every swap checks the identity inside its own script, so a flush under a live process is
    caught at its next claim.

    **Only a Redis that keeps its writes.** Every connection the journal makes is checked
    before its first command: a replica (``ROLE``) is refused (its writes are lost at the next
    resync), and with ``require_persistence`` (the default) ``appendonly no`` is refused (a
    Redis that forgets every key when it restarts, as most Celery brokers run).
    ``appendfsync everysec`` (or ``no``) is accepted with one warning that a power cut can lose
    the last claims; a Redis that refuses ``CONFIG`` (a managed one) is accepted with one
    warning. As the check runs on every new connection, a Redis restarted with other settings
    is caught at once. ``require_persistence=False`` skips the persistence check (tests, or a
    Redis whose persistence you vouch for). A client given is used through a connection pool
    of the journal's own, made with the client's settings.
    """

    def __init__(
        self,
        url_or_client: Any,
        *,
        prefix: str = "fxpay:journal:",
        socket_timeout: float = 5.0,
        require_persistence: bool = True,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        if not isinstance(require_persistence, bool):
            raise TypeError(f"require_persistence must be a bool, not {type(require_persistence).__name__}")
        socket_timeout = _seconds("socket_timeout", socket_timeout)
        self.prefix = prefix
        self._open = prefix + "open"
        self._id_key = prefix + "journal"
        # A journal made from a URL keeps its storage in fxpay's Rust core: a keyed call on it
        # never climbs into Python. One over a client given (or a TLS URL) runs here, on redis-py.
        self._store: _NativeStore | None = None
        if isinstance(url_or_client, str) and url_or_client.startswith(("redis://", "unix://")):
            from . import _later

            self._store = _redis_store(
                url_or_client,
                prefix,
                require_persistence,
                socket_timeout,
                _later.RESULT_DELAY,
                _result_waits,
                functools.partial(_redis_not_recorded, prefix),
                _redis_warning,
            )
            _live.add(self)
            return
        if isinstance(url_or_client, str):
            from ._redis import client_from_url

            url_or_client = client_from_url("RedisJournal", url_or_client, socket_timeout)
        elif not (hasattr(url_or_client, "register_script") and hasattr(url_or_client, "get")):
            raise TypeError(f"url_or_client must be a redis URL or a redis.Redis, not {type(url_or_client).__name__}")
        self._require_persistence = require_persistence
        # The identity of the journal this process opened (read on first use, or made by
        # `create()`); every claim and swap runs only where it is still the one stored.
        self._id: str | None = None
        self._check_lock = threading.Lock()
        self._warned: set[str] = set()
        # Clients inherited through a fork: kept, never used or closed in the child.
        self._inherited: list[Any] = []
        self._r = url_or_client
        self._use_own_pool()
        self._later = _Later.of(self._where())
        # This process's claims waiting for their round trip (made anew in a forked child).
        self._group = _GroupCommit()
        _live.add(self)

    @property
    def _native_store(self) -> _NativeStore | None:
        """The store the client uses directly (a journal made from a URL), unless a subclass
        changed how it is used."""
        cls = type(self)
        if self._store is not None and all(getattr(cls, m) is getattr(RedisJournal, m) for m in ("get", "claim", "swap", "find")):
            return self._store
        return None

    def _before_fork(self) -> None:
        if self._store is not None:
            self._store.before_fork()

    def _where(self) -> str:
        """This journal's place (server and prefix): the results waiting for it in this
        process are shared by every ``RedisJournal`` of that place."""
        pool = getattr(self._r, "connection_pool", None)
        kw = getattr(pool, "connection_kwargs", None) or {}
        return f"redis:{kw.get('host')}:{kw.get('port')}:{kw.get('path')}:{kw.get('db')}:{id(pool) if not kw else ''}:{self.prefix}"

    # -- connections ---------------------------------------------------------------------

    def _use_own_pool(self) -> None:
        """A connection pool of the journal's own, made from the client's settings, whose
        every new connection is checked before its first command (:meth:`_vet`). A client
        without such settings (a cluster, a stand-in) is used as it is."""
        import redis

        pool = getattr(self._r, "connection_pool", None)
        if pool is not None and hasattr(pool, "connection_kwargs"):
            kwargs = dict(pool.connection_kwargs)
            ref = weakref.ref(self)

            def on_connect(conn: Any) -> None:
                conn.on_connect()
                journal = ref()
                if journal is None:
                    return
                try:
                    journal._vet(conn)
                except BaseException:
                    # Never left connected: the pool would hand it out again unchecked.
                    conn.disconnect()
                    raise

            kwargs["redis_connect_func"] = on_connect
            fresh = type(pool)(connection_class=_one_write(pool.connection_class), max_connections=pool.max_connections, **kwargs)
            self._r = redis.Redis(connection_pool=fresh)
        self._claim = self._r.register_script(_CLAIM)
        self._swap = self._r.register_script(_SWAP)
        self._scripts_loaded = False

    def _after_fork(self, *, child: bool) -> None:
        if self._store is not None:
            if not child:
                self._store.after_fork_in_parent()
            return
        if child:
            self._check_lock = threading.Lock()
            # redis-py's pool makes itself anew in a child on first use, but (8.x) first takes
            # the inherited pool's lock, which a thread of the parent may have held at the
            # fork: the child would wait for ever (a hung child of a fork during 8 writing
            # threads, test_journal_holes.py). A new pool has no inherited lock. The inherited
            # client is kept, never closed here: its `__del__` closes its pool, which (making
            # itself anew first) would take that same inherited lock.
            self._inherited.append((self._r, self._claim, self._swap))
            self._use_own_pool()
            self._later = _Later.of(self._where())
            # A leader of the parent's group commit (or its claims in flight) is not the child's.
            self._group = _GroupCommit()

    def _warn_once(self, what: str, message: str, *args: Any) -> None:
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(message, *args)

    def _vet(self, conn: Any) -> None:
        """Runs on every new connection, before its first command: refuses a replica, and
        (with ``require_persistence``) a Redis that would forget its keys when it restarts."""
        import redis

        try:
            conn.send_command("ROLE")
            role = conn.read_response()
        except redis.ResponseError as e:
            self._warn_once("role", "RedisJournal cannot read the Redis server's ROLE (%s); it is trusted to be a primary", e)
            role = None
        if role and _text(role[0]) != "master":
            raise _ServerRefused(
                f"RedisJournal refuses this Redis: it is a replica (ROLE {_text(role[0])}), whose writes are lost when it "
                "resyncs with its primary, and every key claimed there could be sent again. Give the journal the "
                "primary. Nothing was sent."
            )
        if not self._require_persistence:
            return
        try:
            conn.send_command("CONFIG", "GET", "append*")
            reply = conn.read_response()
        except redis.ResponseError as e:
            self._warn_once(
                "config",
                "RedisJournal cannot read the Redis server's persistence settings (CONFIG GET refused: %s); "
                "it is trusted to keep every write across a restart (appendonly yes, appendfsync always)",
                e,
            )
            return
        if isinstance(reply, dict):
            conf = {_text(k): _text(v) for k, v in reply.items()}
        else:
            items = list(reply or [])
            conf = {_text(items[i]): _text(items[i + 1]) for i in range(0, len(items) - 1, 2)}
        appendonly, appendfsync = conf.get("appendonly", ""), conf.get("appendfsync", "")
        if appendonly != "yes":
            raise _ServerRefused(
                f"RedisJournal refuses this Redis: its appendonly setting is {appendonly or 'not set'!r}, so it "
                "forgets every key when it restarts, and every payment claimed before would be sent again. "
                "Set 'appendonly yes' and 'appendfsync always' (redis.conf, or CONFIG SET and CONFIG REWRITE), "
                "or give RedisJournal(require_persistence=False) for a Redis whose keys may be lost (tests). "
                "Nothing was sent."
            )
        if appendfsync != "always":
            self._warn_once(
                "fsync",
                "RedisJournal: this Redis has appendfsync %s, so a power cut or a crash of its host can lose the "
                "claims of the last second, and their payments could be sent again; use appendfsync always",
                appendfsync or "unset",
            )

    def _identity(self) -> str:
        """The identity of the journal this process opened: read on first use. A Redis that
        holds none is a :class:`JournalError`."""
        if self._store is not None:
            return self._store.diagnostic("identity")
        if self._id is not None:
            return self._id
        with self._check_lock:
            if self._id is None:
                stored = self._r.get(self._id_key)
                if stored is None:
                    raise JournalError(
                        f"RedisJournal found no journal under prefix {self.prefix!r} in this Redis (no {self._id_key!r} "
                        "key): opening a journal never creates one. " + _lost_journal_advice("RedisJournal(url).create()")
                    )
                self._id = _text(stored)
            return self._id

    def _not_this_journal(self, e: Exception) -> JournalError | None:
        """The :class:`JournalError` for a script's identity refusal, else None."""
        text = str(e)
        if not text.startswith(_NOT_THIS_JOURNAL):
            return None
        found = text[len(_NOT_THIS_JOURNAL) :].strip()
        if not found:
            return JournalError(
                f"RedisJournal's identity key {self._id_key!r} is gone from this Redis (FLUSHALL or FLUSHDB, a key "
                "evicted or deleted, a restart without its data): the journal this process opened was lost, and "
                "it is not taken for a new one. " + _lost_journal_advice("RedisJournal(url).create()")
            )
        return JournalError(
            f"RedisJournal: this Redis now holds another journal under prefix {self.prefix!r} ({found}) than the "
            f"one this process opened ({self._id}): the journal was lost and made again while this process ran, "
            "and its keys are not this journal's. Restart the processes that use it once a person has checked "
            "what was lost. Nothing was sent."
        )

    def create(self) -> bool:
        """Makes this journal in its Redis: stores an identity under ``prefix + "journal"``
        if none is there. Run it once (by hand, or in a deployment's migration step), never at
        every start-up: on a Redis that lost its journal it would make a new, empty one, and
        every key the old one held could be sent again. It does nothing where this journal
        exists already, and is safe to run from many processes at once (``SET NX``). True
        when it made the journal, False when the journal was there."""
        if self._store is not None:
            return self._store.create()
        try:
            made = bool(self._r.set(self._id_key, _new_identity(), nx=True))
            stored = self._r.get(self._id_key)
        except _ServerRefused as e:
            raise JournalError(str(e)) from None
        except Exception as e:
            raise JournalError(f"RedisJournal.create() failed: {type(e).__name__}: {e}") from e
        if stored is None:
            raise JournalError(f"RedisJournal.create(): the identity key {self._id_key!r} vanished as it was made")
        with self._check_lock:
            if self._id is not None and self._id != _text(stored):
                raise JournalError(self._not_this_journal(Exception(f"{_NOT_THIS_JOURNAL} {_text(stored)}")).args[0])  # type: ignore[union-attr]
            self._id = _text(stored)
        return made

    def _k(self, key: str) -> str:
        return self.prefix + "k:" + key

    def _entry(self, raw: Any) -> JournalEntry | None:
        if raw is None:
            return None
        return JournalEntry.from_json(raw.decode() if isinstance(raw, bytes) else raw)

    def _scripted(self, script: Any, keys: list[str], args: list[str]) -> Any:
        import redis

        try:
            return script(keys=keys, args=args)
        except redis.ResponseError as e:
            refused = self._not_this_journal(e)
            if refused is not None:
                raise refused from None
            raise

    @_fails_closed("get")
    def get(self, key: str) -> JournalEntry | None:
        if self._store is not None:
            return self._store.get(_check_key(key))
        k = self._k(_check_key(key))
        self._identity()
        mine = self._later.get(key)  # before the read (see _Later.news)
        return self._later.news(self._entry(self._r.get(k)), mine)

    @_fails_closed("entries")
    def entries(self, keys: Iterable[str]) -> dict[str, JournalEntry]:
        wanted = [_check_key(k) for k in keys]
        if self._store is not None:
            return {e.key: e for e in self._store.entries(wanted)}
        self._check_still_here()
        out = {}
        for start in range(0, len(wanted), 1000):  # one MGET per 1,000 keys
            part = wanted[start : start + 1000]
            mine = self._later.waiting_now()  # before the read (see _Later.news)
            for key, raw in zip(part, self._r.mget([self._k(k) for k in part]), strict=True):
                e = self._later.news(self._entry(raw), mine.get(key))
                if e is not None:
                    out[key] = e
        return out

    def _swap_args(self, key: str, old: str, new: JournalEntry, text: str, old_result: str | None) -> tuple[list[str], list[str]]:
        index = self.prefix + "r:" + new.result if new.result and new.result != old_result else ""
        return [self._k(key), self._open, index, self._id_key], [old, text, key, new.state, self._identity()]

    def _queue_results(self, pipe: Any, results: list[tuple[str, str, JournalEntry, str]]) -> None:
        """Queues ``results`` on ``pipe``, each its own swap script, by its SHA (redis-py's
        own pipelined scripts cost a ``SCRIPT EXISTS`` round trip first)."""
        for key, old, new, text in results:
            keys, args = self._swap_args(key, old, new, text, JournalEntry.from_json(old).result)
            pipe.evalsha(self._swap.sha, len(keys), *keys, *args)

    def _piped(self, queue: Callable[[Any], None]) -> list[Any]:
        """The replies (an error as its exception) of one round trip of the commands
        ``queue`` puts on a pipeline, the scripts loaded first (once; again after a Redis
        that lost them answered ``NOSCRIPT``: a command that met it is the caller's to make
        again)."""
        import redis

        if not self._scripts_loaded:
            self._r.script_load(_CLAIM)
            self._r.script_load(_SWAP)
            self._scripts_loaded = True
        pipe = self._r.pipeline(transaction=False)
        queue(pipe)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
            self._scripts_loaded = False  # a Redis restarted meanwhile: loaded again next time
        return replies

    def _results_answered(self, results: list[tuple[str, str, JournalEntry, str]], replies: list[Any]) -> None:
        """The replies of the results' swaps: those written leave :class:`_Later`; one whose
        entry changed meanwhile is written over it if it is still this call's claim, else
        logged; an error keeps them all waiting."""
        if any(isinstance(r, Exception) for r in replies):
            self._later.missed(results)
            return
        self._later.landed(results)
        for (key, _old, new, text), reply in zip(results, replies, strict=True):
            if reply == 1:
                continue
            raw = self._r.get(self._k(key))
            stored = self._entry(raw)
            if (stored is not None and _text(raw) == text) or _Later.written_otherwise(stored, new):
                continue
            if _Later.still_its_claim(stored, new):
                keys, args = self._swap_args(key, _text(raw), new, text, stored.result)
                if self._scripted(self._swap, keys, args) == 1:
                    continue
            self._not_recorded(self.prefix, key, new.result)

    def _waiting(self) -> _Later:
        return self._later

    def _write_waiting(self) -> None:
        self._flush_results()

    def _flush_results(self) -> None:
        """Writes the results waiting now in one round trip (the flusher's, and exit's)."""
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.flush()
            return
        if not self._later.results:
            return
        results = self._later.taken()
        try:
            self._results_answered(results, self._piped(lambda pipe: self._queue_results(pipe, results)))
        except Exception:
            self._later.missed(results)
            logger.debug("RedisJournal: writing the results waiting failed; they are tried again", exc_info=True)
        if self._later.results and not _Later.exiting:
            time.sleep(RETRY_DELAY)
            _Later.wake(self)

    def close(self) -> None:
        """Writes the results of this process's keyed calls that wait for their commit (a
        process about to end with ``os._exit``, which skips the exit's own writing). The
        connections stay: the client's or the pool's own."""
        if self._store is not None:
            self._store.flush()
            return
        self._flush_results()

    def _check_still_here(self) -> None:
        """For the readings people act on (``unknown()``, a payout's progress): the journal
        this process opened is still the one stored, so an emptied Redis never reads as a
        journal with nothing open."""
        mine = self._identity()
        stored = self._r.get(self._id_key)
        if stored is None or _text(stored) != mine:
            refused = self._not_this_journal(Exception(f"{_NOT_THIS_JOURNAL} {'' if stored is None else _text(stored)}"))
            assert refused is not None
            raise refused

    @_fails_closed("claim")
    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        e = _check_entry(entry)
        if self._store is not None:
            return self._store.claim(e)
        # The claim reaches Redis even when this process holds the key's result: the
        # identity is checked with every claim (a FLUSHALL under a live process is caught).
        ident = self._identity()
        keys, args = [self._k(e.key), self._open, self._id_key], [e.to_json(), e.key, ident]
        # With the claims of this process's other threads waiting at once, and the results
        # waiting: one round trip, so one AOF write and fsync (see fxpay._group_commit).
        claimed = self._group.run(_Claim(e.key, (keys, args)), self._commit_claims).reply
        if claimed is UNANSWERED:  # no reply is never a claim made (SET NX's own is None)
            raise JournalError(f"RedisJournal.claim(): the commit gave no answer for key {e.key!r}; nothing was sent")
        if isinstance(claimed, _redis_errors().NoScriptError):
            return self._later.news(self._entry(self._scripted(self._claim, keys, args)))  # loads it, and claims
        if isinstance(claimed, Exception):
            import redis

            refused = self._not_this_journal(claimed) if isinstance(claimed, redis.ResponseError) else None
            if refused is not None:
                raise refused
            raise claimed
        return self._later.news(self._entry(claimed))

    def _commit_claims(self, batch: list[_Claim]) -> None:
        """The group commit of ``batch``'s claims, with the results waiting riding it: one
        pipeline (Redis reads it in one round and writes its AOF once). Each claim's reply is
        its own (an error reply as its exception); a pipeline that fails fails them all."""
        results = self._later.taken()
        if not results and len(batch) == 1:
            keys, args = batch[0].args
            try:
                batch[0].reply = self._claim(keys=keys, args=args)  # loads the script if need be
            except Exception as e:
                batch[0].reply = e
        else:

            def queue(pipe: Any) -> None:
                self._queue_results(pipe, results)
                for c in batch:
                    keys, args = c.args
                    pipe.evalsha(self._claim.sha, len(keys), *keys, *args)

            try:
                replies = self._piped(queue)
            except BaseException:
                self._later.missed(results)
                raise
            for c, reply in zip(batch, replies[len(results) :], strict=True):
                c.reply = reply
            self._results_answered(results, replies[: len(results)])
        for c in batch:
            c.claimed = c.reply is None  # SET NX made it: nothing stored before

    @_fails_closed("swap")
    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        if self._store is not None:
            o, n = _check_entry(old, "old"), _check_entry(new, "new")
            if o.key != n.key:
                raise InvalidRequestError("RedisJournal.swap(): old and new must have the same key")
            return self._store.swap(o, n)
        if isinstance(old, JournalEntry):
            self._group.answered(old.key)  # the call's claim is settled: no longer in flight
        ready = self._swap_ready(old, new)  # a call's result rides the next claim's round trip
        if ready is None:
            return True
        o, n, old_text, text = ready
        keys, args = self._swap_args(o.key, old_text, n, text, o.result)
        return bool(self._scripted(self._swap, keys, args) == 1)

    @_fails_closed("find")
    def find(self, result: str) -> JournalEntry | None:
        if self._store is not None:
            if not isinstance(result, str):
                raise TypeError(f"result must be a str, not {type(result).__name__}")
            return self._store.find(result)
        for n in self._later.entries():
            if n.result == result:  # on its way: what the key reads (the store may be ahead)
                got = self.get(n.key)
                if got is not None and got.result == result:
                    return got
        self._identity()
        key = self._r.get(self.prefix + "r:" + result)
        if key is None:
            return None
        return self.get(key.decode() if isinstance(key, bytes) else key)

    @_fails_closed("candidates")
    def candidates(self) -> list[JournalEntry]:
        if self._store is not None:
            return self._store.candidates()
        self._check_still_here()
        keys = sorted(k.decode() if isinstance(k, bytes) else k for k in self._r.smembers(self._open))
        out = []
        for key in keys:
            e = self.get(key)  # a result waiting here reads done
            if e is not None and e.state in ("pending", "unknown"):
                out.append(e)
        return out

    def __repr__(self) -> str:
        return f"RedisJournal(prefix={self.prefix!r})"


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

"""One durable write per keyed call: the results of this process's keyed calls that wait
for their journal's next commit, and the thread and the exit hooks that write them.

Only a claim must be on disk before a byte is sent. A call's result (its ``pending`` claim
made ``done``) rides the journal's next commit: the next claim's (one fsync for both), or
the flusher's :data:`RESULT_DELAY` later, and at the latest the process's exit. The journals
of :mod:`fxpay.journals` (``redis``, ``postgres``) keep them here, read them from
here until they land, and write them their own way (``journal._flush_results()``).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

from . import _forks

if TYPE_CHECKING:
    from ._fxpay import JournalEntry

__all__ = ["RESULT_DELAY", "RETRY_DELAY", "flush_all"]


class _After:
    """:meth:`_Later.news` given no result looked up before the store was read."""


_AFTER = _After()


class _Later:
    """The results of this process's keyed calls that wait for the next group commit of one
    SqliteJournal file (one durable write per keyed call: only the claim must be on disk
    before a byte is sent). A result rides the next commit, a claim's or the flusher's
    :data:`RESULT_DELAY` later, and at the latest the process's exit. Until then this process
    reads it from here (every ``SqliteJournal`` of the file in this process shares it);
    another process reads the key ``pending``, its holder alive, and if this process dies
    first, its holder is gone and the key is ``unknown``: a result is never lost as
    ``released``, and never sent twice."""

    #: Per file (absolute path), in this process; made anew in a forked child (the parent
    #: writes its own results).
    by_path: ClassVar[dict[str, _Later]] = {}
    made: ClassVar[threading.Lock] = threading.Lock()
    #: The turns of the journals with results waiting (when each is due, and the journal),
    #: for the flusher thread.
    due: ClassVar[threading.Condition] = threading.Condition()
    waiting: ClassVar[list[tuple[float, Any]]] = []
    #: A journal whose last commit of results failed: not tried again before this time
    #: (:meth:`retry`), while the other journals' results go on being written.
    not_before: ClassVar[weakref.WeakKeyDictionary[Any, float]] = weakref.WeakKeyDictionary()
    #: Every journal that kept a result waiting in this process (for the exit's flush).
    users: ClassVar[weakref.WeakSet[Any]] = weakref.WeakSet()
    flusher: ClassVar[threading.Thread | None] = None
    #: Set at exit (after the last flush): results are written at once from then on.
    exiting: ClassVar[bool] = False
    #: The process that registered the exit flush with multiprocessing's finalizers.
    finalizer_pid: ClassVar[int] = 0

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: Notified when a commit that carried results landed or failed (:meth:`wait_flying`).
        self.settled = threading.Condition(self.lock)
        # key: (the entry it replaces, as text; the result entry; its text). Those being
        # written wait in `flying` (still read from here) until they land.
        self.results: dict[str, tuple[str, JournalEntry, str]] = {}
        self.flying: dict[str, tuple[str, JournalEntry, str]] = {}
        # A forked child's: the results its parent held when it forked. The parent writes
        # them; the child only reads them (its replay of such a key returns the result
        # instead of finding its parent's claim in flight).
        self.inherited: dict[str, JournalEntry] = {}

    @classmethod
    def of(cls, path: str) -> _Later:
        with cls.made:
            later = cls.by_path.get(path)
            if later is None:
                later = cls.by_path[path] = _Later()
            return later

    @classmethod
    def after_fork_in_child(cls) -> None:
        # Only this thread runs in the child: the parent's dicts are read without their locks.
        by_path = {}
        for path, parent in cls.by_path.items():
            child = by_path[path] = _Later()
            child.inherited = {
                **parent.inherited,
                **{k: v[1] for k, v in parent.flying.items()},
                **{k: v[1] for k, v in parent.results.items()},
            }
        cls.by_path = by_path
        cls.made = threading.Lock()
        cls.due = threading.Condition()
        cls.waiting = []
        cls.not_before = weakref.WeakKeyDictionary()
        cls.users = weakref.WeakSet()
        cls.flusher = None

    def get(self, key: str) -> JournalEntry | None:
        if not self.results and not self.flying:
            return None
        with self.lock:
            got = self.results.get(key) or self.flying.get(key)
        return None if got is None else got[1]

    def waiting_now(self) -> dict[str, JournalEntry]:
        """Every result of this process on its way, by key (for :meth:`news`, taken before
        the store is read)."""
        if not self.results and not self.flying:
            return {}
        with self.lock:
            return {k: v[1] for k, v in (*self.flying.items(), *self.results.items())}

    def news(self, stored: JournalEntry | None, mine: JournalEntry | _After | None = _AFTER) -> JournalEntry | None:
        """What the key reads, given what the store holds now: while the store still holds the
        claim (``pending``, or ``unknown`` once its lease lapsed) that a result of this process
        replaces, that result on its way; in a forked child, its parent's result for the
        parent's claim the store holds ``pending``; else what the store holds (a notification
        that settled the key first is newer than the call's own result).

        ``mine``: this process's result of the key as :meth:`get` (or :meth:`waiting_now`)
        gave it *before* the store was read. A result that lands in between is then in what
        was read; looked up only after the read it would be in neither, and the key would
        read its claim, ``pending``, though its result is on disk (found by the fork stress:
        a child's own key read ``pending`` right after its call returned)."""
        if stored is None or stored.state not in ("pending", "unknown"):
            return stored
        if isinstance(mine, _After):
            mine = self.get(stored.key)
        if mine is not None and _same_claim(stored, mine):
            return mine
        parents = self.inherited.get(stored.key) if self.inherited else None
        if parents is not None and stored.state == "pending" and _same_claim(stored, parents):
            return parents
        return stored

    @staticmethod
    def written_otherwise(stored: JournalEntry | None, new: JournalEntry) -> bool:
        """Whether a result that found its claim changed needs nothing more: the key is done
        with the same result for the same claim (its spot deal's notification settled it
        first, with the deal id)."""
        return stored is not None and stored.state == "done" and stored.result == new.result and _same_claim(stored, new)

    @staticmethod
    def still_its_claim(stored: JournalEntry | None, new: JournalEntry) -> TypeGuard[JournalEntry]:
        """Whether ``stored`` is still the claim that the result ``new`` settles (``pending``,
        or ``unknown`` once its lease lapsed while the result waited): written over."""
        return stored is not None and stored.state in ("pending", "unknown") and _same_claim(stored, new)

    def entries(self) -> list[JournalEntry]:
        with self.lock:
            return [v[1] for v in (*self.results.values(), *self.flying.values())]

    @classmethod
    def may_wait(cls, old: JournalEntry, new: JournalEntry) -> bool:
        """Whether the swap of ``old`` for ``new`` may wait for the next commit: a call's own
        result only (its ``pending`` claim made ``done``). A notification's settle (its
        ``deal_id`` set) is written at once: its sender is answered only once it is on disk.
        At exit, nothing waits."""
        return new.state == "done" and old.state == "pending" and new.deal_id is None and not cls.exiting

    def defer(self, key: str, old: str, new: JournalEntry, text: str) -> bool:
        """Keeps ``new`` (replacing ``old``) for the next commit; False when a result of
        ``key`` already waits (the caller writes it first)."""
        with self.lock:
            if key in self.results or key in self.flying:
                return False
            self.results[key] = (old, new, text)
            return True

    def taken(self) -> list[tuple[str, str, JournalEntry, str]]:
        """The results waiting now, for one commit to carry (no other commit takes them;
        they stay readable here until :meth:`landed` or :meth:`missed`)."""
        if not self.results:
            return []
        with self.lock:
            taken, self.results = self.results, {}
            self.flying.update(taken)
            return [(k, *v) for k, v in taken.items()]

    def landed(self, written: list[tuple[str, str, JournalEntry, str]]) -> None:
        with self.lock:
            for key, *_ in written:
                self.flying.pop(key, None)
            self.settled.notify_all()

    def missed(self, written: list[tuple[str, str, JournalEntry, str]]) -> None:
        """The commit that carried them failed: they wait for the next one."""
        with self.lock:
            for key, *_ in written:
                got = self.flying.pop(key, None)
                if got is not None:
                    self.results[key] = got
            self.settled.notify_all()

    def wait_flying(self, timeout: float) -> bool:
        """Waits until the commits of other threads (the flusher's) that carry results now
        have ended: True once each landed or failed (its results then wait again), False
        after ``timeout``. Results taken later are not waited for."""
        with self.settled:
            keys = set(self.flying)
            return self.settled.wait_for(lambda: keys.isdisjoint(self.flying), timeout)

    @classmethod
    def hook_exit(cls, journal: Any) -> None:
        """Has this process's exit write ``journal``'s results (its first result waits)."""
        pid = os.getpid()
        if cls.finalizer_pid != pid:
            cls.finalizer_pid = pid
            _flush_at_exit_of_workers()
        if journal is not None:
            cls.users.add(journal)

    @classmethod
    def wake(cls, journal: Any) -> None:
        """Has the flusher write ``journal``'s results :data:`RESULT_DELAY` from now (its own
        delay, read now: never another journal's turn). A turn of ``journal`` already due by
        then carries them (a turn writes every result its journal holds): no second one."""
        cls.hook_exit(journal)
        with cls.due:
            at = time.monotonic() + RESULT_DELAY
            alive = cls.flusher is not None and cls.flusher.is_alive()
            if alive and any(j is journal and when <= at for when, j in cls.waiting):
                return
            cls.waiting.append((at, journal))
            if not alive:
                cls.flusher = threading.Thread(target=cls._flush_loop, name="fxpay-journal-results", daemon=True)
                cls.flusher.start()
            cls.due.notify()

    @classmethod
    def retry(cls, journal: Any) -> None:
        """A commit of ``journal``'s results failed (its server refused or was gone): the
        flusher tries them again no sooner than :data:`RETRY_DELAY` from now. The flusher
        does not wait for it meanwhile: every other journal's results are written at their
        own pace. At exit nothing is tried again (the exit's flush was the last)."""
        if cls.exiting:
            return
        with cls.due:
            cls.not_before[journal] = time.monotonic() + RETRY_DELAY
        cls.wake(journal)

    @classmethod
    def _turn(cls, at: float, journal: Any) -> float:
        """When a turn is due: its time, or the journal's retry if that is later."""
        return max(at, cls.not_before.get(journal, at))

    @classmethod
    def _flush_loop(cls) -> None:
        while True:
            with cls.due:
                while True:
                    if not cls.waiting:
                        cls.due.wait()
                        continue
                    now = time.monotonic()
                    first = min(cls._turn(at, j) for at, j in cls.waiting)
                    if first <= now:
                        break
                    cls.due.wait(first - now)  # a wake with a sooner turn ends it early
                # The journals due now, each once: its flush writes every result it holds, so
                # its later turns go too (a result kept after this adds a turn of its own).
                # The others keep theirs: each journal is written at its own delay.
                ready: list[Any] = []
                for at, j in cls.waiting:
                    if all(r is not j for r in ready) and cls._turn(at, j) <= now:
                        ready.append(j)
                cls.waiting = [(at, j) for at, j in cls.waiting if all(r is not j for r in ready)]
            for j in ready:
                j._flush_results()


def _same_claim(a: JournalEntry, b: JournalEntry) -> bool:
    """Whether two entries of a key are one claim (its holder, its start, its request)."""
    return (a.holder, a.created_at, a.fingerprint) == (b.holder, b.created_at, b.fingerprint)


#: How long a keyed call's result may wait for a claim's group commit before the flusher
#: writes it on its own (another process reads the key ``pending`` meanwhile).
RESULT_DELAY = 0.05

#: How long the flusher waits before it tries again a commit of results that failed.
RETRY_DELAY = 0.5

#: How long :func:`flush_all` waits at most for a commit the flusher has in flight (a normal
#: exit ends its rows within 10 s).
FLYING_WAIT = 10.0


def flush_all() -> None:
    """Writes every result waiting in this process now (a payout's end: the processes that
    read the journal next, a Celery or Dask driver, read them done)."""
    from ._fxpay import _native_flush_all

    for j in list(_Later.users):
        j._flush_results()
        # The flusher's commit may carry some of them now: they are written once it landed.
        # One that failed leaves them waiting again: written here.
        later = getattr(j, "_later", None)
        if later is not None and later.wait_flying(FLYING_WAIT):
            j._flush_results()
    _native_flush_all(_Later.exiting)  # fxpay's journals whose results wait in Rust (SQLite, Redis from a URL)


def _flush_results_now() -> None:
    """At exit: every result still waiting is written, and later ones are written at once."""
    _Later.exiting = True
    flush_all()


def _flush_at_exit_of_workers() -> None:
    """A process made by ``multiprocessing`` (or Celery's billiard) ends with ``os._exit``
    after its own finalizers, without ``atexit``: the results are written by one of them."""
    for name in ("multiprocessing.util", "billiard.util"):
        util = sys.modules.get(name)
        if util is not None:
            util.Finalize(None, _flush_results_now, exitpriority=100)


atexit.register(_flush_results_now)
_forks.reset_in_child(_Later.after_fork_in_child)  # before any journal's own hook: they look here again

"""The group commit of a networked journal's claims (:class:`fxpay.RedisJournal`,
:class:`fxpay.PostgresJournal`), with a commit delay as PostgreSQL's own ``commit_delay``
and ``commit_siblings``.

A claim must be durable before its request is sent, and each flush of the server's log
(Redis's AOF fsync, PostgreSQL's WAL flush) is one disk flush. The claims of this process's
threads that wait at once go to the server together, in one commit made by one of them (the
leader): one round trip, one flush. A leader that knows other keyed calls of this process
are in flight (claimed, their answer not yet in: each is about to claim again in a loop, a
pool or a payout) waits up to :data:`COMMIT_DELAY` for them to join before it commits, so
that more claims share the flush; with none in flight (a lone call, concurrency 1) it
commits at once and waits for nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .errors import JournalError

__all__ = ["COMMIT_DELAY", "IN_FLIGHT_HORIZON", "UNANSWERED"]

#: How long a leader waits at most for more claims to join its commit, when other keyed calls
#: of this process are in flight (seconds). 0: no waiting.
COMMIT_DELAY = 0.003

#: A keyed call claimed longer ago than this is no longer counted as in flight: it is not
#: about to claim again soon (and a call that ended without its result, an interrupt, is
#: forgotten).
IN_FLIGHT_HORIZON = 1.0


#: A claim's ``reply`` until its commit gave one: never taken for a claim made.
UNANSWERED: Any = object()


class _Claim:
    """One claim waiting for a group commit, and what came of it: ``reply`` (the journal's
    own; :data:`UNANSWERED` until set), ``claimed`` (the journal set it: the claim was
    stored), or ``error``."""

    __slots__ = ("args", "claimed", "done", "error", "key", "reply")

    def __init__(self, key: str, args: Any) -> None:
        self.key, self.args = key, args
        self.done = False
        self.claimed = False
        self.reply: Any = UNANSWERED
        self.error: BaseException | None = None


class _GroupCommit:
    """The claims of one journal in this process waiting for their commit, the leader's
    flag, and the keyed calls in flight. Made anew in a forked child (a leader of the parent
    does not exist there)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._committed = threading.Condition(self._lock)  # the followers wait here
        self._joined = threading.Condition(self._lock)  # a gathering leader waits here
        self._queue: list[_Claim] = []
        self._leading = False
        self._gathering = False
        # Keyed calls of this process claimed here and not yet answered: key -> when claimed.
        self._in_flight: dict[str, float] = {}

    def answered(self, key: str) -> None:
        """A keyed call's claim is being settled (its swap): no longer in flight."""
        if self._in_flight:
            with self._lock:
                self._in_flight.pop(key, None)

    def _others(self, now: float) -> int:
        """Keyed calls in flight (the caller holds the lock); those past the horizon are
        forgotten."""
        if not self._in_flight:
            return 0
        old = [k for k, t in self._in_flight.items() if now - t > IN_FLIGHT_HORIZON]
        for k in old:
            del self._in_flight[k]
        return len(self._in_flight)

    def run(self, mine: _Claim, commit: Callable[[list[_Claim]], None]) -> _Claim:
        """Waits until ``mine`` is committed: by another thread's commit, or by this
        thread's, which carries every claim waiting (``commit(batch)`` sets each one's
        ``reply`` and ``claimed``; an exception fails every claim in it). A batch holds one
        claim per key, the leader's own among them: another claim of that key waits for the
        next commit."""
        with self._lock:
            self._queue.append(mine)
            if self._gathering:
                self._joined.notify()
            try:
                while True:
                    if mine.done:
                        return self._answer(mine)
                    if not self._leading:
                        break
                    self._committed.wait()
            except BaseException:
                # Interrupted while it waits (Ctrl-C on the main thread): a claim no leader
                # took yet leaves with its caller, so that no commit stores a claim nobody
                # sends under (its key would read pending, then unknown).
                self._queue = [c for c in self._queue if c is not mine]
                raise
            self._leading = True
            now = time.monotonic()
            others = self._others(now)
            delay = COMMIT_DELAY
            if others and delay > 0:
                # Up to the delay for the calls in flight to claim again (as PostgreSQL's
                # commit_delay, when commit_siblings others are in a transaction).
                want = len(self._queue) + others
                deadline = now + delay
                self._gathering = True
                try:
                    while len(self._queue) < want:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._joined.wait(left)
                finally:
                    self._gathering = False
            # The leader's own claim first: a claim of its key waiting ahead of it (its
            # thread woken by the last commit's end, not yet running) waits for the next.
            batch: list[_Claim] = [mine]
            keys: set[str] = {mine.key}
            rest: list[_Claim] = []
            for c in self._queue:
                if c is mine:
                    continue
                if c.key in keys:
                    rest.append(c)
                else:
                    keys.add(c.key)
                    batch.append(c)
            self._queue = rest
        try:
            commit(batch)
        except Exception as e:
            for c in batch:
                c.error = e
        except BaseException as e:
            # An interrupt of the leader's thread is its own: the others fail closed.
            for c in batch:
                c.error = e if c is mine else JournalError("the journal's commit was interrupted; nothing was sent")
        finally:
            with self._lock:
                now = time.monotonic()
                for c in batch:
                    c.done = True
                    if c.claimed and c.error is None:
                        self._in_flight[c.key] = now
                self._leading = False
                self._committed.notify_all()
        return self._answer(mine)

    @staticmethod
    def _answer(mine: _Claim) -> _Claim:
        if mine.error is not None:
            raise mine.error
        return mine

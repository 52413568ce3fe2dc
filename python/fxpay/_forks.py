"""The one fork registry of fxpay's Python objects that keep per-process state: the journals
(locks, the group commit, connections, a store of the core's per-process side), the Redis
bucket of ``RateLimit(redis=...)`` and ``RedisTokenStore`` (a redis-py connection pool).

A forked child must never use its parent's connections, nor wait for a lock that a thread
of the parent held at the fork (that thread does not exist in the child: the child would
wait for ever). An object registered here has two hooks: ``_before_fork()``, run by the
thread that forks, before the fork; and ``_after_fork(child=...)``, run after it, in the
parent (``child=False``) and in the child (``child=True``). ``os.register_at_fork`` is
called once, here, for all of them; ``os.fork()`` and multiprocessing's ``fork`` start method
run it (a process forked by C code without Python's hooks does not).

Process-wide state that the objects' hooks read in a child (``fxpay._later``'s) is made anew
first: :func:`reset_in_child`.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Protocol

__all__ = ["register", "reset_in_child"]


class _Forked(Protocol):
    def _before_fork(self) -> None: ...

    def _after_fork(self, *, child: bool) -> None: ...


# Every object registered, held weakly: one the program dropped is forgotten.
_live: weakref.WeakSet[_Forked] = weakref.WeakSet()

# Functions that make process-wide state anew in a child, run before any object's hook.
_resets: list[Callable[[], None]] = []

# Guards `_live`, and is held by the thread that forks from before the fork until after it
# (made anew in the child): no object is registered half way through a fork, and whatever
# takes it (a journal closed by the garbage collector on another thread, in earlier fxpays)
# is never caught by the fork in the middle.
_lock = threading.RLock()

# The objects whose `_before_fork` ran for the fork being made, held (strongly) until their
# `_after_fork` has run: each before is paired with its after even if the object is freed
# meanwhile. Taken again from `_live` after the fork, an object the garbage collector freed in
# between (an earlier journal in a reference cycle, collected by another thread while the
# forking one waited with the GIL released) missed its after; SQLite's fork gate, counted by
# its before, then stayed held, and every SQLite call of the parent hung (seen once in CI).
_forking: list[_Forked] = []


def register(obj: _Forked) -> None:
    """Runs ``obj``'s fork hooks at every fork of this process while ``obj`` lives."""
    with _lock:
        _live.add(obj)


def reset_in_child(reset: Callable[[], None]) -> None:
    """Runs ``reset`` first in every forked child, before any registered object's hook."""
    with _lock:
        _resets.append(reset)


def _before_fork() -> None:
    _lock.acquire()
    _forking[:] = list(_live)
    for obj in _forking:
        obj._before_fork()


def _after_fork_in_parent() -> None:
    try:
        for obj in _forking:
            obj._after_fork(child=False)
    finally:
        _forking.clear()
        _lock.release()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()
    forked = list(_forking)
    _forking.clear()
    for reset in _resets:
        reset()
    for obj in forked:
        obj._after_fork(child=True)


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)

"""Token stores: where a client-credentials token (or a user's token) lives beyond one Client."""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from .models import Token

__all__ = ["MemoryTokenStore", "TokenStore"]


@runtime_checkable
class TokenStore(Protocol):
    """Anything with ``load`` and ``save``.

    A store may also have ``lock(key)`` returning an object with ``release()``: fxpay then
    holds that lock while it renews a token, so that processes sharing the store renew once
    and never use a rotated refresh token twice.

    A store method that raises is taken as an outage, never as a failed call: fxpay renews
    on its own and keeps serving, logs one WARNING on the ``fxpay`` logger per outage, and
    uses the store again at the next renewal once it answers.
    """

    def load(self, key: str) -> Token | None: ...

    def save(self, key: str, token: Token) -> None: ...


class _HeldLock:
    __slots__ = ("_lock",)

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock

    def release(self) -> None:
        self._lock.release()


class MemoryTokenStore:
    """A thread-safe store in this process's memory; share one between several clients."""

    def __init__(self) -> None:
        self._tokens: dict[str, Token] = {}
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def load(self, key: str) -> Token | None:
        with self._guard:
            return self._tokens.get(key)

    def save(self, key: str, token: Token) -> None:
        with self._guard:
            self._tokens[key] = token

    def lock(self, key: str) -> _HeldLock:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        lock.acquire()
        return _HeldLock(lock)

    def __repr__(self) -> str:
        return f"MemoryTokenStore(keys={len(self._tokens)})"

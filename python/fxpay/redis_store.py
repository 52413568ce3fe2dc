"""``fxpay.RedisTokenStore``: one token shared by every process that uses the same Redis.

Install with ``pip install fxpay[redis]``. Renewals take a Redis lock, so that with many
worker processes the token endpoint is asked once per token lifetime, and a user's rotated
refresh token is never used twice nor lost. A forked child (gunicorn ``--preload``, Celery
prefork) uses a connection pool of its own from the fork on (:mod:`fxpay._forks`).
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from . import _forks
from ._redis import client_from_url, fresh_client
from .errors import FxPayError
from .models import Token

if TYPE_CHECKING:
    import redis

__all__ = ["RedisTokenStore"]


class _RedisLock:
    __slots__ = ("_lock",)

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    def release(self) -> None:
        from redis.exceptions import LockNotOwnedError

        # It may have expired (lock_timeout) and Redis let it go; someone else may hold it now.
        with contextlib.suppress(LockNotOwnedError):
            self._lock.release()


class RedisTokenStore:
    """A :class:`fxpay.TokenStore` in Redis.

    ``client`` is a ``redis.Redis``; or give ``url`` (``redis://127.0.0.1:6379/0``), and
    ``socket_timeout`` bounds each connect and command of that client, so an unreachable
    Redis fails fast (fxpay then renews on its own until Redis answers again).
    Keys are ``prefix + key``; entries expire with their token (refresh tokens keep theirs).
    ``lock_timeout`` bounds how long a crashed holder can block others.
    """

    def __init__(
        self,
        client: redis.Redis | None = None,
        *,
        url: str | None = None,
        prefix: str = "",
        lock_timeout: float = 30.0,
        lock_wait: float = 60.0,
        socket_timeout: float = 5.0,
    ) -> None:
        if client is None:
            client = client_from_url("RedisTokenStore", url, socket_timeout)
        self._r = client
        self._prefix = prefix
        self._lock_timeout = lock_timeout
        self._lock_wait = lock_wait
        # Clients inherited through a fork: kept, never used or closed in the child.
        self._inherited: list[Any] = []
        _forks.register(self)

    def _before_fork(self) -> None:
        pass

    def _after_fork(self, *, child: bool) -> None:
        """In a forked child: a connection pool of its own, made from the client's settings
        (:func:`fxpay._redis.fresh_client`: the child never uses the parent's connections,
        nor waits for a lock of the parent's pool); a client whose pool cannot be made anew
        (not redis-py's own) is kept, with its own library's fork handling."""
        fresh = fresh_client(self._r) if child else None
        if fresh is not None:
            self._inherited.append(self._r)
            self._r = fresh

    def load(self, key: str) -> Token | None:
        raw = self._r.get(self._prefix + key)
        if raw is None:
            return None
        import json  # imported on use: `import fxpay` stays cheap

        return Token.from_dict(json.loads(raw))

    def save(self, key: str, token: Token) -> None:
        import json

        body = json.dumps(token.to_dict())
        if token.refresh_token:
            # The refresh token outlives the access token: keep the entry.
            self._r.set(self._prefix + key, body)
        else:
            ttl_ms = max(1, int((token.expires_at.timestamp() - time.time()) * 1000))
            self._r.set(self._prefix + key, body, px=ttl_ms)

    def lock(self, key: str) -> _RedisLock:
        lock = self._r.lock(
            self._prefix + key + ":lock",
            timeout=self._lock_timeout,
            blocking_timeout=self._lock_wait,
            # fxpay acquires and releases on different threads of its blocking pool.
            thread_local=False,
        )
        if not lock.acquire():
            raise FxPayError(f"timed out after {self._lock_wait} s waiting for the token lock")
        return _RedisLock(lock)

    def __repr__(self) -> str:
        return f"RedisTokenStore(prefix={self._prefix!r})"

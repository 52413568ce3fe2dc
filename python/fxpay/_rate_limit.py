"""The Redis side of ``fxpay.RateLimit(per_second, redis=...)``: one bucket shared by every
process that names the same Redis and key.

The bucket is the time its next slot is free (microseconds, Redis's own clock, so the
processes' clocks need not agree). ``reserve`` takes that slot atomically (a Lua script) and
pushes it one interval on; the caller sleeps until its slot. Requests of every process are
thus spaced at least ``1 / per_second`` apart. The key expires a second after its last slot.

The binding calls ``reserve`` on tokio's blocking pool with the GIL, never on the event loop
or a runtime worker. A forked child (gunicorn ``--preload``, Celery prefork) makes a
connection pool of its own at the fork (:mod:`fxpay._forks`): it never uses the parent's
sockets, nor waits on a lock of the parent's pool that a thread of the parent held at the fork.
"""

from __future__ import annotations

from typing import Any

from . import _forks
from ._redis import client_from_url, fresh_client

__all__ = ["RedisBucket"]

# ARGV[1]: the interval in microseconds. Returns the wait, in microseconds, until the slot.
_RESERVE = """
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local step = tonumber(ARGV[1])
local slot = tonumber(redis.call('GET', KEYS[1]) or '0')
if slot < now then slot = now end
local after = slot + step
redis.call('SET', KEYS[1], string.format('%.0f', after), 'PX', math.floor((after - now) / 1000) + 1000)
return slot - now
"""

#: Connect and command timeout of a client made from a URL: a Redis that does not answer
#: costs a call at most this much before it takes its turn from its own process's bucket.
SOCKET_TIMEOUT = 1.0

PREFIX = "fxpay:ratelimit:"


def rate_text(per_second: float) -> str:
    """A rate as the key of an unnamed bucket: its exact value, the shortest text that reads
    back as it (``40``, ``0.5``, ``1234567``; never rounded, so two rates never share a key)."""
    text = repr(float(per_second))
    return text[:-2] if text.endswith(".0") else text


class RedisBucket:
    """The bucket ``key`` (``fxpay:ratelimit:<name>``, or ``fxpay:ratelimit:<per_second>``
    without a name, the rate written exactly) in the Redis ``redis`` (a URL or a redis-py
    client)."""

    def __init__(self, redis: Any, per_second: float, name: str | None) -> None:
        if isinstance(redis, str):
            client = client_from_url("RateLimit", redis, SOCKET_TIMEOUT)
        elif type(redis).__module__.startswith("redis.asyncio"):
            # Its calls are coroutines of an event loop; fxpay takes turns on its own threads.
            raise TypeError("redis must be a redis URL (str) or a redis.Redis client, not a redis.asyncio client")
        elif hasattr(redis, "register_script") and hasattr(redis, "connection_pool"):
            client = redis
        else:
            raise TypeError(f"redis must be a redis URL (str) or a redis.Redis client, not {type(redis).__name__}")
        self.key = PREFIX + (name if name is not None else rate_text(per_second))
        self._r = client
        self._script = client.register_script(_RESERVE)
        # Clients inherited through a fork: kept, never used or closed in the child.
        self._inherited: list[Any] = []
        _forks.register(self)

    def reserve(self, interval_us: int) -> int:
        return int(self._script(keys=[self.key], args=[interval_us]))

    def _before_fork(self) -> None:
        pass

    def _after_fork(self, *, child: bool) -> None:
        """In a forked child: a connection pool of its own, made from the same settings
        (:func:`fxpay._redis.fresh_client`); a client whose pool cannot be made anew is kept."""
        fresh = fresh_client(self._r) if child else None
        if fresh is not None:
            self._inherited.append((self._r, self._script))
            self._r = fresh
            self._script = fresh.register_script(_RESERVE)

    def __repr__(self) -> str:
        return f"RedisBucket(key={self.key!r})"

"""Seen-sets: how the webhook receivers handle each ``DealCreated`` at most once.

A receiver asks its seen-set to *claim* the event's ``processId`` before it calls
``on_event``:

- ``"claimed"``: this delivery holds the claim and runs ``on_event``. When ``on_event``
  returns, the receiver calls :meth:`SeenSet.commit` (the id is then *seen* for ``ttl``
  seconds) and answers 200. When ``on_event`` raises, it calls :meth:`SeenSet.release` (the
  id is free again) and answers 500, so the service's next attempt runs ``on_event`` anew.
- ``"seen"``: an earlier delivery was handled. Answered 200 without calling ``on_event``.
- ``"busy"``: another delivery of the same id is being handled right now (another thread,
  worker or host). Answered 409 without calling ``on_event``: if that delivery fails, the
  service's retry of this one still finds the id free.

A claim that is neither committed nor released (the process died inside ``on_event``)
lapses after ``lease`` seconds, so a later delivery may handle the event. Choose a ``lease``
longer than ``on_event`` can run: a claim that lapses while ``on_event`` still runs lets a
second delivery run it too.

:class:`MemorySeenSet` (the default) holds the ids of one process. With several worker
processes or hosts give every receiver the same :class:`RedisSeenSet` settings.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ._redis import client_from_url
from .errors import ConfigurationError

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_LEASE", "DEFAULT_TTL", "Claim", "MemorySeenSet", "RedisSeenSet", "SeenSet"]

#: How long a handled ``processId`` is remembered: 7 days, far past any retry of the service.
DEFAULT_TTL = 7 * 24 * 3600.0
#: How long a claim holds when its holder neither commits nor releases it: 5 minutes.
DEFAULT_LEASE = 300.0

Claim = Literal["claimed", "seen", "busy"]


@runtime_checkable
class SeenSet(Protocol):
    """Where receivers record the ``processId`` values they have handled."""

    def claim(self, key: str) -> Claim:
        """Atomically: ``"claimed"`` (and hold ``key``) if it is neither seen nor held,
        else ``"seen"`` or ``"busy"``."""
        ...

    def commit(self, key: str) -> None:
        """Marks a claimed ``key`` as seen (``on_event`` returned)."""
        ...

    def release(self, key: str) -> None:
        """Forgets a claimed ``key`` (``on_event`` raised), so it may be claimed again."""
        ...


def _check_durations(ttl: float, lease: float) -> None:
    for name, value in (("ttl", ttl), ("lease", lease)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number of seconds")
        if not value > 0 or value == float("inf"):
            raise ConfigurationError(f"{name} must be a positive, finite number of seconds")


class MemorySeenSet:
    """A :class:`SeenSet` in this process's memory, safe across its threads and tasks.

    Entries expire: seen ids after ``ttl`` seconds, unsettled claims after ``lease``.
    """

    def __init__(self, *, ttl: float = DEFAULT_TTL, lease: float = DEFAULT_LEASE) -> None:
        _check_durations(ttl, lease)
        self._ttl = float(ttl)
        self._lease = float(lease)
        self._lock = threading.Lock()
        # key -> (seen?, expires at on the monotonic clock), oldest first.
        self._entries: OrderedDict[str, tuple[bool, float]] = OrderedDict()

    def _prune(self, now: float) -> None:
        while self._entries:
            _, (_, expires) = next(iter(self._entries.items()))
            if expires > now:
                return
            self._entries.popitem(last=False)

    def claim(self, key: str) -> Claim:
        now = time.monotonic()
        with self._lock:
            self._prune(now)
            entry = self._entries.get(key)
            if entry is not None and entry[1] > now:
                return "seen" if entry[0] else "busy"
            self._entries[key] = (False, now + self._lease)
            self._entries.move_to_end(key)
            return "claimed"

    def commit(self, key: str) -> None:
        with self._lock:
            self._entries[key] = (True, time.monotonic() + self._ttl)
            self._entries.move_to_end(key)

    def release(self, key: str) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and not entry[0]:
                del self._entries[key]

    def __len__(self) -> int:
        with self._lock:
            self._prune(time.monotonic())
            return len(self._entries)

    def __repr__(self) -> str:
        return f"MemorySeenSet(ttl={self._ttl:g}, lease={self._lease:g})"


# Deletes the key only while it still holds this claim's token.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

_SEEN = b"seen"
_PENDING = b"pending:"


class RedisSeenSet:
    """A :class:`SeenSet` in Redis, shared by every process that uses the same keys.

    ``pip install fxpay[redis]``. ``client`` is a ``redis.Redis``; or give ``url``
    (``redis://127.0.0.1:6379/0``), and ``socket_timeout`` bounds each command.
    A claim is one ``SET key pending:<token> NX PX lease``; a commit sets ``seen`` with
    ``EX ttl`` (7 days by default); a release deletes the key only if it still holds this
    claim. Keys are ``prefix + processId``. If Redis fails, the receiver answers 503 with
    ``Retry-After`` and does not call ``on_event``; the service retries later.
    """

    def __init__(
        self,
        client: redis.Redis | None = None,
        *,
        url: str | None = None,
        prefix: str = "fxpay:seen:",
        ttl: float = DEFAULT_TTL,
        lease: float = DEFAULT_LEASE,
        socket_timeout: float = 5.0,
    ) -> None:
        _check_durations(ttl, lease)
        if not isinstance(prefix, str):
            raise TypeError("prefix must be str")
        if client is None:
            client = client_from_url("RedisSeenSet", url, socket_timeout)
        self._r: Any = client
        self._prefix = prefix
        self._ttl_ms = max(1, int(ttl * 1000))
        self._lease_ms = max(1, int(lease * 1000))
        self._release = self._r.register_script(_RELEASE)
        self._lock = threading.Lock()
        # The token of each claim this object holds, so a release never drops another's.
        self._tokens: dict[str, bytes] = {}

    def claim(self, key: str) -> Claim:
        token = _PENDING + secrets.token_hex(16).encode()
        name = self._prefix + key
        if self._r.set(name, token, nx=True, px=self._lease_ms):
            with self._lock:
                self._tokens[key] = token
            return "claimed"
        current = self._r.get(name)
        # None: it lapsed just now; its holder may still be at work, so let the service retry.
        if isinstance(current, str):  # a client made with decode_responses=True
            current = current.encode()
        return "seen" if current == _SEEN else "busy"

    def commit(self, key: str) -> None:
        with self._lock:
            self._tokens.pop(key, None)
        self._r.set(self._prefix + key, _SEEN, px=self._ttl_ms)

    def release(self, key: str) -> None:
        with self._lock:
            token = self._tokens.pop(key, None)
        if token is not None:
            self._release(keys=[self._prefix + key], args=[token])

    def __repr__(self) -> str:
        return f"RedisSeenSet(prefix={self._prefix!r}, ttl={self._ttl_ms / 1000:g}, lease={self._lease_ms / 1000:g})"

"""A redis-py client made from a URL, for the Redis-backed stores (``fxpay[redis]``)."""

from __future__ import annotations

from typing import Any

from .errors import ConfigurationError


def client_from_url(owner: str, url: str | None, socket_timeout: float) -> Any:
    """``redis.Redis.from_url(url)`` with connect and command timeouts of ``socket_timeout``;
    a :class:`ConfigurationError` naming ``owner`` without a URL, with one redis-py cannot
    use (another scheme, a bad port), or without redis-py."""
    if url is None:
        raise ConfigurationError(f"{owner} needs a redis client or a url")
    try:
        import redis
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise ConfigurationError(f"{owner} needs redis-py: pip install 'fxpay[redis]'") from e
    try:
        return redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
    except ValueError as e:  # redis-py's word for a URL it cannot use
        raise ConfigurationError(f"{owner} cannot use the URL {url!r}: {e}") from e


def fresh_client(client: Any) -> Any | None:
    """For a forked child: a client like ``client`` on a connection pool of its own, made
    from the same settings; None where the pool cannot be made anew (a client that is not
    redis-py's own, as a wrapper: its own library's fork handling is its own).

    redis-py's pool checks the process id and makes itself anew in a child on first use, so
    the child never uses the parent's sockets; but (8.x) it first takes the inherited pool's
    lock, which a thread of the parent may have held at the fork (as one does while it takes
    a connection), and the child would wait for it for ever. A new pool has no inherited lock.
    Keep the inherited client, never closed in the child: its ``__del__`` closes its pool,
    which (making itself anew first) would take that same lock."""
    pool = getattr(client, "connection_pool", None)
    if pool is None or not hasattr(pool, "connection_kwargs"):
        return None
    import redis

    fresh = type(pool)(connection_class=pool.connection_class, max_connections=pool.max_connections, **pool.connection_kwargs)
    return redis.Redis(connection_pool=fresh)

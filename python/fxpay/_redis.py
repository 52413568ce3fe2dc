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

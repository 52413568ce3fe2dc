"""``client.with_raw_response.<method>(...)``: the usual call, and what came back with it.

    r = c.with_raw_response.get_quote(quote_id)
    r.status, r.headers["x-request-id"], r.request_id, r.elapsed, r.attempts
    quote = r.parse()

A raw call is the same call (same retries, deadline, journal and cassette); it returns a
:class:`RawResponse` about its last answer, and raises what the plain call raises. Calls made
without ``with_raw_response`` do not pay for it.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from . import _fxpay
from .errors import Headers, request_id_of

__all__ = ["RawResponse", "WithRawResponse"]

T = TypeVar("T")

#: The network methods of Client and UserSession (each also as ``name_async``).
NETWORK_METHODS = frozenset(
    {
        "create_quote",
        "get_quote",
        "create_beneficiary",
        "create_deal",
        "create_spot_deal",
        "exchange_code",
        "refresh_token",
        "list_virtual_accounts",
    }
)


class RawResponse(Generic[T]):
    """A call's last answer: ``status``, ``headers`` (read-only, case-insensitive),
    ``request_id`` (``x-request-id``, else ``request-id``), ``elapsed`` (the whole call, a
    ``datetime.timedelta``), ``attempts`` (of the request that got this answer) and
    :meth:`parse`, the method's usual result (the same object each time)."""

    __slots__ = ("_attempts", "_elapsed", "_headers", "_parsed", "_status")
    _status: int
    _headers: Headers
    _elapsed: datetime.timedelta
    _attempts: int
    _parsed: T

    def __init__(self, status: int, headers: Headers, elapsed: datetime.timedelta, attempts: int, parsed: T) -> None:
        # Immutable, as the models are: a response is what came back, never edited after.
        object.__setattr__(self, "_status", status)
        object.__setattr__(self, "_headers", headers)
        object.__setattr__(self, "_elapsed", elapsed)
        object.__setattr__(self, "_attempts", attempts)
        object.__setattr__(self, "_parsed", parsed)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RawResponse is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"RawResponse is immutable: cannot delete {name!r}")

    @property
    def status(self) -> int:
        """The HTTP status of the call's last answer."""
        return self._status

    @property
    def headers(self) -> Headers:
        """The last answer's headers (read-only, case-insensitive)."""
        return self._headers

    @property
    def elapsed(self) -> datetime.timedelta:
        """How long the whole call took."""
        return self._elapsed

    @property
    def attempts(self) -> int:
        """The attempts of the request that got this answer."""
        return self._attempts

    @property
    def request_id(self) -> str | None:
        return request_id_of(self.headers)

    def parse(self) -> T:
        """The result the plain call returns."""
        return self._parsed

    def __repr__(self) -> str:
        return f"<RawResponse status={self.status} request_id={self.request_id!r} attempts={self.attempts}>"


def _raw(capture: _fxpay.RawCapture, started: float, parsed: T) -> RawResponse[T]:
    return RawResponse(
        int(capture.status or 0),
        Headers(capture.headers),
        datetime.timedelta(seconds=time.perf_counter() - started),
        int(capture.attempts),
        parsed,
    )


class WithRawResponse:
    """``client.with_raw_response`` (and ``session.with_raw_response``): each network
    method, returning a :class:`RawResponse` (its ``_async`` twin, an awaitable of one)."""

    __slots__ = ("_target",)

    def __init__(self, target: object) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Callable[..., Any]:
        base = name.removesuffix("_async")
        if base not in NETWORK_METHODS or not hasattr(self._target, name):
            raise AttributeError(f"with_raw_response has no network method {name!r}")
        method = getattr(self._target, name)
        if name.endswith("_async"):

            async def run_async(*args: Any, **kwargs: Any) -> RawResponse[Any]:
                started = time.perf_counter()
                capture = _fxpay._raw_arm()
                try:
                    pending: Awaitable[Any] = method(*args, **kwargs)
                finally:
                    _fxpay._raw_disarm()
                return _raw(capture, started, await pending)

            return run_async

        def run(*args: Any, **kwargs: Any) -> RawResponse[Any]:
            started = time.perf_counter()
            capture = _fxpay._raw_arm()
            try:
                parsed = method(*args, **kwargs)
            finally:
                _fxpay._raw_disarm()
            return _raw(capture, started, parsed)

        return run

    def __dir__(self) -> list[str]:
        return sorted(n for m in NETWORK_METHODS for n in (m, m + "_async") if hasattr(self._target, n))

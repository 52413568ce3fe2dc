"""The exceptions fxpay raises. Every one of them is an :class:`FxPayError`.

The Rust core raises these classes directly; they are defined here so that they are plain
Python exceptions that pickle, subclass and document like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._fxpay import FieldError, JournalEntry

__all__ = [
    "ApiError",
    "AuthenticationError",
    "BadRequestError",
    "CassetteMismatchError",
    "ConfigurationError",
    "FxPayError",
    "IdempotencyError",
    "InProgressError",
    "InvalidClientError",
    "InvalidRequestError",
    "JournalError",
    "KeyReusedError",
    "NotFoundError",
    "OAuthError",
    "OutcomeUnknownError",
    "PaginationError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "StateMismatchError",
    "TimeoutError",
    "TransportError",
    "WebhookError",
    "WebhookPayloadError",
    "WebhookVerificationError",
]


class FxPayError(Exception):
    """Base class of every error fxpay raises."""

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(message, *args)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigurationError(FxPayError):
    """The client, a redirect URI or another setting is unusable."""


class InvalidRequestError(FxPayError, ValueError):
    """An argument was refused before any request was sent."""


class TransportError(FxPayError):
    """The connection failed, or no complete answer arrived."""


class TimeoutError(TransportError):  # the name is part of the public API
    """An attempt took longer than the client's timeout."""


class StateMismatchError(FxPayError):
    """The ``state`` of an authorization callback is not the one that was sent."""


class Headers(Mapping[str, str]):
    """An answer's headers: a read-only mapping whose keys ignore case
    (``h["X-Request-Id"] == h["x-request-id"]``). A header sent more than once keeps its
    values joined by ``", "``."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[str, str]] | Mapping[str, str] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        d: dict[str, str] = {}
        for k, v in pairs:
            k = str(k).lower()
            d[k] = f"{d[k]}, {v}" if k in d else str(v)
        self._items = d

    def __getitem__(self, key: str) -> str:
        if not isinstance(key, str):
            raise KeyError(key)
        return self._items[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == {str(k).lower(): v for k, v in other.items()}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"

    def __reduce__(self) -> Any:
        return (Headers, (list(self._items.items()),))


def request_id_of(headers: Headers) -> str | None:
    """The request id of an answer: ``x-request-id``, else ``request-id`` (case ignored)."""
    return headers.get("x-request-id") or headers.get("request-id")


def _with_request_id(message: str, request_id: str | None) -> str:
    """``message`` naming the answer's request id, so a traceback in a log carries it."""
    if not request_id or request_id in message:
        return message
    return f"{message} (request id {request_id})"


class ApiError(FxPayError):
    """The service answered with an error status.

    ``status`` is the HTTP status, ``errors`` the :class:`~fxpay.FieldError` entries of an
    ``{"errors": [...]}`` body, and ``body`` the body as received, whatever its shape.
    ``headers`` are the answer's headers (a read-only mapping that ignores case) and
    ``request_id`` its ``x-request-id`` (else ``request-id``) header: quote it to the
    provider's support.
    """

    def __init__(
        self,
        message: str = "",
        status: int = 0,
        errors: list[FieldError] | None = None,
        body: str | None = None,
        retry_after: int | None = None,
        headers: Iterable[tuple[str, str]] | Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.errors: list[FieldError] = list(errors or [])
        self.body = body
        self.retry_after = retry_after
        self._headers = Headers(headers or ())

    @property
    def headers(self) -> Headers:
        """The answer's headers (read-only, case-insensitive)."""
        return self._headers

    @property
    def request_id(self) -> str | None:
        """The answer's ``x-request-id`` (else ``request-id``) header, or ``None``."""
        return request_id_of(self._headers)

    def __str__(self) -> str:
        return _with_request_id(self.message, self.request_id)

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.status, self.errors, self.body, self.retry_after, list(self._headers.items())))


class BadRequestError(ApiError):
    """400 or 422: the service refused the request's content."""


class AuthenticationError(ApiError):
    """401: the token was missing, wrong or expired (after one renewal and replay)."""


class OAuthError(ApiError):
    """An OAuth error: an RFC 6749 section 5.2 token error, or an ``error=`` callback.

    A token endpoint's refusal is an :class:`ApiError` like any other answer: ``status``,
    ``body`` (as received), ``headers`` (a read-only mapping that ignores case) and
    ``request_id`` (its ``x-request-id``, else ``request-id``: quote it to the provider's
    support), so ``except fxpay.ApiError`` catches it. ``error`` and ``error_description``
    are the RFC 6749 fields. An ``error=`` callback came with no answer: its ``status``,
    ``body`` and ``request_id`` are None and its headers empty. ``invalid_client`` (wrong
    credentials) is raised as :class:`InvalidClientError`, also an
    :class:`AuthenticationError`.
    """

    # None for a callback's error, which no answer carried.
    status: int | None  # type: ignore[assignment]

    def __init__(
        self,
        message: str = "",
        error: str = "",
        error_description: str | None = None,
        status: int | None = None,
        headers: Iterable[tuple[str, str]] | Mapping[str, str] | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message, body=body, headers=headers)
        self.status = status
        self.error = error
        self.error_description = error_description

    def __reduce__(self) -> Any:
        return (
            type(self),
            (self.message, self.error, self.error_description, self.status, list(self._headers.items()), self.body),
        )


class InvalidClientError(OAuthError, AuthenticationError):
    """The token endpoint's ``invalid_client``: the client id or secret is wrong (or the
    client is not allowed the grant). Both an :class:`OAuthError` and an
    :class:`AuthenticationError`."""


class PermissionDeniedError(ApiError):
    """403: the token does not carry the scope the call needs."""


class NotFoundError(ApiError):
    """404: no such resource, or it belongs to another client."""


class RateLimitError(ApiError):
    """429: too many requests. ``retry_after`` is the wait the service asked for, in seconds."""


class ServerError(ApiError):
    """5xx: the service failed."""


class PaginationError(ApiError):
    """A listing's pages cannot all be fetched, so fxpay returns none of it rather than a
    short list: a ``next`` link on another origin or outside the API, a link already
    followed (a loop), or a paging marker that is not a link (a cursor, a page token,
    ``hasMore: true``). ``status``, ``body`` and ``headers`` are those of the page that said
    so; the message names the marker or the link."""


class WebhookError(FxPayError):
    """A webhook notification was refused."""


class WebhookVerificationError(WebhookError):
    """The notification's ``callback-nonce`` is missing or wrong."""


class WebhookPayloadError(WebhookError):
    """The notification's body is not a valid ``DealCreated`` event."""


class IdempotencyError(FxPayError):
    """The idempotency journal refused a call, or could not be used; nothing was sent.

    ``entry`` is the key's :class:`~fxpay.JournalEntry` (None for a :class:`JournalError`).
    ``request_id`` is the request id of the answer that made an outcome unknown (a 5xx's
    ``x-request-id``), the id support asks for; None when no answer came (a timeout, a lost
    connection). ``__cause__`` is the error that made it (the ``ServerError``, the
    ``TimeoutError``, the ``TransportError``).
    """

    def __init__(self, message: str = "", entry: JournalEntry | None = None, request_id: str | None = None) -> None:
        super().__init__(message)
        self.entry = entry
        self.request_id = request_id

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.entry, self.request_id))


class KeyReusedError(IdempotencyError):
    """The key was used before for another request (operation or arguments)."""


class InProgressError(IdempotencyError):
    """Another call holds the key and may be sending now; try again later."""


class OutcomeUnknownError(IdempotencyError):
    """The key's request may have reached the service and its answer was lost.

    Nothing is sent under the key until ``journal.resolve(key, result=...)`` settles it: find
    out whether the object exists (see docs/idempotency.md) and pass its id, or None.
    """


class JournalError(IdempotencyError):
    """The journal could not be read or written: the call fails closed, nothing was sent."""


class CassetteMismatchError(FxPayError):
    """In replay, a request the cassette does not hold (the message names its method and path).

    Also reachable as ``fxpay.testing.CassetteMismatchError``.
    """

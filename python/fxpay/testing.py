"""``fxpay.testing``: an embedded, stateful emulator of the whole service.

    with fxpay.testing.Sandbox() as sb:
        c = sb.client()
        quote_id = c.create_quote(buy_currency="USD", buy_amount=1000, sell_currency="AUD")

The sandbox listens on a random free port of 127.0.0.1 and runs inside this process on
fxpay's own runtime: no network and no other process are needed. It keeps state (clients,
tokens, quotes, beneficiaries, deals, deliveries), has its own clock (``advance``) and
injects faults on demand (``fail_next``, ``drop_next``, ``delay_next``).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

from . import _fxpay
from ._client import Client
from .errors import CassetteMismatchError

__all__ = ["Sandbox", "Cassette", "CassetteMismatchError"]


class Sandbox:
    """The local sandbox. Use it as a context manager, or call :meth:`close`."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._core = _fxpay.CoreSandbox(host, port)
        self._closed = False

    # -- identity --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the service address without ``/v1``."""
        return str(self._core.base_url)

    @property
    def client_id(self) -> str:
        return str(self._core.client_id)

    @property
    def client_secret(self) -> str:
        return str(self._core.client_secret)

    @property
    def redirect_uri(self) -> str:
        """A registered https redirect URI of the default client."""
        return str(self._core.redirect_uri)

    @property
    def username(self) -> str:
        return str(self._core.username)

    @property
    def password(self) -> str:
        return str(self._core.password)

    def client(self, **kwargs: Any) -> Client:
        """A :class:`fxpay.Client` bound to this sandbox (keyword arguments go to ``Client``)."""
        return Client(self.client_id, self.client_secret, base_url=self.base_url, **kwargs)

    def register_client(self, client_id: str, client_secret: str, redirect_uris: list[str] | None = None) -> None:
        """Registers another OAuth client."""
        self._core.register_client(client_id, client_secret, list(redirect_uris or []))

    # -- the consent flow ------------------------------------------------------------------

    def approve(self, auth_url: str, *, allow: bool = True) -> str:
        """Logs in and answers the consent page over HTTP like a browser; returns the redirect URL."""
        return str(self._core.approve(auth_url, allow))

    # -- clock and inspection --------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Moves the sandbox clock forward (deals, tokens and codes age with it)."""
        self._core.advance(float(seconds))

    def now(self) -> float:
        """The sandbox clock, in unix seconds."""
        return float(self._core.now())

    def deal_status(self, deal_id: str) -> str:
        """``"Booked"``, then ``"Paid"`` 86400 s (sandbox clock) after creation."""
        return str(self._core.deal_status(deal_id))

    def deals(self) -> list[dict[str, Any]]:
        """Every deal booked, oldest first."""
        return self._core.deals()

    def deliveries(self) -> list[dict[str, Any]]:
        """Every ``DealCreated`` delivery attempt, oldest first."""
        return self._core.deliveries()

    def stats(self) -> dict[str, Any]:
        """Request counters: at least ``requests`` and ``token_requests``."""
        return self._core.stats()

    # -- faults ----------------------------------------------------------------------------

    def fail_next(self, path: str, status: int, *, times: int = 1, retry_after: int | None = None) -> None:
        """Answers the next ``times`` requests to ``path`` with ``status`` without processing them.

        ``path`` is exact (``"/v1/payments/quotes"``), may start with a method
        (``"POST /v1/payments/deals"``) and may end with ``*`` to match a prefix.
        """
        self._core.fail_next(path, status, times, retry_after)

    def drop_next(self, path: str, *, after_processing: bool) -> None:
        """Closes the connection of the next request to ``path``, before or after acting on it."""
        self._core.drop_next(path, after_processing)

    def delay_next(self, path: str, seconds: float) -> None:
        """Delays the next request to ``path`` by ``seconds`` (real time)."""
        self._core.delay_next(path, float(seconds))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._core.shutdown()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox(base_url={self.base_url!r})"


# -- record and replay (fxpay.testing.Cassette) ----------------------------------------------


class Cassette:
    """Records a client's HTTP exchanges to a JSON file, or answers them from it.

        cas = fxpay.testing.Cassette("cassettes/quote.json")      # mode="once"
        with fxpay.Client(cid, secret, base_url=url, cassette=cas) as c:
            c.create_quote(buy_currency="USD", buy_amount=1000, sell_currency="AUD")

    ``mode="record"`` sends every request and writes the exchanges when the client closes
    (``close()``, ``aclose()``, the end of a ``with`` block; or, failing those, when the
    client and the cassette are garbage-collected). ``"replay"`` answers from the file with
    no network at all; a request it does not hold raises :class:`CassetteMismatchError`.
    ``"once"`` replays if the file exists, else records.

    Requests match on method, path, query and body; the first exchange not played yet
    that matches answers, so identical requests replay in the order they were recorded.
    Client secrets, authorization codes, code verifiers, access and refresh tokens,
    ``Authorization`` headers and callback nonces are replaced by stable placeholders such as
    ``fxpay-scrubbed-access-token-1`` before anything is written or compared.
    """

    __slots__ = ("_core",)

    def __init__(self, path: str | os.PathLike[str], *, mode: str = "once") -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        fspath = os.fspath(path)
        if not isinstance(fspath, str):
            raise TypeError(f"path must be a str or os.PathLike[str], got {type(fspath).__name__}")
        if not isinstance(mode, str):
            raise TypeError(f"mode must be a str, got {type(mode).__name__}")
        self._core = _fxpay.CoreCassette(fspath, mode)

    @property
    def path(self) -> str:
        return str(self._core.path)

    @property
    def mode(self) -> str:
        """``"record"`` or ``"replay"``: what this cassette does (``"once"`` has been decided)."""
        return str(self._core.mode)

    @property
    def base_url(self) -> str | None:
        """The base URL of the client that recorded the file (``None`` before recording)."""
        return self._core.base_url

    @property
    def client_id(self) -> str | None:
        """The client id of the client that recorded the file (``None`` before recording)."""
        return self._core.client_id

    @property
    def recorded(self) -> int:
        """How many exchanges the cassette holds."""
        return int(self._core.counts()[0])

    @property
    def played(self) -> int:
        """How many of them have been recorded or replayed by this cassette object."""
        return int(self._core.counts()[1])

    def save(self) -> None:
        """Writes the file now (a recording cassette); closing its client does this too."""
        self._core.save()

    def client(self, client_secret: str = "fxpay-scrubbed-client-secret-1", **kwargs: Any) -> Client:
        """In replay, a client like the one that recorded the file (base URL and client id)."""
        if self.base_url is None or self.client_id is None:
            from .errors import ConfigurationError

            raise ConfigurationError(f"the cassette {self.path} names no recording client")
        return Client(self.client_id, client_secret, base_url=self.base_url, cassette=self, **kwargs)

    def __repr__(self) -> str:
        return f"Cassette(path={self.path!r}, mode={self.mode!r})"

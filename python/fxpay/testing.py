"""``fxpay.testing``: an embedded, stateful emulator of the whole service, and a handle on one
served by another process.

    with fxpay.testing.Sandbox() as sb:
        c = sb.client()
        quote_id = c.create_quote(buy_currency="USD", buy_amount=1000, sell_currency="AUD")

The sandbox listens on a random free port of 127.0.0.1 and runs inside this process on
fxpay's own runtime: no network and no other process are needed. It keeps state (clients,
tokens, quotes, beneficiaries, deals, deliveries), has its own clock (``advance``) and
injects faults on demand (``fail_next``, ``drop_next``, ``delay_next``).

``Sandbox(tls=True)`` serves https with a CA made at start (``ca_bundle``). A served sandbox
(``python -m fxpay.sandbox``) exposes every control under ``/_sandbox/`` behind its admin
token; :class:`RemoteSandbox` drives it with the same methods and properties as ``Sandbox``.
"""

from __future__ import annotations

import json
import math
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from types import TracebackType
from typing import Any

from . import _fxpay
from ._fxpay import Client
from .errors import (
    CassetteMismatchError,
    ConfigurationError,
    FxPayError,
    InvalidRequestError,
    TransportError,
)

__all__ = ["Cassette", "CassetteMismatchError", "RemoteSandbox", "Sandbox"]


def _seconds(name: str, value: object) -> float:
    """A number of seconds as a float: a ``TypeError`` naming ``name`` unless it is an int or
    float; an ``InvalidRequestError`` when it is too large for a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        from .errors import InvalidRequestError

        raise InvalidRequestError(f"{name} is out of range") from None


def _flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


class Sandbox:
    """The local sandbox. Use it as a context manager, or call :meth:`close`.

    ``body_timeout`` (seconds, default 10) is how long a request body may take to arrive in
    full once its headers are read: a body still incomplete then is answered 408 and its
    connection closed, so stalled uploads cannot hold the sandbox's connections.
    """

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, tls: bool = False, body_timeout: float = 10.0
    ) -> None:
        _flag("tls", tls)
        self._core = _fxpay.CoreSandbox(host, port, tls, _seconds("body_timeout", body_timeout))
        self._closed = False

    # -- identity --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https://`` with ``tls``): the address without ``/v1``."""
        return str(self._core.base_url)

    @property
    def admin_token(self) -> str:
        """The token of the admin API under ``/_sandbox/`` (``Authorization: Bearer ...``)."""
        return str(self._core.admin_token)

    @property
    def ca_bundle(self) -> str | None:
        """With ``tls=True``, the path of the CA file (PEM) the certificate chains to."""
        path = self._core.ca_bundle
        return None if path is None else str(path)

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
        """A :class:`fxpay.Client` bound to this sandbox (keyword arguments go to ``Client``).

        With ``tls=True`` the client trusts the sandbox's CA.
        """
        if self.ca_bundle is not None:
            kwargs.setdefault("ca_bundle", self.ca_bundle)
        return Client(self.client_id, self.client_secret, base_url=self.base_url, **kwargs)

    def reset(self) -> None:
        """Forgets every quote, beneficiary, deal, delivery and fault; zeroes the counters.

        Clients, users, tokens and the clock stay.
        """
        self._core.reset()

    def register_client(self, client_id: str, client_secret: str, redirect_uris: list[str] | None = None) -> None:
        """Registers another OAuth client."""
        self._core.register_client(client_id, client_secret, [] if redirect_uris is None else redirect_uris)

    # -- the consent flow ------------------------------------------------------------------

    def approve(self, auth_url: str, *, allow: bool = True) -> str:
        """Logs in and answers the consent page over HTTP like a browser; returns the redirect URL."""
        _flag("allow", allow)
        return str(self._core.approve(auth_url, allow))

    # -- clock and inspection --------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Moves the sandbox clock forward (deals, tokens and codes age with it)."""
        self._core.advance(_seconds("seconds", seconds))

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
        _flag("after_processing", after_processing)
        self._core.drop_next(path, after_processing)

    def delay_next(self, path: str, seconds: float) -> None:
        """Delays the next request to ``path`` by ``seconds`` (real time)."""
        self._core.delay_next(path, _seconds("seconds", seconds))

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


# -- RemoteSandbox: a served sandbox, driven over its admin API ---------------------------


def _need(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    """TypeError naming the parameter unless ``value`` is a ``kind`` (a bool is no number)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")


def _nonneg_seconds(name: str, value: object) -> float:
    seconds = _seconds(name, value)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InvalidRequestError(f"{name} must be a finite number >= 0")
    return seconds


class RemoteSandbox:
    """A sandbox served by another process (``python -m fxpay.sandbox``), driven over its admin
    API under ``/_sandbox/``.

    It has the methods and properties of :class:`Sandbox` except ``close``, so a test drives
    either in the same way. ``admin_token`` is the ``FXPAY_ADMIN_TOKEN`` the server printed;
    ``ca_bundle`` the CA file of an https sandbox (``FXPAY_CA_BUNDLE``). Constructing it sends
    no request.
    """

    def __init__(
        self,
        base_url: str,
        *,
        client_id: str,
        client_secret: str,
        admin_token: str,
        ca_bundle: str | os.PathLike[str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        for name, value in (
            ("base_url", base_url),
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("admin_token", admin_token),
        ):
            _need(name, value, str, "a str")
            if not value:
                raise InvalidRequestError(f"{name} must not be empty")
        if ca_bundle is not None and not isinstance(ca_bundle, (str, os.PathLike)):
            raise TypeError(f"ca_bundle must be a path or None, got {type(ca_bundle).__name__}")
        if _nonneg_seconds("timeout", timeout) == 0:
            raise InvalidRequestError("timeout must be > 0")
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidRequestError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        self._base_url = base_url.rstrip("/")
        self._client_id = client_id
        self._client_secret = client_secret
        self._admin_token = admin_token
        self._ca_bundle = None if ca_bundle is None else os.fspath(ca_bundle)
        self._timeout = float(timeout)
        self._info: dict[str, Any] | None = None
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        if parsed.scheme == "https":
            try:
                ctx = ssl.create_default_context(cafile=self._ca_bundle)
            except (OSError, ssl.SSLError) as e:
                raise ConfigurationError(f"cannot read ca_bundle {self._ca_bundle!r}: {e}") from e
            handlers.append(urllib.request.HTTPSHandler(context=ctx))
        self._opener = urllib.request.build_opener(*handlers)

    # -- the admin API ---------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self._base_url + "/_sandbox/" + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._admin_token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=self._timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            e.close()
            message = raw.decode("utf-8", "replace")
            try:
                errors = json.loads(raw)["errors"]
                message = "; ".join(str(x["message"]) for x in errors)
            except (ValueError, KeyError, TypeError):
                pass
            if e.code in (401, 403):
                raise ConfigurationError(
                    f"the sandbox at {self._base_url} refused the admin token (HTTP {e.code}): {message}"
                ) from None
            if e.code in (400, 404):
                raise InvalidRequestError(message) from None
            raise FxPayError(f"sandbox admin API {method} /_sandbox/{path} answered HTTP {e.code}: {message}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise TransportError(f"could not reach the sandbox admin API at {self._base_url}: {reason}") from None

    def _about(self, key: str) -> str:
        if self._info is None:
            self._info = dict(self._call("GET", "info"))
        return str(self._info[key])

    # -- identity --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The service address without ``/v1``."""
        return self._base_url

    @property
    def client_id(self) -> str:
        return self._client_id

    @property
    def client_secret(self) -> str:
        return self._client_secret

    @property
    def admin_token(self) -> str:
        return self._admin_token

    @property
    def ca_bundle(self) -> str | None:
        """The CA file (PEM) of an https sandbox, as given."""
        return self._ca_bundle

    @property
    def redirect_uri(self) -> str:
        """A registered https redirect URI of the default client (asked of the server once)."""
        return self._about("redirect_uri")

    @property
    def username(self) -> str:
        return self._about("username")

    @property
    def password(self) -> str:
        return self._about("password")

    def client(self, **kwargs: Any) -> Client:
        """A :class:`fxpay.Client` bound to this sandbox (keyword arguments go to ``Client``)."""
        if self._ca_bundle is not None:
            kwargs.setdefault("ca_bundle", self._ca_bundle)
        return Client(self._client_id, self._client_secret, base_url=self._base_url, **kwargs)

    def register_client(self, client_id: str, client_secret: str, redirect_uris: list[str] | None = None) -> None:
        """Registers another OAuth client."""
        _need("client_id", client_id, str, "a str")
        _need("client_secret", client_secret, str, "a str")
        uris = list(redirect_uris or [])
        for u in uris:
            _need("redirect_uris", u, str, "a list of str")
        self._call(
            "POST",
            "register_client",
            {"client_id": client_id, "client_secret": client_secret, "redirect_uris": uris},
        )

    def reset(self) -> None:
        """Forgets every quote, beneficiary, deal, delivery and fault; zeroes the counters."""
        self._call("POST", "reset")

    # -- the consent flow ------------------------------------------------------------------

    def approve(self, auth_url: str, *, allow: bool = True) -> str:
        """Logs in and answers the consent page over HTTP like a browser; returns the redirect URL."""
        _need("auth_url", auth_url, str, "a str")
        _need("allow", allow, bool, "a bool")
        return str(self._call("POST", "approve", {"auth_url": auth_url, "allow": allow})["redirect_url"])

    # -- clock and inspection --------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Moves the sandbox clock forward."""
        self._call("POST", "advance", {"seconds": _nonneg_seconds("seconds", seconds)})

    def now(self) -> float:
        """The sandbox clock, in unix seconds."""
        return float(self._call("GET", "now")["now"])

    def deal_status(self, deal_id: str) -> str:
        """``"Booked"``, then ``"Paid"`` 86400 s (sandbox clock) after creation."""
        _need("deal_id", deal_id, str, "a str")
        return str(self._call("GET", "deal_status/" + urllib.parse.quote(deal_id, safe=""))["status"])

    def deals(self) -> list[dict[str, Any]]:
        """Every deal booked, oldest first."""
        return list(self._call("GET", "deals"))

    def deliveries(self) -> list[dict[str, Any]]:
        """Every ``DealCreated`` delivery attempt, oldest first."""
        return list(self._call("GET", "deliveries"))

    def stats(self) -> dict[str, Any]:
        """Request counters: at least ``requests`` and ``token_requests``."""
        return dict(self._call("GET", "stats"))

    # -- faults ----------------------------------------------------------------------------

    def fail_next(self, path: str, status: int, *, times: int = 1, retry_after: int | None = None) -> None:
        """Answers the next ``times`` requests to ``path`` with ``status`` without processing them."""
        _need("path", path, str, "a str")
        _need("status", status, int, "an int")
        _need("times", times, int, "an int")
        if retry_after is not None:
            _need("retry_after", retry_after, int, "an int or None")
        if times < 0:
            raise InvalidRequestError("times must be >= 0")
        self._call("POST", "fail_next", {"path": path, "status": status, "times": times, "retry_after": retry_after})

    def drop_next(self, path: str, *, after_processing: bool) -> None:
        """Closes the connection of the next request to ``path``, before or after acting on it."""
        _need("path", path, str, "a str")
        _need("after_processing", after_processing, bool, "a bool")
        self._call("POST", "drop_next", {"path": path, "after_processing": after_processing})

    def delay_next(self, path: str, seconds: float) -> None:
        """Delays the next request to ``path`` by ``seconds`` (real time)."""
        _need("path", path, str, "a str")
        self._call("POST", "delay_next", {"path": path, "seconds": _nonneg_seconds("seconds", seconds)})

    # -- lifecycle (nothing to close: the server belongs to its own process) ---------------

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def __repr__(self) -> str:
        return f"RemoteSandbox(base_url={self._base_url!r})"


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

"""``fxpay.testing.RemoteSandbox``: a sandbox served by another process
(``python -m fxpay.sandbox``), driven over its admin API under ``/_sandbox/``."""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from decimal import Decimal
from types import TracebackType
from typing import Any

from .._fxpay import Client, FieldError
from ..errors import ConfigurationError, FxPayError, InvalidRequestError, TransportError
from ._checks import check_nonneg_seconds, check_type, warn_unfired
from ._webhooks import event_json

__all__ = ["RemoteSandbox"]


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
        client_cert: str | os.PathLike[str] | None = None,
        client_key: str | os.PathLike[str] | None = None,
    ) -> None:
        for name, value in (
            ("base_url", base_url),
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("admin_token", admin_token),
        ):
            check_type(name, value, str, "a str")
            if not value:
                raise InvalidRequestError(f"{name} must not be empty")
        for path_name, path_value in (("ca_bundle", ca_bundle), ("client_cert", client_cert), ("client_key", client_key)):
            if path_value is not None and not isinstance(path_value, (str, os.PathLike)):
                raise TypeError(f"{path_name} must be a path or None, got {type(path_value).__name__}")
        if client_key is not None and client_cert is None:
            raise ConfigurationError("client_key needs client_cert (the certificate it is the key of)")
        if check_nonneg_seconds("timeout", timeout) == 0:
            raise InvalidRequestError("timeout must be > 0")
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidRequestError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        self._base_url = base_url.rstrip("/")
        self._client_id = client_id
        self._client_secret = client_secret
        self._admin_token = admin_token
        self._ca_bundle = None if ca_bundle is None else os.fspath(ca_bundle)
        self._client_cert = None if client_cert is None else os.fspath(client_cert)
        self._client_key = None if client_key is None else os.fspath(client_key)
        self._timeout = float(timeout)
        self._info: dict[str, Any] | None = None
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        if parsed.scheme == "https":
            try:
                ctx = ssl.create_default_context(cafile=self._ca_bundle)
            except (OSError, ssl.SSLError) as e:
                raise ConfigurationError(f"cannot read ca_bundle {self._ca_bundle!r}: {e}") from e
            if self._client_cert is not None:
                try:
                    ctx.load_cert_chain(self._client_cert, self._client_key)
                except (OSError, ssl.SSLError) as e:
                    raise ConfigurationError(f"cannot read client_cert {self._client_cert!r}: {e}") from e
            handlers.append(urllib.request.HTTPSHandler(context=ctx))
        self._opener = urllib.request.build_opener(*handlers)

    # -- the admin API ---------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, *, money: bool = False) -> Any:
        """One admin request's JSON answer; with ``money``, its numbers with a fraction as
        ``Decimal`` exactly as written (amounts never pass through a float), as
        :class:`Sandbox` gives them."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self._base_url + "/_sandbox/" + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._admin_token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=self._timeout) as resp:
                return json.loads(resp.read() or b"null", parse_float=Decimal if money else float)
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
                raise ConfigurationError(f"the sandbox at {self._base_url} refused the admin token (HTTP {e.code}): {message}") from None
            if e.code in (400, 404):
                raise InvalidRequestError(message) from None
            raise FxPayError(f"sandbox admin API {method} /_sandbox/{path} answered HTTP {e.code}: {message}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            hint = ""
            if "CERTIFICATE_REQUIRED" in str(reason):
                hint = (
                    " (the sandbox asked for a client certificate: it was served with --client-auth; give "
                    "RemoteSandbox(..., client_cert=FXPAY_CLIENT_CERT, client_key=FXPAY_CLIENT_KEY), or "
                    "--fxpay-client-cert / --fxpay-client-key to the pytest plugin)"
                )
            raise TransportError(f"could not reach the sandbox admin API at {self._base_url}: {reason}{hint}") from None

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
    def client_cert(self) -> str | None:
        """The client certificate (PEM) presented to a ``--client-auth`` sandbox, as given."""
        return self._client_cert

    @property
    def client_key(self) -> str | None:
        """The key (PEM) of :attr:`client_cert`, as given."""
        return self._client_key

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
        if self._client_cert is not None and "client_cert" not in kwargs:
            kwargs["client_cert"] = self._client_cert
            kwargs.setdefault("client_key", self._client_key)
        return Client(self._client_id, self._client_secret, base_url=self._base_url, **kwargs)

    def register_client(self, client_id: str, client_secret: str, redirect_uris: list[str] | None = None) -> None:
        """Registers another OAuth client."""
        check_type("client_id", client_id, str, "a str")
        check_type("client_secret", client_secret, str, "a str")
        uris = list(redirect_uris or [])
        for u in uris:
            check_type("redirect_uris", u, str, "a list of str")
        self._call(
            "POST",
            "register_client",
            {"client_id": client_id, "client_secret": client_secret, "redirect_uris": uris},
        )

    def reset(self) -> None:
        """Forgets every quote, beneficiary, deal, delivery and fault; zeroes the counters.

        Faults that never fired are reported as an :class:`UnfiredFaultWarning` (the admin
        API gives their number; an embedded :class:`Sandbox` names each).
        """
        pending = int(self.stats().get("faults_pending", 0))
        self._call("POST", "reset")
        if pending:
            warn_unfired([f"{pending} fault(s) set with fail_next, drop_next or delay_next"], "reset()")

    # -- the consent flow ------------------------------------------------------------------

    def approve(self, auth_url: str, *, allow: bool = True) -> str:
        """Logs in and answers the consent page over HTTP like a browser; returns the redirect URL."""
        check_type("auth_url", auth_url, str, "a str")
        check_type("allow", allow, bool, "a bool")
        return str(self._call("POST", "approve", {"auth_url": auth_url, "allow": allow})["redirect_url"])

    # -- clock and inspection --------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Moves the sandbox clock forward."""
        self._call("POST", "advance", {"seconds": check_nonneg_seconds("seconds", seconds)})

    def now(self) -> float:
        """The sandbox clock, in unix seconds."""
        return float(self._call("GET", "now")["now"])

    def deal_status(self, deal_id: str) -> str:
        """``"Booked"``, then ``"Paid"`` 86400 s (sandbox clock) after creation."""
        check_type("deal_id", deal_id, str, "a str")
        return str(self._call("GET", "deal_status/" + urllib.parse.quote(deal_id, safe=""))["status"])

    def deals(self) -> list[dict[str, Any]]:
        """Every deal booked, oldest first; amounts (and instants) as ``Decimal``, as
        :meth:`Sandbox.deals` gives them."""
        return list(self._call("GET", "deals", money=True))

    def deliveries(self) -> list[dict[str, Any]]:
        """Every ``DealCreated`` delivery attempt, oldest first."""
        return list(self._call("GET", "deliveries"))

    def set_virtual_accounts(self, count: int, *, page_size: int | None = None) -> None:
        """From now on every user has ``count`` generated accounts, in pages of ``page_size``."""
        check_type("count", count, int, "an int")
        if page_size is not None:
            check_type("page_size", page_size, int, "an int or None")
        self._call("POST", "set_virtual_accounts", {"count": count, "page_size": page_size})

    def redeliver(self, process_id: str) -> dict[str, Any]:
        """Sends a spot deal's recorded ``DealCreated`` again (same body, nonce and URL, one
        attempt); returns the delivery, also recorded in :meth:`deliveries`."""
        check_type("process_id", process_id, str, "a str")
        return dict(self._call("POST", "redeliver", {"process_id": process_id}))

    def send_deal_created(
        self,
        url: str,
        *,
        status: str = "success",
        process_id: str | None = None,
        deal_id: str | None = None,
        errors: Sequence[FieldError | Mapping[str, Any]] = (),
        nonce: str | None = None,
    ) -> dict[str, Any]:
        """POSTs a ``DealCreated`` of your choosing to ``url`` in one attempt; returns the
        delivery, also recorded in :meth:`deliveries`."""
        check_type("url", url, str, "a str")
        body = event_json(status=status, process_id=process_id, deal_id=deal_id, errors=errors, nonce=nonce)
        return dict(self._call("POST", "send_event", {"url": url, "body": body, "nonce": nonce}))

    def stats(self) -> dict[str, Any]:
        """Request counters: at least ``requests`` and ``token_requests``."""
        return dict(self._call("GET", "stats"))

    # -- faults ----------------------------------------------------------------------------

    def fail_next(self, path: str, status: int, *, times: int = 1, retry_after: int | None = None) -> None:
        """Answers the next ``times`` requests to ``path`` with ``status`` without processing them."""
        check_type("path", path, str, "a str")
        check_type("status", status, int, "an int")
        check_type("times", times, int, "an int")
        if retry_after is not None:
            check_type("retry_after", retry_after, int, "an int or None")
        if times < 0:
            raise InvalidRequestError("times must be >= 0")
        self._call("POST", "fail_next", {"path": path, "status": status, "times": times, "retry_after": retry_after})

    def drop_next(self, path: str, *, after_processing: bool) -> None:
        """Closes the connection of the next request to ``path``, before or after acting on it."""
        check_type("path", path, str, "a str")
        check_type("after_processing", after_processing, bool, "a bool")
        self._call("POST", "drop_next", {"path": path, "after_processing": after_processing})

    def delay_next(self, path: str, seconds: float) -> None:
        """Delays the next request to ``path`` by ``seconds`` (real time)."""
        check_type("path", path, str, "a str")
        self._call("POST", "delay_next", {"path": path, "seconds": check_nonneg_seconds("seconds", seconds)})

    # -- lifecycle (nothing to close: the server belongs to its own process) ---------------

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def __repr__(self) -> str:
        return f"RemoteSandbox(base_url={self._base_url!r})"

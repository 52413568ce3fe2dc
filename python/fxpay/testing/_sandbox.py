"""``fxpay.testing.Sandbox``: an embedded, stateful emulator of the whole service.

    with fxpay.testing.Sandbox() as sb:
        c = sb.client()
        quote_id = c.create_quote(buy_currency="USD", buy_amount=1000, sell_currency="AUD")

The sandbox listens on a random free port of 127.0.0.1 and runs inside this process on
fxpay's own runtime: no network and no other process are needed. It keeps state (clients,
tokens, quotes, beneficiaries, deals, deliveries), has its own clock (``advance``) and
injects faults on demand (``fail_next``, ``drop_next``, ``delay_next``).

``Sandbox(tls=True)`` serves https with a CA made at start (``ca_bundle``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from .._fxpay import Client, CoreSandbox, FieldError
from ..errors import FxPayError
from ._checks import check_flag, check_rate, check_seconds, check_type, warn_unfired
from ._webhooks import event_json

__all__ = ["Sandbox"]


class Sandbox:
    """The local sandbox. Use it as a context manager, or call :meth:`close`.

    ``body_timeout`` (seconds, default 10) is how long a request body may take to arrive in
    full once its headers are read: a body still incomplete then is answered 408 and its
    connection closed, so stalled uploads cannot hold the sandbox's connections.

    ``idle_timeout`` (seconds, default 60) is how long a connection may stay with no request in
    progress (kept alive after an answer, or silent since it opened) before the sandbox closes
    it, so no client can hold the sandbox's sockets forever. A request in progress is never cut.

    ``rate_limit`` (requests per second, default ``None``: no limit) answers the requests
    beyond it with 429 and ``Retry-After`` (whole seconds, at least 1), as the Sandbox rules
    page says: one token bucket of ``rate_limit`` tokens refilled at ``rate_limit`` per second,
    counting every request under ``/v1/`` (token requests included) except the login and
    consent pages; the admin API is never limited. ``stats()["rate_limited"]`` counts the
    429s, ``stats()["per_second"]`` the requests of each second.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        body_timeout: float = 10.0,
        idle_timeout: float = 60.0,
        client_auth: bool = False,
        rate_limit: float | None = None,
    ) -> None:
        check_flag("tls", tls)
        check_flag("client_auth", client_auth)
        limit = None if rate_limit is None else check_rate("rate_limit", rate_limit)
        self._core = CoreSandbox(
            host,
            port,
            tls,
            check_seconds("body_timeout", body_timeout),
            check_seconds("idle_timeout", idle_timeout),
            client_auth,
            limit,
        )
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
        if self.client_cert is not None and "client_cert" not in kwargs:
            kwargs["client_cert"] = self.client_cert
            kwargs.setdefault("client_key", self.client_key)
        return Client(self.client_id, self.client_secret, base_url=self.base_url, **kwargs)

    @property
    def client_cert(self) -> str | None:
        """With ``client_auth=True``: a client certificate (PEM) the sandbox's CA issued."""
        path = self._core.client_cert
        return None if path is None else str(path)

    @property
    def client_key(self) -> str | None:
        """With ``client_auth=True``: the key (PEM) of :attr:`client_cert`."""
        path = self._core.client_key
        return None if path is None else str(path)

    def reset(self) -> None:
        """Forgets every quote, beneficiary, deal, delivery and fault; zeroes the counters.

        Clients, users, tokens and the clock stay. A fault that never fired is reported as an
        :class:`UnfiredFaultWarning` naming it.
        """
        unfired = self._core.unfired_faults()
        self._core.reset()
        warn_unfired(unfired, "reset()")

    def register_client(self, client_id: str, client_secret: str, redirect_uris: list[str] | None = None) -> None:
        """Registers another OAuth client."""
        self._core.register_client(client_id, client_secret, [] if redirect_uris is None else redirect_uris)

    # -- the consent flow ------------------------------------------------------------------

    def approve(self, auth_url: str, *, allow: bool = True) -> str:
        """Logs in and answers the consent page over HTTP like a browser; returns the redirect URL."""
        check_flag("allow", allow)
        return str(self._core.approve(auth_url, allow))

    # -- clock and inspection --------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Moves the sandbox clock forward (deals, tokens and codes age with it)."""
        self._core.advance(check_seconds("seconds", seconds))

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

    def set_virtual_accounts(self, count: int, *, page_size: int | None = None) -> None:
        """From now on every user has ``count`` generated accounts, served in pages of
        ``page_size`` (all on one page when ``None``) linked by ``next``
        (``/v1/gca/virtual-accounts?page=N``). ``reset()`` keeps them."""
        self._core.set_virtual_accounts(count, page_size)

    def redeliver(self, process_id: str) -> dict[str, Any]:
        """Sends a spot deal's recorded ``DealCreated`` again: the same body, nonce and URL, in
        one attempt. Returns the delivery (as :meth:`deliveries` records it, ``kind``
        ``"redelivery"``), with the receiver's ``status`` (``None`` and ``error`` when it could
        not be reached). An ``InvalidRequestError`` when no event was sent for ``process_id``.
        """
        check_type("process_id", process_id, str, "a str")
        return self._core.redeliver(process_id)

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
        """POSTs a ``DealCreated`` of your choosing to ``url`` in one attempt, as the sandbox
        sends its own (the body of :func:`fxpay.testing.deal_created_request`, ``nonce`` as
        ``callback-nonce``). Returns the delivery (``kind`` ``"sent"``), also recorded in
        :meth:`deliveries`, with the receiver's ``status``."""
        check_type("url", url, str, "a str")
        body = event_json(status=status, process_id=process_id, deal_id=deal_id, errors=errors, nonce=nonce)
        return self._core.send_event(url, body, nonce)

    def stats(self) -> dict[str, Any]:
        """Request counters: at least ``requests`` and ``token_requests``."""
        return self._core.stats()

    # -- faults ----------------------------------------------------------------------------

    def fail_next(self, path: str, status: int, *, times: int = 1, retry_after: int | None = None) -> None:
        """Answers the next ``times`` requests to ``path`` with ``status`` without processing them.

        ``path`` is exact (``"/v1/payments/quotes"``), may start with a method
        (``"POST /v1/payments/deals"``) and may end with ``*`` to match a prefix (the rules
        are in docs/testing.md, "Faults"). A fault that never fires is reported when the
        sandbox is reset or closed (:class:`UnfiredFaultWarning`).
        """
        self._core.fail_next(path, status, times, retry_after)

    def drop_next(self, path: str, *, after_processing: bool) -> None:
        """Closes the connection of the next request to ``path``, before or after acting on it."""
        check_flag("after_processing", after_processing)
        self._core.drop_next(path, after_processing)

    def delay_next(self, path: str, seconds: float) -> None:
        """Delays the next request to ``path`` by ``seconds`` (real time)."""
        self._core.delay_next(path, check_seconds("seconds", seconds))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stops the sandbox. A fault that never fired is reported as an
        :class:`UnfiredFaultWarning` naming it."""
        if not self._closed:
            self._closed = True
            try:
                unfired = self._core.unfired_faults()
            except FxPayError:  # a forked child cannot inspect its parent's sandbox
                unfired = []
            self._core.shutdown()
            warn_unfired(unfired, "close()")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox(base_url={self.base_url!r})"

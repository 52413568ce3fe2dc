"""``fxpay.Client`` and ``fxpay.UserSession``: the typed facade over the Rust core."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import _fxpay
from .errors import ConfigurationError
from .models import (
    AuthorizationRequest,
    Beneficiary,
    Deal,
    DealBeneficiary,
    Quote,
    SpotDeal,
    Token,
    VirtualAccount,
)
from .stores import TokenStore

if TYPE_CHECKING:
    from .testing import Cassette

__all__ = ["Client", "UserSession"]


class Client:
    """A client of the payments and account-information service.

    Every network method has an awaitable ``*_async`` twin with the same arguments, result
    and exceptions. Blocking calls release the GIL while they wait; one client is safe to
    share between threads and asyncio tasks.

    ``base_url`` is the service address without ``/v1``; it must be ``https://`` except on
    loopback hosts. Payments calls fetch a client-credentials token on first use, reuse it
    and renew it before it expires; many concurrent first calls cause one token request.
    """

    __slots__ = ("_core", "_closed", "_cassette")

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        base_url: str,
        timeout: float = 30.0,
        max_retries: int = 2,
        token_store: TokenStore | None = None,
        user_agent: str | None = None,
        ca_bundle: str | os.PathLike[str] | None = None,
        cassette: Cassette | None = None,
    ) -> None:
        if ca_bundle is None:
            ca_bundle = os.environ.get("SSL_CERT_FILE") or None
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise ConfigurationError(f"timeout must be a number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise ConfigurationError(f"max_retries must be an int, got {max_retries!r}")
        try:
            seconds = float(timeout)
        except OverflowError:
            raise ConfigurationError(f"timeout must be a number of seconds up to 86400, got {timeout!r}") from None
        if token_store is not None and not (hasattr(token_store, "load") and hasattr(token_store, "save")):
            raise ConfigurationError("token_store must have load(key) and save(key, token)")
        if cassette is not None:
            from . import testing

            if not isinstance(cassette, testing.Cassette):
                raise TypeError(f"cassette must be a fxpay.testing.Cassette, got {type(cassette).__name__}")
        self._cassette = cassette
        self._core = _fxpay.CoreClient(
            client_id,
            client_secret,
            base_url,
            seconds,
            max_retries,
            token_store,
            user_agent,
            _path("ca_bundle", ca_bundle),
            cassette._core if cassette is not None else None,
        )
        self._closed = False

    @classmethod
    def from_env(cls, **kwargs: Any) -> Client:
        """A client from ``FXPAY_CLIENT_ID``, ``FXPAY_CLIENT_SECRET`` and ``FXPAY_BASE_URL``."""
        missing = [n for n in ("FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_BASE_URL") if not os.environ.get(n)]
        if missing:
            raise ConfigurationError(f"missing environment variable(s): {', '.join(missing)}")
        return cls(
            os.environ["FXPAY_CLIENT_ID"],
            os.environ["FXPAY_CLIENT_SECRET"],
            base_url=os.environ["FXPAY_BASE_URL"],
            **kwargs,
        )

    @property
    def base_url(self) -> str:
        return str(self._core.base_url)

    @property
    def client_id(self) -> str:
        return str(self._core.client_id)

    def __repr__(self) -> str:
        return f"Client(client_id={self.client_id!r}, base_url={self.base_url!r})"

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the client; its pooled connections close once no call uses them.

        A recording cassette is written now.
        """
        self._closed = True
        if self._cassette is not None:
            self._cassette.save()

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError("this Client is closed")

    # -- payments --------------------------------------------------------------------------

    def create_quote(self, *, buy_currency: str, buy_amount: Any, sell_currency: str, beneficiaries: int = 1) -> str:
        """Creates a quote and returns its id."""
        self._check_open()
        return self._core.create_quote(buy_currency, buy_amount, sell_currency, beneficiaries, False)  # type: ignore[no-any-return]

    async def create_quote_async(self, *, buy_currency: str, buy_amount: Any, sell_currency: str, beneficiaries: int = 1) -> str:
        self._check_open()
        return await self._core.create_quote(buy_currency, buy_amount, sell_currency, beneficiaries, True)  # type: ignore[no-any-return]

    def get_quote(self, quote_id: str) -> Quote:
        """Reads a quote."""
        self._check_open()
        return self._core.get_quote(quote_id, False)  # type: ignore[no-any-return]

    async def get_quote_async(self, quote_id: str) -> Quote:
        self._check_open()
        return await self._core.get_quote(quote_id, True)  # type: ignore[no-any-return]

    def create_beneficiary(self, beneficiary: Beneficiary) -> str:
        """Registers a beneficiary and returns its ``beneficiaryId``."""
        self._check_open()
        return self._core.create_beneficiary(_beneficiary_json(beneficiary), False)  # type: ignore[no-any-return]

    async def create_beneficiary_async(self, beneficiary: Beneficiary) -> str:
        self._check_open()
        return await self._core.create_beneficiary(_beneficiary_json(beneficiary), True)  # type: ignore[no-any-return]

    def create_deal(self, *, quote_id: str, funding_source: str, beneficiaries: Sequence[DealBeneficiary], channel: str | None = None) -> Deal:
        """Books a deal at once. It is never sent twice by the client's own retries."""
        self._check_open()
        return self._core.create_deal(quote_id, funding_source, _deal_beneficiaries(beneficiaries), channel, False)  # type: ignore[no-any-return]

    async def create_deal_async(self, *, quote_id: str, funding_source: str, beneficiaries: Sequence[DealBeneficiary], channel: str | None = None) -> Deal:
        self._check_open()
        return await self._core.create_deal(quote_id, funding_source, _deal_beneficiaries(beneficiaries), channel, True)  # type: ignore[no-any-return]

    def create_spot_deal(
        self,
        *,
        quote_id: str,
        funding_source: str,
        beneficiaries: Sequence[DealBeneficiary],
        channel: str | None = None,
        callback_url: str | None = None,
        callback_nonce: str | None = None,
    ) -> SpotDeal:
        """Starts a spot deal; its outcome arrives as a ``DealCreated`` notification.

        With ``callback_url`` and no ``callback_nonce`` a nonce of 256 random bits is made and
        returned in the result: store it next to ``process_id`` to verify the notification.
        """
        self._check_open()
        return self._core.create_spot_deal(  # type: ignore[no-any-return]
            quote_id, funding_source, _deal_beneficiaries(beneficiaries), channel, callback_url, callback_nonce, False
        )

    async def create_spot_deal_async(
        self,
        *,
        quote_id: str,
        funding_source: str,
        beneficiaries: Sequence[DealBeneficiary],
        channel: str | None = None,
        callback_url: str | None = None,
        callback_nonce: str | None = None,
    ) -> SpotDeal:
        self._check_open()
        return await self._core.create_spot_deal(  # type: ignore[no-any-return]
            quote_id, funding_source, _deal_beneficiaries(beneficiaries), channel, callback_url, callback_nonce, True
        )

    # -- account information ---------------------------------------------------------------

    def authorization_url(
        self, redirect_uri: str, *, state: str | None = None, scope: str = "gca-aisp", pkce: bool = True
    ) -> AuthorizationRequest:
        """The URL to send the user's browser to, with a fresh random state (256 bits).

        With ``pkce`` (the default) the URL carries an RFC 7636 ``S256`` ``code_challenge``;
        its ``code_verifier`` stays in the returned request (``to_dict()`` keeps it, ``repr``
        never shows it) and :meth:`exchange_code` sends it.
        """
        url, st, ru, verifier = self._core.authorization_url(redirect_uri, state, scope, pkce)
        return AuthorizationRequest(url=url, state=st, redirect_uri=ru, code_verifier=verifier)

    def exchange_code(self, auth: AuthorizationRequest, callback: str) -> Token:
        """Checks the callback (state, ``error=``) and trades its code (and PKCE verifier) for a user token."""
        self._check_open()
        return self._core.exchange_code(*_auth_fields(auth), callback, False)  # type: ignore[no-any-return]

    async def exchange_code_async(self, auth: AuthorizationRequest, callback: str) -> Token:
        self._check_open()
        return await self._core.exchange_code(*_auth_fields(auth), callback, True)  # type: ignore[no-any-return]

    def refresh_token(self, refresh_token: str) -> Token:
        """Trades a refresh token for a new token (the old refresh token is then spent)."""
        self._check_open()
        return self._core.refresh_token(refresh_token, False)  # type: ignore[no-any-return]

    async def refresh_token_async(self, refresh_token: str) -> Token:
        self._check_open()
        return await self._core.refresh_token(refresh_token, True)  # type: ignore[no-any-return]

    def user_session(self, token: Token, *, on_token: Callable[[Token], None] | None = None, key: str | None = None) -> UserSession:
        """A session over a user's token that refreshes it (with rotation) as needed.

        ``on_token(new)`` is called before a new token is first used: no request carries
        ``new`` before ``on_token(new)`` has returned. If it raises, the call fails with that
        exception and the session offers the same token again before its next use. With
        ``key`` (and a ``token_store`` on this client) refreshes are shared across processes
        under that key; a store that fails is passed over (the session refreshes on its own).
        """
        self._check_open()
        if on_token is not None and not callable(on_token):
            raise TypeError(f"on_token must be callable, not {type(on_token).__name__}")
        return UserSession(self._core.user_session(token, on_token, key), self)


class UserSession:
    """A user's account-information session (scope ``gca-aisp``).

    Close it with :meth:`close` (or use it as a context manager, ``with`` or ``async with``)
    when the user's work is done: later calls raise :class:`fxpay.ConfigurationError`. Closing
    a session leaves its client open; closing the client ends its sessions too.
    """

    __slots__ = ("_core", "_client", "_closed")

    def __init__(self, core: Any, client: Client | None = None) -> None:
        self._core = core
        self._client = client
        self._closed = False

    @property
    def token(self) -> Token:
        """The current token."""
        return self._core.token  # type: ignore[no-any-return]

    @property
    def closed(self) -> bool:
        return self._closed

    def list_virtual_accounts(self) -> list[VirtualAccount]:
        self._check_open()
        return self._core.list_virtual_accounts(False)  # type: ignore[no-any-return]

    async def list_virtual_accounts_async(self) -> list[VirtualAccount]:
        self._check_open()
        return await self._core.list_virtual_accounts(True)  # type: ignore[no-any-return]

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Ends the session; a call already under way completes. Closing twice is harmless."""
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> UserSession:
        self._check_open()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> UserSession:
        self._check_open()
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError("this UserSession is closed")
        if self._client is not None:
            self._client._check_open()

    def __repr__(self) -> str:
        closed = ", closed" if self._closed else ""
        return f"UserSession(token={self.token!r}{closed})"


def _auth_fields(auth: AuthorizationRequest) -> tuple[str, str, str, str | None]:
    if not isinstance(auth, AuthorizationRequest):
        raise TypeError(f"auth must be a fxpay.AuthorizationRequest, got {type(auth).__name__}")
    return auth.url, auth.state, auth.redirect_uri, auth.code_verifier


def _path(name: str, value: str | os.PathLike[str] | None) -> str | None:
    if value is None:
        return None
    try:
        path = os.fspath(value)
    except TypeError:
        raise TypeError(f"{name} must be a str or an os.PathLike, not {type(value).__name__}") from None
    return os.fsdecode(path)


def _beneficiary_json(b: Beneficiary) -> str:
    if not isinstance(b, Beneficiary):
        from .errors import InvalidRequestError

        raise InvalidRequestError(f"beneficiary must be a fxpay.Beneficiary, got {type(b).__name__}")
    import json  # here, not at the top: `import fxpay` stays cheap

    return json.dumps(b.to_dict())


def _deal_beneficiaries(items: Sequence[DealBeneficiary]) -> Sequence[DealBeneficiary]:
    from .errors import InvalidRequestError

    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise InvalidRequestError("beneficiaries must be a sequence of fxpay.DealBeneficiary")
    for i, b in enumerate(items):
        if not isinstance(b, DealBeneficiary):
            raise InvalidRequestError(f"beneficiaries[{i}] must be a fxpay.DealBeneficiary, got {type(b).__name__}")
    return items

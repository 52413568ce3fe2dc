"""The authorization-code and refresh grants are never sent twice once a byte may have reached
the service; a lost answer is a TransportError / TimeoutError, never a misleading OAuthError.
Client-credentials requests, and grants whose connection never opened, are still retried."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

import fxpay

TOKEN = "/v1/oauth/token"


def login(sb: Any, c: fxpay.Client) -> tuple[fxpay.AuthorizationRequest, str]:
    auth = c.authorization_url(sb.redirect_uri)
    return auth, sb.approve(auth.url)


def token_requests(sb: Any) -> int:
    return int(sb.stats()["token_requests"])


def issued(sb: Any, grant: str) -> int:
    return int(sb.stats()["tokens_issued"][grant])


def test_lost_answer_to_a_code_exchange_is_a_transport_error(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    auth, callback = login(fxpay_sandbox, fxpay_client)
    before = token_requests(fxpay_sandbox)
    fxpay_sandbox.drop_next(TOKEN, after_processing=True)
    with pytest.raises(fxpay.TransportError) as ei:
        fxpay_client.exchange_code(auth, callback)
    assert not isinstance(ei.value, fxpay.OAuthError)
    # Sent once: the service spent the code on it, and nobody replayed it.
    assert token_requests(fxpay_sandbox) - before == 1
    assert issued(fxpay_sandbox, "authorization_code") == 1


async def test_lost_answer_to_a_code_exchange_async(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    auth, callback = login(fxpay_sandbox, fxpay_client)
    before = token_requests(fxpay_sandbox)
    fxpay_sandbox.drop_next(TOKEN, after_processing=True)
    with pytest.raises(fxpay.TransportError):
        await fxpay_client.exchange_code_async(auth, callback)
    assert token_requests(fxpay_sandbox) - before == 1


def test_connection_dropped_before_processing_is_not_replayed_either(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    # The request reached the service before the connection closed: the client cannot know it
    # was not acted on, so it does not send the code again.
    auth, callback = login(fxpay_sandbox, fxpay_client)
    before = token_requests(fxpay_sandbox)
    fxpay_sandbox.drop_next(TOKEN, after_processing=False)
    with pytest.raises(fxpay.TransportError):
        fxpay_client.exchange_code(auth, callback)
    assert token_requests(fxpay_sandbox) - before == 1
    # Not acted on, so the code is still good for a deliberate second try.
    assert fxpay_client.exchange_code(auth, callback).access_token


def test_timed_out_code_exchange_is_a_timeout_error(fxpay_sandbox: Any) -> None:
    with fxpay_sandbox.client(timeout=0.3) as c:
        auth, callback = login(fxpay_sandbox, c)
        before = token_requests(fxpay_sandbox)
        fxpay_sandbox.delay_next(TOKEN, 3.0)  # 10x the client's timeout
        with pytest.raises(fxpay.TimeoutError):
            c.exchange_code(auth, callback)
        assert token_requests(fxpay_sandbox) - before == 1


def test_lost_answer_to_a_refresh_is_a_transport_error(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    before = token_requests(fxpay_sandbox)
    fxpay_sandbox.drop_next(TOKEN, after_processing=True)
    with pytest.raises(fxpay.TransportError) as ei:
        fxpay_client.refresh_token(token.refresh_token)
    assert not isinstance(ei.value, fxpay.OAuthError)
    assert token_requests(fxpay_sandbox) - before == 1
    assert issued(fxpay_sandbox, "refresh_token") == 1


@pytest.mark.parametrize("aio", [False, True], ids=["blocking", "async"])
async def test_lost_answer_to_a_session_refresh(fxpay_sandbox: Any, fxpay_client: fxpay.Client, aio: bool) -> None:
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    stale = fxpay.Token.from_dict({**token.to_dict(), "expires_at": 0})
    session = fxpay_client.user_session(stale)
    before = token_requests(fxpay_sandbox)
    fxpay_sandbox.drop_next(TOKEN, after_processing=True)
    with pytest.raises(fxpay.TransportError) as ei:
        await session.list_virtual_accounts_async() if aio else session.list_virtual_accounts()
    assert not isinstance(ei.value, fxpay.OAuthError)
    assert token_requests(fxpay_sandbox) - before == 1
    assert fxpay_sandbox.stats()["paths"]["GET /v1/gca/virtual-accounts"] == 0


def test_client_credentials_are_still_retried(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    fxpay_sandbox.drop_next(TOKEN, after_processing=True)
    fxpay_sandbox.fail_next(TOKEN, 503)
    assert fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    # Lost answer, 503, then the token: three requests for one token.
    assert token_requests(fxpay_sandbox) == 3
    assert issued(fxpay_sandbox, "client_credentials") == 2


def test_a_grant_that_never_connected_is_retried(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on: every connect is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = fxpay.Client("id", "secret", base_url=f"http://127.0.0.1:{port}", max_retries=2)
    auth = c.authorization_url("https://app.example/cb", state="s")
    caplog.set_level(logging.DEBUG, logger="fxpay")
    with pytest.raises(fxpay.TransportError):
        c.exchange_code(auth, "code=abc&state=s")
    with pytest.raises(fxpay.TransportError):
        c.refresh_token("r-123")
    attempts = [r.args[3] for r in caplog.records if r.name == "fxpay" and r.args and r.args[1] == "/oauth/token"]
    # Nothing was sent, so each grant is tried 1 + max_retries times.
    assert attempts == [1, 2, 3, 1, 2, 3]
    c.close()

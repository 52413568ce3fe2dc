"""Authorization code, refresh with rotation, user sessions and virtual accounts."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal

import pytest

import fxpay

from conftest import all_at_once, login


def test_code_exchange_and_virtual_accounts(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    auth, callback = login(fxpay_sandbox, fxpay_client)
    assert callback.startswith(fxpay_sandbox.redirect_uri)
    token = fxpay_client.exchange_code(auth, callback)
    assert token.scope == "gca-aisp"
    assert token.token_type == "Bearer"
    assert token.refresh_token
    assert token.expires_in == 3599
    assert token.expires_at.tzinfo is not None
    assert token.access_token not in repr(token)
    assert token.refresh_token not in repr(token)
    session = fxpay_client.user_session(token)
    accounts = session.list_virtual_accounts()
    assert len(accounts) >= 1
    va = accounts[0]
    assert isinstance(va, fxpay.VirtualAccount)
    assert isinstance(va["currency"], str)
    assert len(va["currency"]) == 3
    assert va.get("no-such-field") is None
    assert va.raw == dict(va)
    balances = [v for v in va.values() if isinstance(v, Decimal)]
    assert balances, "a balance comes back as an exact Decimal"
    assert pickle.loads(pickle.dumps(va)) == va


def test_virtual_accounts_become_records_as_they_came(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    # A virtual account is a mapping of the service's own fields: its record is those fields,
    # one row per account, in order, amounts still Decimal.
    auth, callback = login(fxpay_sandbox, fxpay_client)
    session = fxpay_client.user_session(fxpay_client.exchange_code(auth, callback))
    accounts = session.list_virtual_accounts()
    assert len(accounts) >= 1
    rows = fxpay.to_records(accounts)
    assert rows == [va.to_dict() for va in accounts]
    assert rows == [dict(va) for va in accounts]
    assert any(isinstance(v, Decimal) for v in rows[0].values())


async def test_code_exchange_async(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    callback = fxpay_sandbox.approve(auth.url)
    query = callback.split("?", 1)[1]
    token = await fxpay_client.exchange_code_async(auth, query)  # a bare query string works too
    session = fxpay_client.user_session(token)
    accounts = await session.list_virtual_accounts_async()
    assert accounts
    assert all(isinstance(a, fxpay.VirtualAccount) for a in accounts)
    refreshed = await fxpay_client.refresh_token_async(token.refresh_token)
    assert refreshed.access_token != token.access_token


def test_denied_consent_is_an_oauth_error(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    callback = fxpay_sandbox.approve(auth.url, allow=False)
    with pytest.raises(fxpay.OAuthError) as ei:
        fxpay_client.exchange_code(auth, callback)
    assert ei.value.error == "access_denied"
    assert fxpay_sandbox.stats()["token_requests"] == 0


def test_state_mismatch(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    _, callback = login(fxpay_sandbox, fxpay_client)
    other = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    with pytest.raises(fxpay.StateMismatchError):
        fxpay_client.exchange_code(other, callback)
    assert fxpay_sandbox.stats()["token_requests"] == 0


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https:///nohost",
        "https:/nohost",
        "https://:8443/cb",
        "https://app.example/cb\r\nX-Injected: 1",
        "https://app.example/c\nb",
        "https://app.example/c\rb",
        "https://app.example/c\tb",
        "https://app.example/c b",
        " https://app.example/cb",
        "https://app.example/cb ",
        "https://app.example/cb\x00",
        "https://app.example/cb\x7f",
        "https://app.example/c\u00a0b",
        "https://app.example/c\u2028b",
        "com.example.app:/o\nauth",
    ],
)
def test_malformed_redirect_uris_are_configuration_errors(fxpay_sandbox, fxpay_client, redirect_uri: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(fxpay.ConfigurationError, match="redirect_uri"):
        fxpay_client.authorization_url(redirect_uri)
    assert fxpay_sandbox.stats()["requests"] == 0


@pytest.mark.parametrize("repeat", ["state=WRONG&code=x&state={s}", "state={s}&code=x&state=WRONG", "state={s}&state={s}&code=x"])
def test_a_repeated_state_is_refused_before_any_request(fxpay_sandbox, fxpay_client, repeat: str) -> None:  # type: ignore[no-untyped-def]
    auth, callback = login(fxpay_sandbox, fxpay_client)
    code = callback.split("code=", 1)[1].split("&", 1)[0]
    before = fxpay_sandbox.stats()["token_requests"]
    forged = f"{fxpay_sandbox.redirect_uri}?" + repeat.format(s=auth.state).replace("code=x", f"code={code}")
    with pytest.raises(fxpay.StateMismatchError):
        fxpay_client.exchange_code(auth, forged)
    assert fxpay_sandbox.stats()["token_requests"] == before
    # The code was not redeemed: the genuine callback still works.
    assert fxpay_client.exchange_code(auth, callback).access_token


def test_a_repeated_code_is_refused_before_any_request(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    auth, callback = login(fxpay_sandbox, fxpay_client)
    code = callback.split("code=", 1)[1].split("&", 1)[0]
    before = fxpay_sandbox.stats()["token_requests"]
    for forged in (f"?code=other&state={auth.state}&code={code}", f"?code={code}&state={auth.state}&code={code}"):
        with pytest.raises(fxpay.OAuthError, match="repeats the parameter") as ei:
            fxpay_client.exchange_code(auth, forged)
        assert ei.value.error == "invalid_request"
    assert fxpay_sandbox.stats()["token_requests"] == before
    assert fxpay_client.exchange_code(auth, callback).access_token


def test_codes_are_single_use(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    auth, callback = login(fxpay_sandbox, fxpay_client)
    fxpay_client.exchange_code(auth, callback)
    with pytest.raises(fxpay.OAuthError) as ei:
        fxpay_client.exchange_code(auth, callback)
    assert ei.value.error == "invalid_grant"
    assert ei.value.status == 400


def test_given_state_is_used(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, state="s-123")
    assert auth.state == "s-123"
    assert "s-123" in fxpay_sandbox.approve(auth.url)


def test_refresh_rotates(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    t2 = fxpay_client.refresh_token(token.refresh_token)
    assert t2.refresh_token
    assert t2.refresh_token != token.refresh_token
    with pytest.raises(fxpay.OAuthError) as ei:
        fxpay_client.refresh_token(token.refresh_token)
    assert ei.value.error == "invalid_grant"
    assert token.refresh_token not in str(ei.value)
    assert fxpay_client.refresh_token(t2.refresh_token).access_token


def test_session_refreshes_an_expired_token_before_use(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    stale = fxpay.Token.from_dict({**token.to_dict(), "expires_at": 0})
    seen: list[fxpay.Token] = []
    requests_at_callback: list[int] = []

    def on_token(t: fxpay.Token) -> None:
        seen.append(t)
        requests_at_callback.append(fxpay_sandbox.stats()["requests"])

    session = fxpay_client.user_session(stale, on_token=on_token)
    before = fxpay_sandbox.stats()["requests"]
    assert session.list_virtual_accounts()
    assert len(seen) == 1
    assert seen[0].refresh_token != token.refresh_token
    assert session.token == seen[0]
    # on_token ran after the refresh request and before the virtual-accounts request.
    assert requests_at_callback == [before + 1]
    assert fxpay_sandbox.stats()["requests"] == before + 2


def test_session_renews_once_on_401(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    seen: list[fxpay.Token] = []
    session = fxpay_client.user_session(token, on_token=seen.append)
    fxpay_sandbox.advance(3600)  # the sandbox now refuses the access token; the client does not know
    accounts = session.list_virtual_accounts()
    assert accounts
    assert len(seen) == 1


def test_concurrent_session_calls_refresh_once(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    seen: list[fxpay.Token] = []
    session = fxpay_client.user_session(token, on_token=seen.append)
    fxpay_sandbox.advance(3600)
    before = fxpay_sandbox.stats()["token_requests"]
    assert len(all_at_once(16, session.list_virtual_accounts)) == 16
    assert fxpay_sandbox.stats()["token_requests"] - before == 1
    assert len(seen) == 1


def test_token_round_trips_through_dict() -> None:
    t = fxpay.Token(
        access_token="a",
        token_type="Bearer",
        expires_in=3599,
        expires_at=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc),
        refresh_token="r",
        scope="gca-aisp",
    )
    assert fxpay.Token.from_dict(t.to_dict()) == t
    assert pickle.loads(pickle.dumps(t)) == t

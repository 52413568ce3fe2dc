"""The sandbox's OAuth side over plain HTTP (httpx): token endpoint, authorize pages, scopes."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

import fxpay

from sandbox_http_support import (
    FORM,
    NATIVE_REDIRECT_URI,
    auth_query,
    basic,
    bearer,
    browser_code,
    browser_login,
    errors_of,
    hidden_fields,
    http,
    payments_token,
    token_request,
    user_tokens,
)


def cc(sb: Any, **extra: str) -> dict[str, str]:
    d = {"grant_type": "client_credentials", "client_id": sb.client_id, "client_secret": sb.client_secret}
    d.update(extra)
    return d


def code_grant(sb: Any, code: str, redirect_uri: str | None = None, **extra: str) -> dict[str, str]:
    d = {
        "grant_type": "authorization_code",
        "client_id": sb.client_id,
        "client_secret": sb.client_secret,
        "code": code,
        "redirect_uri": redirect_uri or sb.redirect_uri,
        "scope": "gca-aisp",
    }
    d.update(extra)
    return d


def refresh_grant(sb: Any, refresh: str) -> dict[str, str]:
    return {
        "grant_type": "refresh_token",
        "client_id": sb.client_id,
        "client_secret": sb.client_secret,
        "scope": "gca-aisp",
        "refresh_token": refresh,
    }


def oauth_error(r: Any, status: int, error: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == error, body
    assert isinstance(body["error_description"], str)
    assert body["error_description"]
    assert r.headers["cache-control"] == "no-store"


def va_status(c: Any, token: str) -> int:
    return int(c.get("/v1/gca/virtual-accounts", headers=bearer(token)).status_code)


# -- token endpoint: the three grants ---------------------------------------------------------


def test_client_credentials_form_fields(fxpay_sandbox: Any) -> None:
    with http(fxpay_sandbox) as c:
        r = token_request(c, cc(fxpay_sandbox, scope="payments"))
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["pragma"] == "no-cache"
        body = r.json()
        assert set(body) == {"access_token", "expires_in", "token_type", "scope"}
        assert "refresh_token" not in body
        assert body["expires_in"] == 3599
        assert body["token_type"] == "Bearer"
        assert body["scope"] == "payments"
        assert len(body["access_token"]) >= 20
        # scope may be left out: the grant gives payments
        r2 = token_request(c, cc(fxpay_sandbox))
        assert r2.status_code == 200
        assert r2.json()["scope"] == "payments"
        assert r2.json()["access_token"] != body["access_token"]


def test_client_credentials_with_basic_auth(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = token_request(
            c,
            {"grant_type": "client_credentials", "scope": "payments"},
            {"Authorization": basic(sb.client_id, sb.client_secret)},
        )
        assert r.status_code == 200, r.text
        token = r.json()["access_token"]
        assert c.get("/v1/payments/quotes/00000000-0000-4000-8000-000000000000", headers=bearer(token)).status_code == 404
        # client_id in the form as well is fine when it matches
        r = token_request(
            c,
            {"grant_type": "client_credentials", "client_id": sb.client_id},
            {"Authorization": basic(sb.client_id, sb.client_secret)},
        )
        assert r.status_code == 200
        # a differing client_id, or the secret both ways, is invalid_request
        r = token_request(
            c,
            {"grant_type": "client_credentials", "client_id": "someone-else"},
            {"Authorization": basic(sb.client_id, sb.client_secret)},
        )
        oauth_error(r, 400, "invalid_request")
        r = token_request(
            c,
            {"grant_type": "client_credentials", "client_secret": sb.client_secret},
            {"Authorization": basic(sb.client_id, sb.client_secret)},
        )
        oauth_error(r, 400, "invalid_request")
        # wrong secret by Basic: 401 invalid_client with a Basic challenge
        r = token_request(c, {"grant_type": "client_credentials"}, {"Authorization": basic(sb.client_id, "nope")})
        oauth_error(r, 401, "invalid_client")
        assert r.headers["www-authenticate"].startswith("Basic ")
        r = token_request(c, {"grant_type": "client_credentials"}, {"Authorization": "Basic !!!not-base64"})
        oauth_error(r, 401, "invalid_client")


def test_token_endpoint_is_form_only(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = c.post("/v1/oauth/token", json=cc(sb))
        oauth_error(r, 400, "invalid_request")
        r = c.post("/v1/oauth/token", content=urlencode(cc(sb)), headers={"Content-Type": "text/plain"})
        oauth_error(r, 400, "invalid_request")
        r = c.post("/v1/oauth/token", content=urlencode(cc(sb)))  # no content type at all
        oauth_error(r, 400, "invalid_request")
        r = c.get("/v1/oauth/token")
        assert r.status_code == 405
        assert errors_of(r) == [("resource:route:3003", "")]
        assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 0


@pytest.mark.parametrize(
    ("data", "status", "error"),
    [
        ({"client_id": "X", "client_secret": "Y"}, 400, "invalid_request"),  # no grant_type
        ({"grant_type": "password", "username": "u", "password": "p"}, 400, "unsupported_grant_type"),
        ({"grant_type": "client_credentials", "scope": "gca-aisp"}, 400, "invalid_scope"),
        ({"grant_type": "client_credentials", "scope": "payments admin"}, 400, "invalid_scope"),
        ({"grant_type": "client_credentials", "client_secret": "wrong"}, 401, "invalid_client"),
        ({"grant_type": "client_credentials", "client_id": "nobody"}, 401, "invalid_client"),
        ({"grant_type": "client_credentials", "client_secret": ""}, 401, "invalid_client"),
        ({"grant_type": "authorization_code", "code": "no-such-code"}, 400, "invalid_grant"),
        ({"grant_type": "authorization_code", "redirect_uri": "https://app.example.test/callback"}, 400, "invalid_request"),
        ({"grant_type": "refresh_token", "refresh_token": "no-such-token"}, 400, "invalid_grant"),
        ({"grant_type": "refresh_token"}, 400, "invalid_request"),
    ],
)
def test_rfc6749_errors(fxpay_sandbox: Any, data: dict[str, str], status: int, error: str) -> None:
    sb = fxpay_sandbox
    form = {"client_id": sb.client_id, "client_secret": sb.client_secret}
    if data.get("grant_type") == "authorization_code" and "redirect_uri" not in data:
        form["redirect_uri"] = sb.redirect_uri
    form.update(data)
    with http(sb) as c:
        r = token_request(c, form)
        oauth_error(r, status, error)
        if status == 401:
            assert "www-authenticate" not in r.headers  # form credentials: no Basic challenge


def test_repeated_parameter_is_invalid_request(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        body = urlencode(cc(sb)) + "&grant_type=client_credentials"
        oauth_error(c.post("/v1/oauth/token", content=body, headers=FORM), 400, "invalid_request")


def test_client_without_redirect_uris_is_unauthorized_for_user_grants(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    sb.register_client("machine-only", "machine-secret", [])
    with http(sb) as c:
        base = {"client_id": "machine-only", "client_secret": "machine-secret"}
        r = token_request(c, {**base, "grant_type": "authorization_code", "code": "x", "redirect_uri": sb.redirect_uri})
        oauth_error(r, 400, "unauthorized_client")
        r = token_request(c, {**base, "grant_type": "refresh_token", "refresh_token": "x"})
        oauth_error(r, 400, "unauthorized_client")
        assert payments_token(c, "machine-only", "machine-secret")


def test_authorization_code_grant_and_rotation(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        code = browser_code(c, sb)
        r = token_request(c, code_grant(sb, code))
        assert r.status_code == 200, r.text
        first = r.json()
        assert set(first) == {"access_token", "expires_in", "token_type", "scope", "refresh_token"}
        assert (first["expires_in"], first["token_type"], first["scope"]) == (3599, "Bearer", "gca-aisp")
        assert va_status(c, first["access_token"]) == 200

        r = token_request(c, refresh_grant(sb, first["refresh_token"]))
        assert r.status_code == 200, r.text
        second = r.json()
        assert set(second) == set(first)
        assert second["refresh_token"] != first["refresh_token"]
        assert second["access_token"] != first["access_token"]
        assert va_status(c, second["access_token"]) == 200

        # the used refresh token is refused now
        oauth_error(token_request(c, refresh_grant(sb, first["refresh_token"])), 400, "invalid_grant")
        r = token_request(c, refresh_grant(sb, second["refresh_token"]))
        assert r.status_code == 200
        third = r.json()
        # a superseded one too (second was replaced by third)
        oauth_error(token_request(c, refresh_grant(sb, second["refresh_token"])), 400, "invalid_grant")
        assert token_request(c, refresh_grant(sb, third["refresh_token"])).status_code == 200
        stats = sb.stats()["tokens_issued"]
        assert stats == {"client_credentials": 0, "authorization_code": 1, "refresh_token": 3}


def test_a_second_consent_supersedes_the_first_consents_refresh_token(fxpay_sandbox: Any) -> None:
    # Spec 5.5: the refresh token used must be the one of the most recent token response.
    # Two consents of one user to one client (A, then B): B's token response supersedes A's
    # last refresh token, even though A's was never used.
    sb = fxpay_sandbox
    with http(sb) as c:
        a = user_tokens(c, sb)
        r = token_request(c, refresh_grant(sb, a["refresh_token"]))
        assert r.status_code == 200, r.text
        a_last = r.json()["refresh_token"]
        b = user_tokens(c, sb)
        oauth_error(token_request(c, refresh_grant(sb, a_last)), 400, "invalid_grant")
        # B's refresh token is the current one, and refreshing with it keeps A superseded.
        r = token_request(c, refresh_grant(sb, b["refresh_token"]))
        assert r.status_code == 200, r.text
        oauth_error(token_request(c, refresh_grant(sb, a_last)), 400, "invalid_grant")
        # A's access token stays valid until it expires: only refresh tokens are superseded.
        assert va_status(c, a["access_token"]) == 200


def test_another_clients_consent_supersedes_nothing(fxpay_sandbox: Any) -> None:
    # The rule is per client and user: a token response to another client leaves this
    # client's refresh token current.
    sb = fxpay_sandbox
    with http(sb) as c:
        mine = user_tokens(c, sb)
        sb.register_client("other-app-2", "other-secret-2", [sb.redirect_uri])
        callback = sb.approve(f"{sb.base_url}/v1/oauth/authorize?{urlencode(auth_query(sb, client_id='other-app-2'))}")
        code = parse_qs(urlsplit(callback).query)["code"][0]
        r = token_request(
            c,
            {
                "grant_type": "authorization_code",
                "client_id": "other-app-2",
                "client_secret": "other-secret-2",
                "code": code,
                "redirect_uri": sb.redirect_uri,
            },
        )
        assert r.status_code == 200, r.text
        assert token_request(c, refresh_grant(sb, mine["refresh_token"])).status_code == 200


def test_refresh_token_of_another_client_is_invalid_grant(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    sb.register_client("other-app", "other-secret", [sb.redirect_uri])
    with http(sb) as c:
        tokens = user_tokens(c, sb)
        r = token_request(
            c,
            {
                "grant_type": "refresh_token",
                "client_id": "other-app",
                "client_secret": "other-secret",
                "refresh_token": tokens["refresh_token"],
            },
        )
        oauth_error(r, 400, "invalid_grant")
        # the rightful owner can still use it
        assert token_request(c, refresh_grant(sb, tokens["refresh_token"])).status_code == 200


def test_refresh_with_payments_scope_is_invalid_scope(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        tokens = user_tokens(c, sb)
        form = refresh_grant(sb, tokens["refresh_token"])
        form["scope"] = "payments"
        oauth_error(token_request(c, form), 400, "invalid_scope")


def test_codes_are_single_use_and_replay_revokes(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        code = browser_code(c, sb)
        r = token_request(c, code_grant(sb, code))
        assert r.status_code == 200
        tokens = r.json()
        assert va_status(c, tokens["access_token"]) == 200
        oauth_error(token_request(c, code_grant(sb, code)), 400, "invalid_grant")
        # replaying the code revoked what it gave
        assert va_status(c, tokens["access_token"]) == 401
        oauth_error(token_request(c, refresh_grant(sb, tokens["refresh_token"])), 400, "invalid_grant")


def test_codes_are_bound_to_client_and_redirect_uri(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    sb.register_client("other-app", "other-secret", [sb.redirect_uri])
    with http(sb) as c:
        code = browser_code(c, sb)
        other = code_grant(sb, code, client_id="other-app", client_secret="other-secret")
        oauth_error(token_request(c, other), 400, "invalid_grant")
        # a different (even registered) redirect URI is refused
        oauth_error(token_request(c, code_grant(sb, code, NATIVE_REDIRECT_URI)), 400, "invalid_grant")
        oauth_error(token_request(c, code_grant(sb, code, sb.redirect_uri + "/")), 400, "invalid_grant")
        r = token_request(c, code_grant(sb, code, sb.redirect_uri))
        assert r.status_code == 200, r.text


def test_code_expires_after_600_seconds(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        code = browser_code(c, sb)
        sb.advance(601)
        r = token_request(c, code_grant(sb, code))
        oauth_error(r, 400, "invalid_grant")
        assert "expired" in r.json()["error_description"]


def test_access_token_lives_3599_seconds(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        token = payments_token(c, sb.client_id, sb.client_secret)
        path = "/v1/payments/quotes/00000000-0000-4000-8000-000000000000"
        sb.advance(3598)
        assert c.get(path, headers=bearer(token)).status_code == 404  # still valid: not found
        sb.advance(1.5)
        r = c.get(path, headers=bearer(token))
        assert r.status_code == 401
        assert errors_of(r) == [("auth:token:4002", "Authorization")]
        assert "expired" in r.json()["errors"][0]["message"]
        assert 'error="invalid_token"' in r.headers["www-authenticate"]


def test_user_tokens_expire_on_the_sandbox_clock(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        tokens = user_tokens(c, sb)
        sb.advance(3598)
        assert va_status(c, tokens["access_token"]) == 200
        sb.advance(1.5)
        assert va_status(c, tokens["access_token"]) == 401
        # the refresh token outlives it: 2592000 s from issue
        sb.advance(2592000 - 3599 - 1.5 - 1)
        r = token_request(c, refresh_grant(sb, tokens["refresh_token"]))
        assert r.status_code == 200, r.text
        fresh = r.json()
        assert va_status(c, fresh["access_token"]) == 200
        sb.advance(2592000 + 1)
        oauth_error(token_request(c, refresh_grant(sb, fresh["refresh_token"])), 400, "invalid_grant")


def test_refresh_token_expires_at_2592000_seconds(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        tokens = user_tokens(c, sb)
        sb.advance(2592000.5)
        oauth_error(token_request(c, refresh_grant(sb, tokens["refresh_token"])), 400, "invalid_grant")


# -- authorize, login and consent pages -------------------------------------------------------


def test_login_page(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = c.get("/v1/oauth/authorize", params=auth_query(sb, state="a b&c"))
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert r.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert '<form id="login-form" method="post" action="/v1/oauth/login">' in r.text
        assert 'name="username"' in r.text
        assert 'type="password"' in r.text
        assert hidden_fields(r.text) == {
            "response_type": "code",
            "client_id": sb.client_id,
            "redirect_uri": sb.redirect_uri,
            "scope": "gca-aisp",
            "state": "a b&c",
        }


def test_login_page_escapes_what_it_echoes(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = c.get("/v1/oauth/authorize", params=auth_query(sb, state='"><script>x</script>'))
        assert r.status_code == 200
        assert "<script>x" not in r.text
        assert "&quot;&gt;&lt;script&gt;" in r.text
        assert '<label for="username">' in r.text


def test_login_form_without_password_or_not_a_form_is_an_error_page(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        form = hidden_fields(c.get("/v1/oauth/authorize", params=auth_query(sb)).text)
        r = c.post("/v1/oauth/login", content=urlencode({**form, "username": sb.username}), headers=FORM)
        assert r.status_code == 400
        assert "location" not in r.headers
        r = c.post("/v1/oauth/login", content="{}", headers={"Content-Type": "application/json"})
        assert r.status_code == 400
        assert "<!DOCTYPE html>" in r.text


def test_wrong_password(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        page = c.get("/v1/oauth/authorize", params=auth_query(sb))
        form = hidden_fields(page.text)
        for user, pw in [(sb.username, "wrong"), ("nobody", sb.password)]:
            r = c.post("/v1/oauth/login", content=urlencode({**form, "username": user, "password": pw}), headers=FORM)
            assert r.status_code == 401
            assert "Invalid username or password." in r.text
            assert 'id="login-form"' in r.text
            assert "set-cookie" not in r.headers
            assert hidden_fields(r.text) == form


def test_consent_allow_redirects_with_code_and_state(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        consent = browser_login(c, sb, auth_query(sb, state="xyz/1"))
        assert 'id="consent-form"' in consent.text
        assert "gca-aisp" in consent.text
        assert "fxpay_sandbox_session=" in consent.headers["set-cookie"]
        form = hidden_fields(consent.text)
        assert list(form) == ["consent_id"]
        r = c.post("/v1/oauth/consent", content=urlencode({**form, "decision": "allow"}), headers=FORM)
        assert r.status_code == 302
        loc = urlsplit(r.headers["location"])
        assert f"{loc.scheme}://{loc.netloc}{loc.path}" == sb.redirect_uri
        query = parse_qs(loc.query)
        assert set(query) == {"code", "state"}
        assert query["state"] == ["xyz/1"]
        # the consent id is answered: a second answer is a 404 page, not a redirect
        r2 = c.post("/v1/oauth/consent", content=urlencode({**form, "decision": "allow"}), headers=FORM)
        assert r2.status_code == 404
        assert "location" not in r2.headers
        assert token_request(c, code_grant(sb, query["code"][0])).status_code == 200


def test_consent_deny_redirects_with_access_denied(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        consent = browser_login(c, sb, auth_query(sb, state="s-9"))
        form = hidden_fields(consent.text)
        r = c.post("/v1/oauth/consent", content=urlencode({**form, "decision": "deny"}), headers=FORM)
        assert r.status_code == 302
        loc = urlsplit(r.headers["location"])
        query = parse_qs(loc.query)
        assert query["error"] == ["access_denied"]
        assert query["state"] == ["s-9"]
        assert "code" not in query


def test_consent_needs_the_session_cookie(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        consent = browser_login(c, sb, auth_query(sb))
        form = hidden_fields(consent.text)
    with http(sb) as fresh:  # no cookie jar from the login
        r = fresh.post("/v1/oauth/consent", content=urlencode({**form, "decision": "allow"}), headers=FORM)
        assert r.status_code == 403
        assert "location" not in r.headers


def test_approve_helper_matches_the_pages(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    url = f"{sb.base_url}/v1/oauth/authorize?{urlencode(auth_query(sb, state='xyz<&>'))}"
    back = urlsplit(sb.approve(url, allow=True))
    assert f"{back.scheme}://{back.netloc}{back.path}" == sb.redirect_uri
    query = parse_qs(back.query)
    assert query["state"] == ["xyz<&>"]
    assert len(query["code"][0]) >= 32
    url = f"{sb.base_url}/v1/oauth/authorize?{urlencode(auth_query(sb, state='q'))}"
    assert parse_qs(urlsplit(sb.approve(url, allow=False)).query) == {
        "error": ["access_denied"],
        "error_description": ["the user denied access"],
        "state": ["q"],
    }


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://evil.example.test/callback",  # not registered
        "https://app.example.test/callback/extra",  # not identical
        "http://app.example.test/callback",  # not https
    ],
)
def test_bad_redirect_uri_is_an_error_page_never_a_redirect(fxpay_sandbox: Any, redirect_uri: str) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = c.get("/v1/oauth/authorize", params=auth_query(sb, redirect_uri))
        assert r.status_code == 400
        assert "location" not in r.headers
        assert r.headers["content-type"].startswith("text/html")
        assert 'id="error"' in r.text


def test_an_http_redirect_uri_cannot_be_registered_and_is_refused(fxpay_sandbox: Any) -> None:
    """Spec 5.1: web redirect URIs are https. Registration refuses the others (issue 46 item 5),
    and the authorize page refuses them whatever was registered."""
    sb = fxpay_sandbox
    for uri in ["http://web.example.test/cb", "javascript:alert(1)"]:
        with pytest.raises(fxpay.InvalidRequestError, match="redirect_uris"):
            sb.register_client("web-app", "web-secret", [uri])
    sb.register_client("web-app", "web-secret", ["https://web.example.test/cb"])
    with http(sb) as c:
        for uri in ["http://web.example.test/cb", "javascript:alert(1)"]:
            params = auth_query(sb, uri)
            params["client_id"] = "web-app"
            r = c.get("/v1/oauth/authorize", params=params)
            assert r.status_code == 400
            assert "location" not in r.headers
            assert "redirect_uri is not registered for this client" in r.text


def test_missing_redirect_uri_is_an_error_page(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        params = auth_query(sb)
        del params["redirect_uri"]
        r = c.get("/v1/oauth/authorize", params=params)
        assert r.status_code == 400
        assert "location" not in r.headers
        assert 'id="error"' in r.text


def test_unknown_client_is_an_error_page(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        params = auth_query(sb)
        params["client_id"] = "nobody"
        r = c.get("/v1/oauth/authorize", params=params)
        assert r.status_code == 400
        assert "location" not in r.headers
        assert "unknown client_id" in r.text


def test_custom_scheme_redirect_uri_works(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        code = browser_code(c, sb, NATIVE_REDIRECT_URI, state="native")
        r = token_request(c, code_grant(sb, code, NATIVE_REDIRECT_URI))
        assert r.status_code == 200, r.text
        assert va_status(c, r.json()["access_token"]) == 200


def test_custom_scheme_redirect_location(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        consent = browser_login(c, sb, auth_query(sb, NATIVE_REDIRECT_URI, state="n1"))
        r = c.post(
            "/v1/oauth/consent",
            content=urlencode({**hidden_fields(consent.text), "decision": "allow"}),
            headers=FORM,
        )
        assert r.status_code == 302
        assert r.headers["location"].startswith(NATIVE_REDIRECT_URI + "?code=")
        assert r.headers["location"].endswith("&state=n1")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "payments"}, "invalid_scope"),
        ({"scope": ""}, "invalid_scope"),
        ({"response_type": None}, "invalid_request"),
        ({"scope": None}, "invalid_scope"),
    ],
)
def test_other_authorize_errors_redirect_back(fxpay_sandbox: Any, change: dict[str, str | None], error: str) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        params = {k: v for k, v in {**auth_query(sb, state="e1"), **change}.items() if v is not None}
        r = c.get("/v1/oauth/authorize", params=params)
        assert r.status_code == 302
        loc = urlsplit(r.headers["location"])
        assert f"{loc.scheme}://{loc.netloc}{loc.path}" == sb.redirect_uri
        query = parse_qs(loc.query)
        assert query["error"] == [error]
        assert query["state"] == ["e1"]


# -- scopes -----------------------------------------------------------------------------------


def test_payments_endpoints_need_a_payments_token(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        user = user_tokens(c, sb)["access_token"]
        calls = [
            ("POST", "/v1/payments/quotes"),
            ("GET", "/v1/payments/quotes/00000000-0000-4000-8000-000000000000"),
            ("POST", "/v1/payments/beneficiaries"),
            ("POST", "/v1/payments/deals"),
            ("POST", "/v1/payments/deals/spot"),
        ]
        for method, path in calls:
            r = c.request(method, path, json={})
            assert r.status_code == 401, (path, r.text)
            assert errors_of(r) == [("auth:token:4001", "Authorization")]
            assert r.headers["www-authenticate"].startswith("Bearer ")
            r = c.request(method, path, json={}, headers=bearer("not-a-token"))
            assert r.status_code == 401
            assert errors_of(r) == [("auth:token:4002", "Authorization")]
            r = c.request(method, path, json={}, headers=bearer(user))
            assert r.status_code == 403, (path, r.text)
            assert errors_of(r) == [("auth:scope:4003", "Authorization")]
            assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
            assert 'scope="payments"' in r.headers["www-authenticate"]
            r = c.request(method, path, json={}, headers={"Authorization": f"Basic {user}"})
            assert r.status_code == 401


def test_virtual_accounts_need_a_gca_aisp_user_token(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        payments = payments_token(c, sb.client_id, sb.client_secret)
        r = c.get("/v1/gca/virtual-accounts")
        assert r.status_code == 401
        assert errors_of(r) == [("auth:token:4001", "Authorization")]
        r = c.get("/v1/gca/virtual-accounts", headers=bearer(payments))
        assert r.status_code == 403
        assert errors_of(r) == [("auth:scope:4003", "Authorization")]
        assert 'scope="gca-aisp"' in r.headers["www-authenticate"]
        user = user_tokens(c, sb)["access_token"]
        assert c.get("/v1/gca/virtual-accounts", headers=bearer(user)).status_code == 200
        # scheme is case-insensitive
        assert c.get("/v1/gca/virtual-accounts", headers={"Authorization": f"bearer {user}"}).status_code == 200

"""PKCE (RFC 7636, S256) and scope in the authorization-code flow, against the sandbox over
real HTTP: the client sends the challenge and the verifier, and the sandbox enforces them."""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

import fxpay

from sandbox_http_support import auth_query, http


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()


def test_url_carries_an_s256_challenge_of_a_hidden_verifier(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    verifier = auth.code_verifier
    assert isinstance(verifier, str)
    assert len(verifier) == 43
    assert set(verifier) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    q = query_of(auth.url)
    assert q["code_challenge"] == s256(verifier)
    assert q["code_challenge_method"] == "S256"
    assert q["scope"] == "gca-aisp"
    assert verifier not in auth.url
    assert fxpay_client.authorization_url(fxpay_sandbox.redirect_uri).code_verifier != verifier
    # The verifier (and the state) never show in repr/str; to_dict keeps them for the session.
    for shown in (repr(auth), str(auth), auth._repr_html_()):
        assert verifier not in shown
        assert auth.state not in shown
    d = auth.to_dict()
    assert d["code_verifier"] == verifier
    assert fxpay.AuthorizationRequest(**d) == auth
    assert fxpay.AuthorizationRequest(**json.loads(json.dumps(d))) == auth
    assert pickle.loads(pickle.dumps(auth)) == auth


def test_without_pkce_and_with_another_scope(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    plain = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, pkce=False)
    assert plain.code_verifier is None
    assert "code_challenge" not in query_of(plain.url)
    assert plain.to_dict()["code_verifier"] is None
    assert fxpay.AuthorizationRequest(**plain.to_dict()) == plain
    scoped = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, scope="gca-aisp offline_access")
    assert query_of(scoped.url)["scope"] == "gca-aisp offline_access"


@pytest.mark.parametrize("scope", ["", " ", "gca-aisp  x", "a\\b", 'a"b', "caf\u00e9", "a\nb"])
def test_bad_scopes_are_refused(fxpay_client: Any, fxpay_sandbox: Any, scope: str) -> None:
    with pytest.raises(fxpay.InvalidRequestError, match="scope"):
        fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, scope=scope)


def test_wrong_types_name_the_parameter(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    with pytest.raises(TypeError, match="scope"):
        fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, scope=5)
    with pytest.raises(TypeError, match="pkce"):
        fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, pkce="yes")
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    with pytest.raises(TypeError, match="code_verifier"):
        fxpay_client.exchange_code(
            fxpay.AuthorizationRequest(url=auth.url, state=auth.state, redirect_uri=auth.redirect_uri, code_verifier=7),  # type: ignore[arg-type]
            f"code=x&state={auth.state}",
        )
    with pytest.raises(TypeError, match="auth"):
        fxpay_client.exchange_code(auth.to_dict(), f"code=x&state={auth.state}")


def test_pkce_flow_survives_a_trip_through_the_session(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    stored = json.dumps(auth.to_dict())  # e.g. in the web framework's session between requests
    assert json.loads(stored)["code_verifier"] == auth.code_verifier
    callback = fxpay_sandbox.approve(auth.url)
    token = fxpay_client.exchange_code(fxpay.AuthorizationRequest(**json.loads(stored)), callback)
    assert token.scope == "gca-aisp"
    assert token.refresh_token
    assert fxpay_client.user_session(token).list_virtual_accounts()


async def test_pkce_flow_async(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    callback = fxpay_sandbox.approve(auth.url)
    without = fxpay.AuthorizationRequest(url=auth.url, state=auth.state, redirect_uri=auth.redirect_uri)
    with pytest.raises(fxpay.OAuthError) as ei:
        await fxpay_client.exchange_code_async(without, callback)
    assert ei.value.error == "invalid_grant"
    token = await fxpay_client.exchange_code_async(auth, callback)
    assert token.refresh_token


def test_missing_or_wrong_verifier_is_invalid_grant(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri)
    callback = fxpay_sandbox.approve(auth.url)
    fields = {"url": auth.url, "state": auth.state, "redirect_uri": auth.redirect_uri}
    other = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri).code_verifier
    for verifier in (None, other, auth.code_verifier[:-1], auth.code_verifier + "A"):
        with pytest.raises(fxpay.OAuthError) as ei:
            fxpay_client.exchange_code(fxpay.AuthorizationRequest(**fields, code_verifier=verifier), callback)
        assert ei.value.error == "invalid_grant", verifier
        assert ei.value.status == 400
        assert "code_verifier" in str(ei.value)
    assert fxpay_sandbox.stats()["tokens_issued"]["authorization_code"] == 0
    # The failed attempts did not spend the code: its rightful holder still redeems it.
    assert fxpay_client.exchange_code(auth, callback).refresh_token


def test_a_verifier_for_a_code_without_challenge_is_refused(fxpay_client: Any, fxpay_sandbox: Any) -> None:
    auth = fxpay_client.authorization_url(fxpay_sandbox.redirect_uri, pkce=False)
    callback = fxpay_sandbox.approve(auth.url)
    forged = fxpay.AuthorizationRequest(**{**auth.to_dict(), "code_verifier": "v" * 43})
    with pytest.raises(fxpay.OAuthError) as ei:
        fxpay_client.exchange_code(forged, callback)
    assert ei.value.error == "invalid_grant"
    assert fxpay_client.exchange_code(auth, callback).refresh_token


def redirect_error(sb: Any, **extra: str) -> dict[str, str]:
    with http(sb) as c:
        r = c.get("/v1/oauth/authorize", params=auth_query(sb, **extra))
    assert r.status_code == 302, r.text
    q = query_of(r.headers["location"])
    assert q["state"] == "st-123"
    return q


@pytest.mark.parametrize(
    "extra",
    [
        {"code_challenge": "x" * 43, "code_challenge_method": "plain"},
        {"code_challenge": "x" * 43},  # no method means plain (RFC 7636 4.3)
        {"code_challenge": "x" * 43, "code_challenge_method": "S512"},
        {"code_challenge_method": "S256"},
        {"code_challenge": "x" * 42, "code_challenge_method": "S256"},
        {"code_challenge": "x" * 42 + "=", "code_challenge_method": "S256"},
    ],
)
def test_sandbox_refuses_plain_and_malformed_challenges(fxpay_sandbox: Any, extra: dict[str, str]) -> None:
    q = redirect_error(fxpay_sandbox, **extra)
    assert q["error"] == "invalid_request"
    assert "code_challenge" in q["error_description"]


def test_sandbox_pkce_over_plain_http(fxpay_sandbox: Any) -> None:
    """The token endpoint's PKCE rules, driven with httpx and a verifier made here."""
    sb = fxpay_sandbox
    verifier = base64.urlsafe_b64encode(b"\x07" * 48).rstrip(b"=").decode()  # 64 characters
    url = "{}/v1/oauth/authorize?{}".format(
        sb.base_url, urlencode(auth_query(sb, code_challenge=s256(verifier), code_challenge_method="S256"))
    )
    code = query_of(sb.approve(url))["code"]
    grant = {
        "grant_type": "authorization_code",
        "client_id": sb.client_id,
        "client_secret": sb.client_secret,
        "code": code,
        "redirect_uri": sb.redirect_uri,
    }
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    with http(sb) as c:
        for extra in ({}, {"code_verifier": verifier.upper()}, {"code_verifier": s256(verifier)}):
            r = c.post("/v1/oauth/token", content=urlencode({**grant, **extra}), headers=headers)
            assert r.status_code == 400, (extra, r.text)
            assert r.json()["error"] == "invalid_grant", (extra, r.text)
        r = c.post("/v1/oauth/token", content=urlencode({**grant, "code_verifier": verifier}), headers=headers)
        assert r.status_code == 200, r.text
        # Single use still holds once the verifier matched.
        r = c.post("/v1/oauth/token", content=urlencode({**grant, "code_verifier": verifier}), headers=headers)
        assert r.status_code == 400
        assert r.json()["error"] == "invalid_grant"


def test_openapi_documents_the_pkce_rules(fxpay_sandbox: Any) -> None:
    with http(fxpay_sandbox) as c:
        doc = c.get("/openapi.json").json()
    authorize = doc["paths"]["/v1/oauth/authorize"]["get"]
    assert "S256" in authorize["description"]
    assert "plain" in authorize["description"]
    names = {p["name"] for p in authorize["parameters"]}
    assert {"code_challenge", "code_challenge_method"} <= names
    assert "code_verifier" in doc["components"]["schemas"]["TokenRequest"]["properties"]

"""Issue 46 items 1-6: the spec's last disagreements between the sandbox, its OpenAPI document,
the client and the docs. Each test drives the served sandbox over raw HTTP (httpx) and checks
the same values against ``/openapi.json`` with jsonschema, and the Sandbox rules (the
``x-fxpay-rules`` of that document, which the docs' rules page is made from)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

import fxpay
import fxpay.testing

import served_support
from conftest import need
from sandbox_http_support import ADMIN_POSTS, auth_query, bearer, errors_of, http, payments_token, token_request

jsonschema = need("jsonschema")
referencing = need("referencing")

DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.fixture(scope="module")
def served() -> Iterator[fxpay.testing.RemoteSandbox]:
    """A served sandbox (``python -m fxpay.sandbox``), driven over HTTP only."""
    with served_support.served() as env:
        yield served_support.remote(env)


@pytest.fixture(scope="module")
def doc(served: Any) -> dict[str, Any]:
    with http(served) as c:
        r = c.get("/openapi.json")
    assert r.status_code == 200
    return dict(r.json())


def validator(doc: dict[str, Any], ref: str) -> Any:
    """A Draft 2020-12 validator of ``#/...`` ``ref`` in the served document."""
    resource = referencing.Resource.from_contents(doc, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource("urn:fxpay-openapi", resource)
    return jsonschema.Draft202012Validator({"$ref": f"urn:fxpay-openapi{ref}"}, registry=registry)


def rules(doc: dict[str, Any]) -> str:
    return "\n".join(r["rule"] for topic in doc["x-fxpay-rules"] for r in topic["rules"])


def admin(sb: Any, c: httpx.Client, path: str, body: Any) -> httpx.Response:
    return c.post(f"/_sandbox/{path}", json=body, headers=bearer(sb.admin_token))


# -- item 1: the quote read's fields beyond the spec -------------------------------------------

SPEC_QUOTE_FIELDS = {
    "buyCurrency",
    "buyAmount",
    "sellCurrency",
    "sellAmount",
    "customerRate",
    "inverseCustomerRate",
    "fee",
    "feeCurrency",
    "freebies",
}


def test_the_quote_reads_extra_fields_are_in_the_schema_and_the_rules(served: Any, doc: dict[str, Any]) -> None:
    with http(served) as c:
        h = bearer(payments_token(c, served.client_id, served.client_secret))
        qid = c.post("/v1/payments/quotes", json={"buyCurrency": "USD", "buyAmount": 100, "sellCurrency": "AUD"}, headers=h).json()["id"]
        body = c.get(f"/v1/payments/quotes/{qid}", headers=h).json()
    extra = set(body) - SPEC_QUOTE_FIELDS
    assert extra == {"id", "beneficiaries", "createdAt"}, extra
    validator(doc, "#/components/schemas/Quote").validate(body)
    assert extra <= set(doc["components"]["schemas"]["Quote"]["properties"])
    text = rules(doc)
    rule = next((r for r in text.splitlines() if "GET /v1/payments/quotes/{id}" in r), "")
    for name in sorted(extra):
        assert name in rule, (name, rule)
    assert "the spec does not list" in rule, rule


# -- item 2: a code redeemed twice revokes its tokens, and the refusal says so -----------------


def code_of(sb: Any) -> str:
    callback = sb.approve(f"{sb.base_url}/v1/oauth/authorize?{urlencode(auth_query(sb))}")
    return parse_qs(urlsplit(callback).query)["code"][0]


def test_a_code_redeemed_twice_revokes_its_tokens_and_the_refresh_says_why(served: Any, doc: dict[str, Any]) -> None:
    grant = {"client_id": served.client_id, "client_secret": served.client_secret, "scope": "gca-aisp"}
    with http(served) as c:
        code = code_of(served)
        redeem = {"grant_type": "authorization_code", "code": code, "redirect_uri": served.redirect_uri, **grant}
        first = token_request(c, redeem)
        assert first.status_code == 200, first.text
        again = token_request(c, redeem)
        assert again.status_code == 400
        assert again.json()["error"] == "invalid_grant"
        assert "revoked every token issued from it" in again.json()["error_description"]
        # The access token issued from the code is revoked ...
        accounts = c.get("/v1/gca/virtual-accounts", headers=bearer(first.json()["access_token"]))
        assert accounts.status_code == 401
        # ... and so is the refresh token, with a refusal that says what happened.
        refresh = token_request(c, {"grant_type": "refresh_token", "refresh_token": first.json()["refresh_token"], **grant})
    assert refresh.status_code == 400
    body = refresh.json()
    assert body["error"] == "invalid_grant"
    assert "revoked" in body["error_description"], body
    assert "redeemed a second time" in body["error_description"], body
    assert "already used or superseded" not in body["error_description"], body
    validator(doc, "#/components/schemas/OAuthError").validate(body)
    text = rules(doc)
    assert "revokes every token issued from it" in text
    assert "the refresh token included" in text


# -- item 3: DealCreatedEvent ties the body to its status --------------------------------------

PID, DID = str(uuid.uuid4()), str(uuid.uuid4())
ERROR = {"errorCode": "validation:beneficiary:1004", "fieldName": "PaymentReason", "message": "required"}


def event(status: str, **body: Any) -> dict[str, Any]:
    return {"eventType": "DealCreated", "status": status, "eventBody": {"processId": PID, **body}}


EVENTS = [
    # (event, what spec 6.2 says of it)
    (event("success", dealId=DID), True),
    (event("success", dealId=DID, errors=[]), True),
    (event("success", dealId=DID, errors=None), True),
    (event("fail", errors=[ERROR]), True),
    (event("fail", dealId=None, errors=[ERROR]), True),
    (event("success"), False),  # a success without dealId
    (event("success", dealId=None), False),
    (event("success", dealId=DID, errors=[ERROR]), False),
    (event("fail"), False),  # a fail without errors
    (event("fail", errors=[]), False),
    (event("fail", dealId=DID, errors=[ERROR]), False),  # a fail with dealId
]


@pytest.mark.parametrize(
    ("body", "valid"), EVENTS, ids=[f"{e['status']}-{'-'.join(sorted(e['eventBody']))}-{i}" for i, (e, _) in enumerate(EVENTS)]
)
def test_the_document_and_the_client_agree_on_a_deal_created_event(doc: dict[str, Any], body: dict[str, Any], valid: bool) -> None:
    schema_says = validator(doc, "#/components/schemas/DealCreatedEvent").is_valid(body)
    try:
        fxpay.parse_deal_created(json.dumps(body).encode())
        client_says = True
    except fxpay.WebhookPayloadError:
        client_says = False
    assert (schema_says, client_says) == (valid, valid)


def test_what_deal_created_request_builds_follows_the_document(doc: dict[str, Any]) -> None:
    check = validator(doc, "#/components/schemas/DealCreatedEvent")
    for status in ("success", "fail"):
        body, _ = fxpay.testing.deal_created_request(status=status, errors=[ERROR] if status == "fail" else ())
        check.validate(json.loads(body))


# -- item 4: send_event's url and TokenRequest's code_verifier ---------------------------------

SEND_EVENT_URLS = [
    ("http://127.0.0.1:9/hook", True),
    ("https://localhost:9/hook", True),
    ("http://[::1]:9/hook", True),
    ("HTTP://LOCALHOST:9/x", True),
    ("http://0.0.0.0:9/hook", False),  # this machine, but not loopback by the rule
    ("not a url", False),
    ("ftp://127.0.0.1/x", False),
    ("http://127.0.0.1:99999/x", False),
    ("http://user@127.0.0.1/x", False),
]


#: Off this machine: checked against the document only, never sent to the sandbox (a
#: regression would make it deliver there).
REMOTE_URLS = ["https://example.com/hook", "http://10.0.0.1/hook", "https://127.0.0.1.example.com/x"]


def test_the_document_refuses_a_remote_send_event_url(doc: dict[str, Any]) -> None:
    schema = doc["paths"]["/_sandbox/send_event"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    for url in REMOTE_URLS:
        assert not jsonschema.Draft202012Validator(schema).is_valid({"url": url, "body": "{}"}), url


@pytest.mark.parametrize(("url", "loopback"), SEND_EVENT_URLS)
def test_send_event_delivers_only_to_loopback_as_the_document_says(served: Any, doc: dict[str, Any], url: str, loopback: bool) -> None:
    schema = doc["paths"]["/_sandbox/send_event"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body = {"url": url, "body": json.dumps(event("success", dealId=DID))}
    assert jsonschema.Draft202012Validator(schema).is_valid(body) == loopback
    with http(served) as c:
        r = admin(served, c, "send_event", body)
    if loopback:
        assert r.status_code == 200, r.text  # a delivery with no receiver: status null
        assert r.json()["status"] is None
    else:
        assert r.status_code == 400, r.text
        assert errors_of(r) == [("sandbox:admin:4000", "url")]
    assert "send_event POSTs a body of the caller's making once, to a loopback URL only" in rules(doc)


@pytest.mark.parametrize("grant_type", ["client_credentials", "refresh_token"])
def test_code_verifier_is_constrained_only_on_the_code_grant(served: Any, doc: dict[str, Any], grant_type: str) -> None:
    schema = doc["paths"]["/v1/oauth/token"]["post"]["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    check = validator(doc, "#/components/schemas/TokenRequest") if "$ref" in schema else jsonschema.Draft202012Validator(schema)
    odd = "not a verifier!"
    assert check.is_valid({"grant_type": grant_type, "code_verifier": odd})
    assert not check.is_valid({"grant_type": "authorization_code", "code_verifier": odd})
    with http(served) as c:
        data = {"grant_type": grant_type, "client_id": served.client_id, "client_secret": served.client_secret, "code_verifier": odd}
        if grant_type == "client_credentials":
            data["scope"] = "payments"
            r = token_request(c, data)
            assert r.status_code == 200, r.text  # ignored, as the document says
        else:
            data.update(scope="gca-aisp", refresh_token="unknown")
            r = token_request(c, data)
            assert r.json()["error_description"] == "unknown refresh token"  # not the verifier
    assert "code_verifier belongs to the authorization_code grant" in rules(doc)


# -- item 5: register_client refuses what authorize would refuse -------------------------------

REDIRECTS = [
    ("https://web.example.test/cb", True),
    ("com.example.app:/oauth/callback", True),
    ("https://my-app.example.test:8443/cb?x=1", True),
    ("http://web.example.test/cb", False),
    ("javascript:alert(1)", False),
    ("https://web.example.test/cb#x", False),
    ("https://1.2.3.4/cb", False),
    ("", False),
]


@pytest.mark.parametrize(("uri", "registrable"), REDIRECTS)
def test_register_client_refuses_a_redirect_uri_authorize_would_refuse(
    served: Any, doc: dict[str, Any], uri: str, registrable: bool
) -> None:
    schema = doc["paths"]["/_sandbox/register_client"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body = {"client_id": "web-app-46", "client_secret": "web-secret", "redirect_uris": [uri]}
    assert jsonschema.Draft202012Validator(schema).is_valid(body) == registrable
    with http(served) as c:
        r = admin(served, c, "register_client", body)
        if not registrable:
            assert r.status_code == 400, r.text
            assert errors_of(r) == [("sandbox:admin:4000", "redirect_uris")]
            return
        assert r.status_code == 200, r.text
        # A registered URI is one the authorize page takes: its login page, not an error.
        params = {**auth_query(served, uri), "client_id": "web-app-46"}
        page = c.get("/v1/oauth/authorize", params=params)
        assert page.status_code == 200, page.text


def test_the_embedded_sandbox_refuses_the_same() -> None:
    with fxpay.testing.Sandbox() as sb, pytest.raises(fxpay.InvalidRequestError, match="redirect_uris"):
        sb.register_client("web-app", "web-secret", ["http://web.example.test/cb"])


# -- item 6: the docs' admin table lists every admin operation ---------------------------------


def test_the_docs_admin_table_lists_every_admin_operation(doc: dict[str, Any]) -> None:
    text = (DOCS / "testing.md").read_text()
    table = set(re.findall(r"^\| (GET|POST) \| `(/_sandbox/[a-z_]+)", text, re.M))
    served_ops = {
        (method.upper(), re.sub(r"/\{[^}]+\}$", "", path))
        for path, item in doc["paths"].items()
        if path.startswith("/_sandbox/")
        for method in item
    }
    listed = set(table) | {("GET", p) for p in re.findall(r"`(/_sandbox/[a-z_]+)`", text)}
    missing = sorted(served_ops - listed)
    assert not missing, missing
    for name in ADMIN_POSTS:
        assert ("POST", f"/_sandbox/{name}") in table, name

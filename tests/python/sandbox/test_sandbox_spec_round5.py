"""Issue 54 items 14 to 16: the round-5 spec audit. The rules page (generated from the
``/openapi.json`` the sandbox serves) says what the token answer's ``scope`` is and what a
token request without ``scope`` gets; it says the truth about ``Quote.id``; and the
document's ``DealCreatedEvent`` and ``fxpay.parse_deal_created`` accept the same shapes, on
every shape generated below. Against the embedded sandbox over loopback."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import login, need
from sandbox_http_support import http, token_request

jsonschema = need("jsonschema")
referencing = need("referencing")


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


@pytest.fixture(scope="module")
def doc(sb: Sandbox) -> dict[str, Any]:
    with http(sb) as c:
        r = c.get("/openapi.json")
    assert r.status_code == 200
    return dict(r.json())


def rules_saying(doc: dict[str, Any], *words: str) -> list[str]:
    """The rules of the document that hold every one of ``words``."""
    found = [r["rule"] for topic in doc["x-fxpay-rules"] for r in topic["rules"]]
    return [r for r in found if all(w in r for w in words)]


# -- item 14: the token answer's scope, and a request without scope ------------------------------


def test_the_rules_say_what_scope_a_token_answer_has_and_what_a_request_without_one_gets(sb: Sandbox, doc: dict[str, Any]) -> None:
    (rule,) = rules_saying(doc, "POST /v1/oauth/token", "scope")
    assert "without scope" in rule, rule
    assert "invalid_scope" in rule, rule
    assert "Token.scope" in rule, rule
    # What it says is what the sandbox does.
    with http(sb) as c:
        base = {"grant_type": "client_credentials", "client_id": sb.client_id, "client_secret": sb.client_secret}
        for scope, want in [(None, "payments"), ("payments", "payments"), ("", "payments"), ("payments payments", "payments")]:
            r = token_request(c, base if scope is None else {**base, "scope": scope})
            assert r.status_code == 200, (scope, r.text)
            assert r.json()["scope"] == want, scope
        r = token_request(c, {**base, "scope": "gca-aisp"})
        assert (r.status_code, r.json()["error"]) == (400, "invalid_scope")
    with sb.client() as client:
        auth, callback = login(sb, client)
        assert client.exchange_code(auth, callback).scope == "gca-aisp"


# -- item 15: what is true of Quote.id -----------------------------------------------------------


def test_the_rules_say_the_truth_about_quote_id(sb: Sandbox, doc: dict[str, Any]) -> None:
    (rule,) = rules_saying(doc, "GET /v1/payments/quotes/{id}", "createdAt")
    assert "Quote.id" in rule, rule
    assert "keeps them only in raw" not in rule, rule
    assert "ApiError" in rule, rule
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")
        q = c.get_quote(qid)
    assert q.id == qid == q.raw["id"]
    assert not hasattr(q, "created_at")
    assert "createdAt" in q.raw
    assert "beneficiaries" in q.raw


# -- item 16: DealCreatedEvent and parse_deal_created agree --------------------------------------

PID, DID = str(uuid.uuid4()), str(uuid.uuid4())
DEAL_IDS: dict[str, object] = {
    "absent": ...,
    "null": None,
    "uuid": DID,
    "upper": DID.upper(),
    "braces": "{" + DID + "}",
    "short": DID[:-1],
    "urn": "urn:uuid:" + DID,
    "number": 7,
}
CODES = [
    "validation:deal:1008",
    "Validation:deal:1008",
    "validation:Deal:1008",
    "",
    "validation",
    "a:b",
    "a:b:c",
    "a:b:1:2",
    "a::1",
    ":b:1",
    "a b:c:1",
    "a:b:-1",
    "é:b:1",
    "a:b:1\n",
]
ERRORS: dict[str, object] = {
    "absent": ...,
    "null": None,
    "empty": [],
    "not-a-list": {"errorCode": "a:b:1"},
    "not-an-object": ["x"],
    "no-field-name": [{"errorCode": "a:b:1", "message": "m"}],
    "null-field-name": [{"errorCode": "a:b:1", "fieldName": None, "message": "m"}],
    "empty-field-name": [{"errorCode": "a:b:1", "fieldName": "", "message": "m"}],
    "numeric-code": [{"errorCode": 1008, "fieldName": "F", "message": "m"}],
    **{f"code={c!r}": [{"errorCode": c, "fieldName": "F", "message": "m"}] for c in CODES},
}


def shapes() -> Iterator[tuple[str, dict[str, Any]]]:
    for status, (dname, deal_id), (ename, errors) in itertools.product(("success", "fail"), DEAL_IDS.items(), ERRORS.items()):
        body: dict[str, Any] = {"processId": PID}
        if deal_id is not ...:
            body["dealId"] = deal_id
        if errors is not ...:
            body["errors"] = errors
        yield f"{status}/dealId={dname}/errors={ename}", {"eventType": "DealCreated", "status": status, "eventBody": body}


def test_the_document_and_parse_deal_created_accept_the_same_shapes(doc: dict[str, Any]) -> None:
    resource = referencing.Resource.from_contents(doc, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource("urn:fxpay-openapi", resource)
    schema = jsonschema.Draft202012Validator({"$ref": "urn:fxpay-openapi#/components/schemas/DealCreatedEvent"}, registry=registry)
    differ, accepted, total = [], 0, 0
    for name, event in shapes():
        total += 1
        schema_says = schema.is_valid(event)
        try:
            fxpay.parse_deal_created(json.dumps(event).encode())
            client_says = True
        except fxpay.WebhookPayloadError:
            client_says = False
        accepted += client_says
        if schema_says != client_says:
            differ.append((name, schema_says, client_says))
    assert total >= 270
    assert 0 < accepted < total
    assert differ == [], f"{len(differ)} of {total} shapes differ: {differ}"


def test_an_error_code_of_another_shape_is_read_with_no_parts() -> None:
    event = {
        "eventType": "DealCreated",
        "status": "fail",
        "eventBody": {"processId": PID, "errors": [{"errorCode": "E-17", "fieldName": "Amount", "message": "m"}]},
    }
    (e,) = fxpay.parse_deal_created(json.dumps(event)).errors
    assert (e.error_code, e.layer, e.component, e.number) == ("E-17", None, None, None)

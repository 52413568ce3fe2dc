"""Virtual accounts, faults, stats, bad input and the OpenAPI document, over plain HTTP (httpx)."""

from __future__ import annotations

import re
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from sandbox_http_support import (
    ADMIN_POSTS,
    FORM,
    api,
    bearer,
    beneficiary_body,
    dec_json,
    dumps,
    errors_of,
    http,
    token_request,
    user_tokens,
)

JSON = {"Content-Type": "application/json"}


# -- virtual accounts -------------------------------------------------------------------------


def test_virtual_accounts_list(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        token = user_tokens(c, sb)["access_token"]
        r = c.get("/v1/gca/virtual-accounts", headers=bearer(token))
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        body = dec_json(r)
        assert list(body) == ["virtualAccounts"]
        accounts = body["virtualAccounts"]
        assert [a["currency"] for a in accounts] == ["EUR", "GBP", "USD"]
        common = {"id", "currency", "accountName", "accountNumber", "bankName", "bic", "country", "balance", "status", "createdAt"}
        assert set(accounts[0]) == common | {"iban"}
        assert set(accounts[1]) == common | {"iban", "routingCode"}
        assert set(accounts[2]) == common | {"routingCode"}
        for a in accounts:
            assert uuid.UUID(a["id"]).version == 4
            assert a["status"] == "Active"
            assert a["accountName"] == f"Sandbox User {a['currency']}"
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", a["createdAt"])
            assert isinstance(a["balance"], Decimal)
        # exact decimals, digits as sent
        assert [str(a["balance"]) for a in accounts] == ["12500.00", "8420.55", "25000.00"]
        assert '"balance":8420.55' in r.text
        assert (accounts[0]["iban"], accounts[0]["country"], accounts[0]["bic"]) == ("DE89370400440532013000", "DE", "SBXBDEFFXXX")
        assert (accounts[1]["routingCode"], accounts[1]["country"]) == ("601613", "GB")
        assert (accounts[2]["routingCode"], accounts[2]["country"]) == ("026009593", "US")
        # the same list on every call and for every token of the user
        again = user_tokens(c, sb)["access_token"]
        assert c.get("/v1/gca/virtual-accounts", headers=bearer(again)).text == r.text


# -- faults -----------------------------------------------------------------------------------


def test_fail_next_with_retry_after(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        sb.fail_next("/v1/payments/quotes", 503, times=2, retry_after=7)
        body = {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR"}
        for _ in range(2):
            r = a.post("/v1/payments/quotes", body)
            assert r.status_code == 503
            assert r.headers["retry-after"] == "7"
            assert errors_of(r) == [("sandbox:fault:5001", "")]
        assert sb.stats()["quotes"] == 0  # not processed
        r = a.post("/v1/payments/quotes", body)
        assert r.status_code == 201
        assert "retry-after" not in r.headers
        stats = sb.stats()
        assert (stats["quotes"], stats["faults_fired"], stats["faults_pending"]) == (1, 2, 0)


def test_fail_next_by_method_and_prefix(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote()
        sb.fail_next("GET /v1/payments/quotes/*", 500)
        sb.fail_next("POST /v1/payments/beneficiaries", 429)
        assert a.post("/v1/payments/quotes", {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR"}).status_code == 201
        r = a.get(f"/v1/payments/quotes/{quote_id}")
        assert r.status_code == 500
        assert "retry-after" not in r.headers
        assert a.get(f"/v1/payments/quotes/{quote_id}").status_code == 200
        r = a.post("/v1/payments/beneficiaries", beneficiary_body())
        assert r.status_code == 429
        assert errors_of(r) == [("sandbox:fault:5001", "")]
        assert a.post("/v1/payments/beneficiaries", beneficiary_body()).status_code == 201


def test_fail_next_on_the_token_endpoint_speaks_rfc6749(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    sb.fail_next("/v1/oauth/token", 503, retry_after=2)
    with http(sb) as c:
        form = {"grant_type": "client_credentials", "client_id": sb.client_id, "client_secret": sb.client_secret}
        r = token_request(c, form)
        assert r.status_code == 503
        assert r.headers["retry-after"] == "2"
        body = r.json()
        assert body["error"] == "temporarily_unavailable"
        assert body["errors"][0]["errorCode"] == "sandbox:fault:5001"
        stats = sb.stats()
        assert (stats["tokens_issued"]["client_credentials"], stats["token_requests"]) == (0, 1)  # a faulted request counts
        assert token_request(c, form).status_code == 200


def test_drop_before_processing_changes_nothing(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        sb.drop_next("/v1/payments/quotes", after_processing=False)
        with pytest.raises(httpx.TransportError):
            a.post("/v1/payments/quotes", {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR"})
        assert sb.stats()["quotes"] == 0
        assert a.post("/v1/payments/quotes", {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR"}).status_code == 201
        assert sb.stats()["quotes"] == 1


def test_drop_after_processing_changes_state(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote()
        body = a.deal_body(quote_id, [(a.beneficiary(), a.read_quote(quote_id)["sellAmount"])])
        sb.drop_next("POST /v1/payments/deals", after_processing=True)
        with pytest.raises(httpx.TransportError):
            a.post("/v1/payments/deals", body)
        (deal,) = sb.deals()  # booked although the answer was lost
        assert deal["quoteId"] == quote_id
        r = a.post("/v1/payments/deals", body)  # a naive retry conflicts
        assert r.status_code == 409
        assert errors_of(r) == [("business:deal:2002", "QuoteId")]
        assert deal["dealId"] in r.json()["errors"][0]["message"]


def test_drop_before_processing_a_deal(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote()
        body = a.deal_body(quote_id, [(a.beneficiary(), a.read_quote(quote_id)["sellAmount"])])
        sb.drop_next("/v1/payments/deals", after_processing=False)
        with pytest.raises(httpx.TransportError):
            a.post("/v1/payments/deals", body)
        assert sb.deals() == []
        assert a.post("/v1/payments/deals", body).status_code == 201


def test_delay_next(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote()
        sb.delay_next(f"/v1/payments/quotes/{quote_id}", 0.6)
        t0 = time.monotonic()
        assert a.get(f"/v1/payments/quotes/{quote_id}").status_code == 200
        assert time.monotonic() - t0 >= 0.6
        t0 = time.monotonic()
        assert a.get(f"/v1/payments/quotes/{quote_id}").status_code == 200
        assert time.monotonic() - t0 < 0.5
        # a delay longer than the client's timeout looks like a timeout
        sb.delay_next("/v1/payments/quotes/*", 1.5)
        with pytest.raises(httpx.ReadTimeout):
            a.c.get(f"/v1/payments/quotes/{quote_id}", headers=a.h, timeout=0.3)


# -- stats ------------------------------------------------------------------------------------


def test_stats_count_requests_by_route(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    assert sb.stats()["requests"] == 0
    with api(sb) as a:  # one token request
        quote_id = a.quote()
        a.read_quote(quote_id)
        a.read_quote(quote_id)
        a.get("/v1/payments/quotes/not-a-uuid")
        a.c.get("/nope")
        a.post("/v1/payments/beneficiaries", {})
        sb.fail_next("/v1/payments/deals", 500)
        a.post("/v1/payments/deals", {})
        stats = sb.stats()
    assert stats["requests"] == 8
    assert stats["token_requests"] == 1
    assert stats["tokens_issued"] == {"client_credentials": 1, "authorization_code": 0, "refresh_token": 0}
    paths = stats["paths"]
    assert paths["POST /v1/oauth/token"] == 1
    assert paths["POST /v1/payments/quotes"] == 1
    assert paths["GET /v1/payments/quotes/{id}"] == 3
    assert paths["POST /v1/payments/beneficiaries"] == 1
    assert paths["POST /v1/payments/deals"] == 1  # faulted requests count too
    assert paths["other"] == 1
    assert sum(paths.values()) == 8
    assert (stats["quotes"], stats["beneficiaries"], stats["deals"]) == (1, 0, 0)
    assert (stats["faults_fired"], stats["faults_pending"]) == (1, 0)
    assert stats["connections"] >= 1


# -- bad input --------------------------------------------------------------------------------

POSTS = ["/v1/payments/quotes", "/v1/payments/beneficiaries", "/v1/payments/deals", "/v1/payments/deals/spot"]


@pytest.mark.parametrize("path", POSTS)
def test_wrong_content_type_is_415(fxpay_sandbox: Any, path: str) -> None:
    with api(fxpay_sandbox) as a:
        for ct in ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]:
            headers = dict(a.h)
            if ct:
                headers["Content-Type"] = ct
            r = a.c.post(path, content=b'{"buyCurrency":"USD"}', headers=headers)
            assert r.status_code == 415, (path, ct)
            assert errors_of(r) == [("validation:request:1003", "")]
        # application/json with parameters is JSON
        r = a.c.post(path, content=b"{", headers={**a.h, "Content-Type": "application/json; charset=utf-8"})
        assert errors_of(r) == [("validation:request:1001", "")]
        r = a.c.post(path, content=b"[]", headers={**a.h, "Content-Type": "Application/JSON"})
        assert errors_of(r) == [("validation:request:1002", "")]
        # Issue 31.10: the rule is "415 unless application/json", and +json types are not
        # application/json (the service documents application/json only).
        for ct in ["application/vnd.api+json", "application/problem+json", "application/json-patch+json"]:
            r = a.c.post(path, content=b"{}", headers={**a.h, "Content-Type": ct})
            assert r.status_code == 415, (path, ct, r.text)
            assert errors_of(r) == [("validation:request:1003", "")]


@pytest.mark.parametrize("path", POSTS)
def test_oversized_body_is_413(fxpay_sandbox: Any, path: str) -> None:
    with api(fxpay_sandbox) as a:
        big = b'{"name": "' + b"x" * (1 << 20) + b'"}'
        r = a.c.post(path, content=big, headers={**a.h, **JSON})
        assert r.status_code == 413
        assert errors_of(r) == [("validation:request:1004", "")]

        def chunks() -> Any:  # no Content-Length: the limit holds on the stream too
            for _ in range(20):
                yield b" " * 65536
            yield b"{}"

        r = a.c.post(path, content=chunks(), headers={**a.h, **JSON})
        assert r.status_code == 413
        assert errors_of(r) == [("validation:request:1004", "")]
        # the rest of the upload was not read: the server says so, and the client's next
        # request goes on a new connection instead of failing on the closed one
        assert r.headers["connection"] == "close"
        # just under the limit is parsed
        ok = b" " * ((1 << 20) - 2) + b"{}"
        r = a.c.post(path, content=ok, headers={**a.h, **JSON})
        assert r.status_code == 400, r.text
        assert all(code.startswith("validation:") and code != "validation:request:1004" for code, _ in errors_of(r))


def test_oversized_token_request_is_413(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = c.post("/v1/oauth/token", content=b"grant_type=client_credentials&x=" + b"a" * (1 << 20), headers=FORM)
        assert r.status_code == 413
        assert r.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/v1"),
        ("GET", "/v1/payments/nothing"),
        ("POST", "/v1/payments/quote"),
        ("GET", "/v2/payments/quotes/00000000-0000-4000-8000-000000000000"),
        ("GET", "/v1/payments/quotes/a/b"),
        ("DELETE", "/v1/gca/accounts"),
    ],
)
def test_unknown_path_is_404_json(fxpay_sandbox: Any, method: str, path: str) -> None:
    with api(fxpay_sandbox) as a:
        r = a.c.request(method, path, headers=a.h)
        assert r.status_code == 404
        assert errors_of(r) == [("resource:route:3002", "")]
        assert r.json()["errors"][0]["message"] == "no such path"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v1/payments/quotes", "POST"),
        ("PUT", "/v1/payments/quotes/00000000-0000-4000-8000-000000000000", "GET,HEAD"),
        ("DELETE", "/v1/payments/quotes/00000000-0000-4000-8000-000000000000", "GET,HEAD"),
        ("GET", "/v1/payments/beneficiaries", "POST"),
        ("GET", "/v1/payments/deals", "POST"),
        ("PATCH", "/v1/payments/deals/spot", "POST"),
        ("POST", "/v1/gca/virtual-accounts", "GET,HEAD"),
        ("POST", "/v1/oauth/authorize", "GET,HEAD"),
        ("PUT", "/v1/oauth/token", "POST"),
        ("POST", "/openapi.json", "GET,HEAD"),
    ],
)
def test_wrong_method_is_405(fxpay_sandbox: Any, method: str, path: str, allow: str) -> None:
    with api(fxpay_sandbox) as a:
        r = a.c.request(method, path, headers={**a.h, **JSON}, content=b"{}")
        assert r.status_code == 405
        assert errors_of(r) == [("resource:route:3003", "")]
        assert sorted(r.headers["allow"].replace(" ", "").split(",")) == sorted(allow.split(","))


def test_bad_input_does_not_corrupt_state(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        garbage: list[tuple[str, bytes, dict[str, str]]] = [
            ("/v1/payments/quotes", b"\xff\xfe\x00not utf-8", JSON),
            ("/v1/payments/quotes", b'{"buyCurrency": "USD", "buyAmount": 1e400, "sellCurrency": "EUR"}', JSON),
            ("/v1/payments/quotes", b'{"buyCurrency": ["USD"], "buyAmount": {"v": 1}, "sellCurrency": 1}', JSON),
            ("/v1/payments/quotes", b'{"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR"} trailing', JSON),
            ("/v1/payments/beneficiaries", b'{"currency": "AUD", "currency": 5}', JSON),
            ("/v1/payments/beneficiaries", b"{" * 10000, JSON),
            ("/v1/payments/deals", b'{"quoteId": {"$ne": null}, "beneficiaries": "all"}', JSON),
            ("/v1/payments/deals/spot", b"null", JSON),
            ("/v1/payments/deals", b'{"quoteId": "x"}', {"Content-Type": "text/json"}),
        ]
        for path, raw, headers in garbage:
            r = a.c.post(path, content=raw, headers={**a.h, **headers})
            assert r.status_code in (400, 415), (path, raw[:40], r.text)
            assert errors_of(r)
        r = a.c.post(
            "/v1/payments/quotes", content=b'{"buyCurrency": "USD", "buyAmount": 1e400, "sellCurrency": "EUR"}', headers={**a.h, **JSON}
        )
        assert errors_of(r) == [("validation:quote:1011", "BuyAmount")]
        r = a.c.post("/v1/payments/beneficiaries", content=b"{" * 10000, headers={**a.h, **JSON})
        assert errors_of(r) == [("validation:request:1001", "")]
        stats = sb.stats()
        assert (stats["quotes"], stats["beneficiaries"], stats["deals"]) == (0, 0, 0)
        # the normal flow still works, on the same connection
        deal_id = a.booked("GBP", Decimal("250.50"), "EUR")
        assert sb.deal_status(deal_id) == "Booked"
        assert sb.stats()["deals"] == 1


def test_unknown_fields_are_ignored(fxpay_sandbox: Any) -> None:
    with api(fxpay_sandbox) as a:
        r = a.post(
            "/v1/payments/quotes",
            {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "EUR", "extra": {"nested": [1, 2]}},
        )
        assert r.status_code == 201
        assert "extra" not in a.read_quote(r.json()["id"])


# -- OpenAPI ----------------------------------------------------------------------------------


def test_openapi_document(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        r = c.get("/openapi.json")  # no token needed
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        doc = r.json()
        assert doc["openapi"] == "3.1.0"
        assert doc["servers"][0]["url"] == sb.base_url
        assert {p: sorted(v for v in ops if v in {"get", "post", "put", "delete", "patch"}) for p, ops in doc["paths"].items()} == {
            "/v1/oauth/authorize": ["get"],
            "/v1/oauth/login": ["post"],
            "/v1/oauth/consent": ["post"],
            "/v1/oauth/token": ["post"],
            "/v1/gca/virtual-accounts": ["get"],
            "/v1/payments/quotes": ["post"],
            "/v1/payments/quotes/{quoteId}": ["get"],
            "/v1/payments/beneficiaries": ["post"],
            "/v1/payments/deals": ["post"],
            "/v1/payments/deals/spot": ["post"],
            "/openapi.json": ["get"],
            # The admin API (tests/python/sandbox/test_served_sandbox.py).
            **{f"/_sandbox/{p}": ["get"] for p in ("info", "now", "deal_status/{dealId}", "deals", "deliveries", "stats")},
            **{f"/_sandbox/{p}": ["post"] for p in ADMIN_POSTS},
        }
        schemas = doc["components"]["schemas"]
        assert schemas["SupportedCurrency"]["enum"][:3] == ["USD", "EUR", "GBP"]
        assert "KWD" in schemas["SupportedCurrency"]["enum"]
        assert schemas["ClientId"]["enum"] == [sb.client_id]
        # every documented path answers something other than 404 on its documented method
        token = token_request(c, {"grant_type": "client_credentials", "client_id": sb.client_id, "client_secret": sb.client_secret}).json()[
            "access_token"
        ]
        for path, ops in doc["paths"].items():
            for method in ops:
                if method not in {"get", "post"}:
                    continue
                concrete = path.replace("{quoteId}", str(uuid.uuid4()))
                r = c.request(method.upper(), concrete, headers={**bearer(token), **JSON}, content=dumps({}) if method == "post" else None)
                if path == "/v1/payments/quotes/{quoteId}":
                    assert errors_of(r) == [("resource:quote:3001", "")]
                else:
                    assert r.status_code != 404 or "text/html" in r.headers["content-type"], (method, path)
                    assert r.status_code != 405, (method, path)

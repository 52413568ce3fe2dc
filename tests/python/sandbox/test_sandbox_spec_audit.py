"""Issue 31: the sandbox, its OpenAPI document and the client tell one story.

Each test drives the real sandbox over loopback HTTP and reads the document it serves at
``/openapi.json``; the client is the real one.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fxpay
from fxpay.testing import Sandbox, UnfiredFaultWarning

from sandbox_http_support import api, errors_of, http

SPOT = "/v1/payments/deals/spot"

# Issue 31.2 and 31.5: edge values, and the URLs the audit found on one side only.
CALLBACK_EDGES = [
    # the four the schema admitted and the sandbox refused
    "https://:443/hook",
    "https://@/hook",
    "https://a.test:99999/hook",
    "http://127.0.0.1:99999/h",
    # the two the client sent and the sandbox refused
    "http://LOCALHOST:9/x",
    "http://127.1:9/x",
    # ports
    "https://a.test:65535/h",
    "https://a.test:65536/h",
    "https://a.test:0/h",
    "https://a.test:080/h",
    "https://a.test:/h",
    "http://127.0.0.1:1/h",
    # hosts
    "https:///h",
    "https://user@a.test/h",
    "https://user:pw@a.test/h",
    "https://A.Example.TEST/h",
    "HTTPS://a.test/h",
    "http://LocalHost/h",
    "http://[::1]:8080/h",
    "http://[::2]/h",
    "http://127.255.255.255/h",
    "http://127.0.0.256/h",
    "http://127.0.0.01/h",
    "https://1.2.3.4/h",
    "https://1.2.3/h",
    "https://a..test/h",
    "https://-a.test/h",
    "https://xn--zz.test/h",
    "https://[2001:db8::1]/h",
    "http://a.test/h",
    "http://localhost.test/h",
    # the rest of the URL
    "https://a.test/%41%zz",
    "https://a.test/a%2",
    "https://a.test/[]@!$&'()*+,;=:~?#x#y",
    'https://a.test/"',
    "https://a.test/{x}",
    "https://a.test/a\\b",
    "https://a.test?x",
    "https://a.test#x",
    "ftp://a.test/h",
]


def _doc(sb: Any) -> dict[str, Any]:
    with http(sb) as c:
        r = c.get("/openapi.json")
        assert r.status_code == 200
        return dict(r.json())


def _callback_pattern(doc: dict[str, Any]) -> str:
    params = doc["paths"][SPOT]["post"]["parameters"]
    patterns = {p["schema"]["pattern"] for p in params if p["name"] in ("callback-location", "callback-url")}
    assert len(patterns) == 1, patterns
    return str(patterns.pop())


def _sandbox_accepts(a: Any, url: str) -> bool:
    # A body with field errors: the answer is a synchronous 400 either way, so no deal is
    # made and nothing is delivered; the question is only whether the header is refused.
    r = a.post(SPOT, {}, **{"callback-location": url})
    assert r.status_code == 400, r.text
    return ("validation:callback:1016", "callback-location") not in errors_of(r)


def _client_accepts(c: fxpay.Client, url: str) -> bool:
    # The client is bound to a closed port: a URL it lets through fails on the transport,
    # one it refuses fails before any request with InvalidRequestError.
    line = fxpay.DealBeneficiary(beneficiary_id=str(uuid.uuid4()), amount="1", pay_reason="r", pay_reference="p")
    try:
        c.create_spot_deal(
            quote_id=str(uuid.uuid4()),
            funding_source="Own account",
            beneficiaries=[line],
            callback_url=url,
        )
    except fxpay.InvalidRequestError:
        return False
    except fxpay.TransportError:
        return True
    raise AssertionError(f"{url!r} reached a closed port")


@pytest.fixture(scope="module")
def closed_port_client() -> Any:
    # A port held by a socket that is bound but never listens: connections to it are refused,
    # and no other server (another test's sandbox) can take it while the tests run.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with fxpay.Client("id", "secret", base_url=f"http://127.0.0.1:{port}", max_retries=0, timeout=5) as c:
            yield c


def _three_sides(sb: Any, a: Any, c: fxpay.Client, pattern: str, url: str) -> tuple[bool, bool, bool]:
    return (re.search(pattern, url) is not None, _sandbox_accepts(a, url), _client_accepts(c, url))


@pytest.mark.parametrize("url", CALLBACK_EDGES)
def test_schema_sandbox_and_client_agree_on_a_callback_url(fxpay_sandbox: Any, closed_port_client: Any, url: str) -> None:
    pattern = _callback_pattern(_doc(fxpay_sandbox))
    with api(fxpay_sandbox) as a:
        schema, sandbox, client = _three_sides(fxpay_sandbox, a, closed_port_client, pattern, url)
    assert schema == sandbox == client, f"{url!r}: schema {schema}, sandbox {sandbox}, client {client}"


def test_the_audits_urls_are_refused_and_upper_case_loopback_is_accepted(fxpay_sandbox: Any, closed_port_client: Any) -> None:
    pattern = _callback_pattern(_doc(fxpay_sandbox))
    with api(fxpay_sandbox) as a:
        for url in [*CALLBACK_EDGES[:4], "http://127.1:9/x"]:
            assert _three_sides(fxpay_sandbox, a, closed_port_client, pattern, url) == (False, False, False), url
        # hosts compare case-insensitively, on both sides
        for url in ["http://LOCALHOST:9/x", "http://LocalHost/x", "https://A.TEST/x"]:
            assert _three_sides(fxpay_sandbox, a, closed_port_client, pattern, url) == (True, True, True), url


_PIECES = st.sampled_from(
    [
        "https://",
        "http://",
        "HTTP://",
        "localhost",
        "LOCALHOST",
        "127.0.0.1",
        "127.1",
        "[::1]",
        "a.test",
        "x",
        "0",
        "1",
        ".",
        "-",
        ":",
        ":443",
        ":65535",
        ":65536",
        ":99999",
        ":0",
        "@",
        "/",
        "?",
        "#",
        "%",
        "%41",
        "[",
        "]",
        "~",
        '"',
        "{",
        "|",
        "'",
    ]
)


@pytest.fixture(scope="module")
def module_sandbox() -> Any:
    with Sandbox() as sb:
        yield sb


@settings(max_examples=150, deadline=None)
@given(url=st.lists(_PIECES, min_size=1, max_size=8).map("".join))
def test_schema_sandbox_and_client_agree_on_generated_urls(module_sandbox: Any, closed_port_client: Any, url: str) -> None:
    sb = module_sandbox
    with api(sb) as a:
        schema, sandbox, client = _three_sides(sb, a, closed_port_client, _callback_pattern(_doc(sb)), url)
    assert schema == sandbox == client, f"{url!r}: schema {schema}, sandbox {sandbox}, client {client}"


# -- 31.7: callback headers on the synchronous deal endpoint ----------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"callback-location": "https://hooks.example.test/deal"},
        {"callback-url": "https://hooks.example.test/deal"},
        {"callback-nonce": "n-1"},
        {"callback-location": "http://127.0.0.1:9/deal", "callback-nonce": "n-1"},
    ],
)
def test_callback_headers_on_a_synchronous_deal_are_refused(fxpay_sandbox: Any, headers: dict[str, str]) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        quote_id = a.quote("USD", 1000, "AUD")
        amount = a.read_quote(quote_id)["sellAmount"]
        body = a.deal_body(quote_id, [(a.beneficiary("AUD"), amount)])
        r = a.post("/v1/payments/deals", body, **headers)
        assert r.status_code == 400, r.text
        assert errors_of(r) == [
            ("validation:callback:1017", name) for name in ["callback-location", "callback-url", "callback-nonce"] if name in headers
        ]
        message = r.json()["errors"][0]["message"]
        assert "/v1/payments/deals/spot" in message
        # Nothing was booked, and the quote is still free for the same deal without them.
        assert sb.deals() == []
        assert a.post("/v1/payments/deals", body).status_code == 201
    assert sb.deliveries() == []


def test_the_document_says_the_deal_endpoint_refuses_callback_headers(fxpay_sandbox: Any) -> None:
    op = _doc(fxpay_sandbox)["paths"]["/v1/payments/deals"]["post"]
    assert "validation:callback:1017" in op["description"]
    assert "validation:callback:1017" in op["responses"]["400"]["description"]


# -- 31.3 and 31.4: every status a body answers is listed -------------------------------------


def _operations_with_a_body(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            content = op.get("requestBody", {}).get("content", {})
            if content:
                (ctype,) = content
                out.append((method.upper(), path, ctype))
    return out


def _auth(sb: Any, path: str, payments: str) -> dict[str, str]:
    if path.startswith("/_sandbox/"):
        return {"Authorization": f"Bearer {sb.admin_token}"}
    if path.startswith("/v1/payments/"):
        return {"Authorization": f"Bearer {payments}"}
    return {}


def test_every_body_timeout_408_is_in_the_document() -> None:
    with Sandbox(body_timeout=0.5) as sb:
        doc = _doc(sb)
        ops = _operations_with_a_body(doc)
        assert len(ops) >= 13, ops
        payments = sb.client()._payments_token().access_token
        host, port = sb.base_url.removeprefix("http://").rsplit(":", 1)
        for method, path, ctype in ops:
            s = socket.create_connection((host, int(port)), timeout=30)
            head = f"{method} {path} HTTP/1.1\r\nHost: sandbox\r\nContent-Type: {ctype}\r\nContent-Length: 100\r\n"
            for k, v in _auth(sb, path, payments).items():
                head += f"{k}: {v}\r\n"
            s.sendall((head + "\r\n").encode() + b"{")
            answer = b""
            t0 = time.monotonic()
            while chunk := s.recv(65536):
                answer += chunk
            s.close()
            status = answer.split(b" ", 2)[1].decode()
            assert status == "408", (path, answer[:300])
            assert time.monotonic() - t0 >= 0.4
            assert status in doc["paths"][path][method.lower()]["responses"], f"{method} {path} answers 408 but does not list it"


def test_every_json_post_lists_the_request_errors_it_answers(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    doc = _doc(sb)
    json_ops = [(m, p) for m, p, ct in _operations_with_a_body(doc) if ct == "application/json"]
    assert len(json_ops) >= 10, json_ops
    with http(sb) as c, api(sb) as a:
        for method, path in json_ops:
            responses = doc["paths"][path][method.lower()]["responses"]
            headers = _auth(sb, path, a.token)
            for body, ctype in [
                (b"{", "application/json"),
                (b"[]", "application/json"),
                (b"{}", "text/plain"),
                (b"x" * (1 << 20 | 1), "application/json"),
            ]:
                r = c.request(method, path, content=body, headers={**headers, "Content-Type": ctype})
                status = str(r.status_code)
                assert status in responses, f"{method} {path} answers {status}, not listed"
                for code, _ in errors_of(r):
                    if code.startswith("validation:request:"):
                        number = code.rsplit(":", 1)[1]
                        assert code in responses[status]["description"] or number in responses[status]["description"], (
                            f"{method} {path}: {status} does not name {code}"
                        )


# -- 31.9: the authorize endpoint's 302 ------------------------------------------------------


def test_the_authorize_302_is_described_as_errors_only(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    r302 = _doc(sb)["paths"]["/v1/oauth/authorize"]["get"]["responses"]["302"]
    location = r302["headers"]["Location"]["description"]
    assert "never a `code`" in location
    assert "consent" in r302["description"]
    # and that is what it does: an error redirect carries no code
    with httpx.Client(base_url=sb.base_url, follow_redirects=False) as c:
        r = c.get(
            "/v1/oauth/authorize",
            params={"response_type": "code", "client_id": sb.client_id, "redirect_uri": sb.redirect_uri, "scope": "nope", "state": "s"},
        )
        assert r.status_code == 302
        assert "error=invalid_scope" in r.headers["location"]
        assert "code=" not in r.headers["location"]


# -- the rules page -------------------------------------------------------------------------


def test_the_rules_state_the_new_rules(fxpay_sandbox: Any) -> None:
    rules = " ".join(r["rule"] for t in _doc(fxpay_sandbox)["x-fxpay-rules"] for r in t["rules"])
    assert "most recent token response" in rules
    assert "validation:callback:1017" in rules
    assert "application/vnd.api+json" in rules
    assert "no user@" in rules


# -- 31.6: the client's nonce rule, enforced and documented ----------------------------------


def _client_accepts_nonce(c: fxpay.Client, nonce: str) -> bool:
    line = fxpay.DealBeneficiary(beneficiary_id=str(uuid.uuid4()), amount="1", pay_reason="r", pay_reference="p")
    try:
        c.create_spot_deal(
            quote_id=str(uuid.uuid4()),
            funding_source="Own account",
            beneficiaries=[line],
            callback_url="http://127.0.0.1:9/hook",
            callback_nonce=nonce,
        )
    except fxpay.InvalidRequestError:
        return False
    except fxpay.TransportError:
        return True
    raise AssertionError("reached a closed port")


def test_the_client_nonce_rule_is_enforced_and_documented(closed_port_client: Any) -> None:
    from pathlib import Path

    c = closed_port_client
    assert _client_accepts_nonce(c, "a" * 512)
    assert _client_accepts_nonce(c, "!~" * 10)
    for bad in ["a" * 513, "", "a b", " a", "caf\u00e9", "a\tb"]:
        assert not _client_accepts_nonce(c, bad), bad
    # The rule moved from the README to docs/spot-deals.md (issue 54 item 8).
    readme = (Path(__file__).resolve().parents[3] / "docs" / "spot-deals.md").read_text()
    spot = readme[readme.index("`create_spot_deal` checks the callback before sending") :].split("\n\n", 1)[0]
    assert "1 to 512 visible ASCII characters" in spot
    assert "1024 bytes" in spot


# -- 23.7: the admin API honours its own schema ---------------------------------------------


def _admin(sb: Any, c: httpx.Client, path: str, body: Any) -> httpx.Response:
    return c.post(path, json=body, headers={"Authorization": f"Bearer {sb.admin_token}"})


def test_the_clock_never_overflows_to_null(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        # Beyond the schema's maximum: refused, and the clock is untouched.
        r = _admin(sb, c, "/_sandbox/advance", {"seconds": 1e308})
        assert r.status_code == 400, r.text
        assert errors_of(r) == [("sandbox:admin:4000", "seconds")]
        # The largest advance the schema allows, twice: the clock stops at 9999-12-31T23:59:59Z.
        for _ in range(2):
            r = _admin(sb, c, "/_sandbox/advance", {"seconds": 1e15})
            assert r.status_code == 200, r.text
            assert r.json() == {"now": 253402300799.0}
        now = c.get("/_sandbox/now", headers={"Authorization": f"Bearer {sb.admin_token}"}).json()["now"]
        assert now == 253402300799.0


def test_admin_integers_are_json_schema_integers_and_null_is_not_one(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with http(sb) as c:
        # 380.0 is an integer for JSON Schema, as the document's `type: integer` says.
        r = _admin(sb, c, "/_sandbox/fail_next", {"path": "/v1/payments/quotes", "status": 380.0, "times": 2.0})
        assert r.status_code == 200, r.text
        with api(sb) as a:
            statuses = [
                a.post("/v1/payments/quotes", {"buyCurrency": "USD", "buyAmount": 10, "sellCurrency": "AUD"}).status_code for _ in range(3)
            ]
        assert statuses == [380, 380, 201]
        for body, field in [
            ({"path": "/x", "status": 500, "times": None}, "times"),
            ({"path": "/x", "status": 500.5}, "status"),
            ({"path": "/x", "status": 500, "retry_after": 4294967296}, "retry_after"),
        ]:
            r = _admin(sb, c, "/_sandbox/fail_next", body)
            assert r.status_code == 400, (body, r.text)
            assert errors_of(r) == [("sandbox:admin:4000", field)]
        # retry_after is nullable in the schema, and null means none.
        assert _admin(sb, c, "/_sandbox/fail_next", {"path": "/x", "status": 503, "retry_after": None}).status_code == 200
        # ...and the fault was set, with no Retry-After (it is never used: nothing asks for /x).
        with pytest.warns(UnfiredFaultWarning, match=r'fail_next\("/x", 503\): 1 use\(s\) left'):
            sb.reset()
        r = _admin(sb, c, "/_sandbox/register_client", {"client_id": "a", "client_secret": "b", "redirect_uris": None})
        assert r.status_code == 400, r.text
        assert errors_of(r) == [("sandbox:admin:4000", "redirect_uris")]
        r = _admin(sb, c, "/_sandbox/approve", {"auth_url": "/v1/oauth/authorize", "allow": None})
        assert r.status_code == 400, r.text


def test_approve_takes_a_relative_authorize_url_and_fetches_nothing_else(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    c = sb.client()
    auth = c.authorization_url(sb.redirect_uri)
    relative = auth.url[len(sb.base_url) :]
    assert relative.startswith("/v1/oauth/authorize?")
    with http(sb) as h:
        r = _admin(sb, h, "/_sandbox/approve", {"auth_url": relative})
        assert r.status_code == 200, r.text
        assert c.exchange_code(auth, r.json()["redirect_url"]).access_token
        # Another origin is not fetched: the query is played against this sandbox.
        auth = c.authorization_url(sb.redirect_uri)
        elsewhere = "https://elsewhere.invalid" + auth.url[len(sb.base_url) :]
        r = _admin(sb, h, "/_sandbox/approve", {"auth_url": elsewhere})
        assert r.status_code == 200, r.text
        assert c.exchange_code(auth, r.json()["redirect_url"]).access_token
        # Another path is refused; a query naming no known client is a 404.
        r = _admin(sb, h, "/_sandbox/approve", {"auth_url": "/v1/oauth/token"})
        assert (r.status_code, errors_of(r)) == (400, [("sandbox:admin:4000", "auth_url")])
        r = _admin(sb, h, "/_sandbox/approve", {"auth_url": "/v1/oauth/authorize?client_id=nobody"})
        assert (r.status_code, errors_of(r)) == (404, [("sandbox:admin:4041", "auth_url")])


def test_the_embedded_approve_follows_the_same_rule() -> None:
    # Sandbox.approve and the admin API's approve behave alike: the query is played against
    # this sandbox, whatever the origin; another path is refused before anything is fetched.
    with Sandbox() as sb:
        c = sb.client()
        auth = c.authorization_url(sb.redirect_uri)
        redirect = sb.approve("https://elsewhere.invalid" + auth.url[len(sb.base_url) :])
        assert c.exchange_code(auth, redirect).access_token
        with pytest.raises(fxpay.FxPayError, match="auth_url must be an authorize URL"):
            sb.approve("http://127.0.0.1:9/nothing-listens")

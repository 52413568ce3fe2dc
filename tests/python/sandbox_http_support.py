"""Helpers of the plain-HTTP sandbox tests (test_sandbox_http_*.py): httpx only, no fxpay.Client."""

from __future__ import annotations

import base64
import html
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import ROUND_HALF_UP, Decimal, localcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
#: The admin API's POST routes under /_sandbox/ (the OpenAPI document lists each).
ADMIN_POSTS = (
    "advance",
    "fail_next",
    "drop_next",
    "delay_next",
    "approve",
    "register_client",
    "reset",
    "redeliver",
    "set_virtual_accounts",
    "send_event",
)
NATIVE_REDIRECT_URI = "com.example.app:/oauth/callback"

# The sandbox's rate table (rates.rs): value of one unit in USD, flat fee, minor units.
USD_VALUE = {
    "USD": Decimal("1.000000"),
    "EUR": Decimal("1.085000"),
    "GBP": Decimal("1.270000"),
    "AUD": Decimal("0.655000"),
    "JPY": Decimal("0.006700"),
    "KWD": Decimal("3.250000"),
    "CHF": Decimal("1.130000"),
}
FLAT_FEE = {"USD": "5.00", "EUR": "5.00", "GBP": "4.00", "AUD": "7.50", "JPY": "750", "KWD": "1.500"}
MINOR = {"USD": 2, "EUR": 2, "GBP": 2, "AUD": 2, "JPY": 0, "KWD": 3, "CHF": 2}


def dumps(obj: Any) -> str:
    """JSON text with Decimals written exactly as their digits (json.dumps cannot)."""
    if isinstance(obj, Decimal):
        return str(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    return json.dumps(obj)


def dec_json(r: httpx.Response) -> Any:
    """The body with every non-integer number as an exact Decimal."""
    return json.loads(r.text, parse_float=Decimal)


def q(value: Decimal, places: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def expected_price(buy: str, sell: str, amount: Decimal) -> dict[str, Decimal]:
    """customerRate, inverseCustomerRate and sellAmount as the spec'd rules give them."""
    with localcontext() as ctx:
        ctx.prec = 50
        rate = q(USD_VALUE[buy] / USD_VALUE[sell] * Decimal("0.995"), 6)
        inverse = q(Decimal(1) / rate, 6)
        sell_amount = q(amount * rate, MINOR[sell])
    return {"customerRate": rate, "inverseCustomerRate": inverse, "sellAmount": sell_amount}


def http(sb: Any, **kw: Any) -> httpx.Client:
    return httpx.Client(base_url=sb.base_url, follow_redirects=False, timeout=10, trust_env=False, **kw)


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def token_request(c: httpx.Client, data: dict[str, str], headers: dict[str, str] | None = None) -> httpx.Response:
    return c.post("/v1/oauth/token", content=urlencode(data), headers={**FORM, **(headers or {})})


def payments_token(c: httpx.Client, client_id: str, secret: str) -> str:
    r = token_request(
        c,
        {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, "scope": "payments"},
    )
    assert r.status_code == 200, r.text
    return str(r.json()["access_token"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def auth_query(sb: Any, redirect_uri: str | None = None, state: str = "st-123", **extra: str) -> dict[str, str]:
    params = {
        "response_type": "code",
        "client_id": sb.client_id,
        "redirect_uri": redirect_uri or sb.redirect_uri,
        "scope": "gca-aisp",
        "state": state,
    }
    params.update(extra)
    return params


def hidden_fields(page: str) -> dict[str, str]:
    return {html.unescape(n): html.unescape(v) for n, v in re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page)}


def browser_login(c: httpx.Client, sb: Any, params: dict[str, str]) -> httpx.Response:
    """GET authorize, then POST the login form with the right password: the consent page."""
    page = c.get("/v1/oauth/authorize", params=params)
    assert page.status_code == 200, page.text
    form = hidden_fields(page.text)
    form.update(username=sb.username, password=sb.password)
    r = c.post("/v1/oauth/login", content=urlencode(form), headers=FORM)
    assert r.status_code == 200, r.text
    return r


def browser_code(c: httpx.Client, sb: Any, redirect_uri: str | None = None, state: str = "st-123") -> str:
    """Runs authorize → login → consent(allow) over HTTP; returns the code."""
    consent = browser_login(c, sb, auth_query(sb, redirect_uri, state))
    form = hidden_fields(consent.text)
    form["decision"] = "allow"
    r = c.post("/v1/oauth/consent", content=urlencode(form), headers=FORM)
    assert r.status_code == 302, r.text
    query = parse_qs(urlsplit(r.headers["location"]).query)
    assert query["state"] == [state]
    return query["code"][0]


def user_tokens(c: httpx.Client, sb: Any) -> dict[str, Any]:
    """A gca-aisp token response (access + refresh) for the sandbox user."""
    callback = sb.approve(
        f"{sb.base_url}/v1/oauth/authorize?{urlencode(auth_query(sb))}",
    )
    code = parse_qs(urlsplit(callback).query)["code"][0]
    r = token_request(
        c,
        {
            "grant_type": "authorization_code",
            "client_id": sb.client_id,
            "client_secret": sb.client_secret,
            "code": code,
            "redirect_uri": sb.redirect_uri,
            "scope": "gca-aisp",
        },
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def errors_of(r: httpx.Response) -> list[tuple[str, str]]:
    """(errorCode, fieldName) of every entry, after checking the body's shape."""
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert list(body) == ["errors"], body
    out = []
    for e in body["errors"]:
        assert set(e) == {"errorCode", "fieldName", "message"}, e
        assert re.fullmatch(r"[a-z]+:[a-z]+:\d{4}", e["errorCode"]), e
        assert isinstance(e["message"], str), e
        assert e["message"], e
        out.append((e["errorCode"], e["fieldName"]))
    return out


def address(country: str = "AU") -> dict[str, str]:
    return {
        "addressLine": "1 George St",
        "citySuburb": "Sydney",
        "stateProvince": "NSW",
        "postCode": "2000",
        "country": country,
    }


def beneficiary_body(currency: str = "AUD", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "currency": currency,
        "name": "Acme Pty Ltd",
        "classification": "Business",
        "paymentReason": "Invoice 42",
        "beneficiaryBankDetails": {
            "bankName": "Bank of Sydney",
            "bankBranchName": "George St",
            "branchCode": "062000",
            "account": "12345678",
            "bankAddress": address(),
        },
        "beneficiaryAddress": address(),
    }
    body.update(overrides)
    return body


class Api:
    """A payments-token session on one sandbox client, over plain httpx."""

    def __init__(self, c: httpx.Client, client_id: str, secret: str) -> None:
        self.c = c
        self.token = payments_token(c, client_id, secret)
        self.h = bearer(self.token)

    def post(self, path: str, body: Any, **headers: str) -> httpx.Response:
        h = {**self.h, "Content-Type": "application/json", **headers}
        return self.c.post(path, content=dumps(body), headers=h)

    def get(self, path: str) -> httpx.Response:
        return self.c.get(path, headers=self.h)

    def quote(self, buy: str = "USD", amount: Any = 1000, sell: str = "AUD", beneficiaries: int = 1) -> str:
        r = self.post(
            "/v1/payments/quotes",
            {"buyCurrency": buy, "buyAmount": amount, "sellCurrency": sell, "beneficiaries": beneficiaries},
        )
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def read_quote(self, quote_id: str) -> dict[str, Any]:
        r = self.get(f"/v1/payments/quotes/{quote_id}")
        assert r.status_code == 200, r.text
        return dict(dec_json(r))

    def beneficiary(self, currency: str = "AUD", **overrides: Any) -> str:
        r = self.post("/v1/payments/beneficiaries", beneficiary_body(currency, **overrides))
        assert r.status_code == 201, r.text
        return str(r.json()["beneficiaryId"])

    def deal_body(self, quote_id: str, lines: list[tuple[str, Any]], funding: str = "Own account") -> dict[str, Any]:
        return {
            "quoteId": quote_id,
            "fundingSource": funding,
            "channel": "FxpaySecure",
            "beneficiaries": [
                {"beneficiaryId": b, "amount": a, "payReason": "Invoice", "payReference": f"REF-{i}"} for i, (b, a) in enumerate(lines)
            ],
        }

    def deal(self, quote_id: str, lines: list[tuple[str, Any]]) -> httpx.Response:
        return self.post("/v1/payments/deals", self.deal_body(quote_id, lines))

    def booked(self, buy: str = "USD", amount: Any = 1000, sell: str = "AUD") -> str:
        """Quote + beneficiary + deal; returns the deal id."""
        quote_id = self.quote(buy, amount, sell)
        sell_amount = self.read_quote(quote_id)["sellAmount"]
        r = self.deal(quote_id, [(self.beneficiary(sell), sell_amount)])
        assert r.status_code == 201, r.text
        return str(r.json()["dealId"])


@contextmanager
def api(sb: Any) -> Iterator[Api]:
    with http(sb) as c:
        yield Api(c, sb.client_id, sb.client_secret)


class Receiver:
    """A real local HTTP listener for DealCreated notifications."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.requests: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with outer.cond:
                    status = outer.statuses.pop(0) if outer.statuses else 200
                    outer.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body,
                            "answered": status,
                        }
                    )
                    outer.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/deal"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                assert left > 0, f"only {len(self.requests)} of {n} notifications arrived"
                self.cond.wait(left)
            return list(self.requests)


def wait_for(pred: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)

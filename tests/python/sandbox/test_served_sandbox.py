"""The admin API of a served sandbox (`python -m fxpay.sandbox` in its own process), driven
through `fxpay.testing.RemoteSandbox` over real loopback HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary
from sandbox_http_support import ADMIN_POSTS
from served_support import remote, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    with served() as e:
        yield e


@pytest.fixture
def sb(env: dict[str, str]) -> fxpay.testing.RemoteSandbox:
    r = remote(env)
    r.reset()
    return r


def raw(env: dict[str, str], method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(env["FXPAY_BASE_URL"] + path, data=data, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def wait_for(cond: Callable[[], bool], seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def book(c: fxpay.Client) -> fxpay.Deal:
    qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
    q = c.get_quote(qid)
    bid = c.create_beneficiary(make_beneficiary())
    return c.create_deal(
        quote_id=qid,
        funding_source="Own account",
        beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "Invoice 42", "INV-42")],
    )


ADMIN_GETS = ["info", "now", "deals", "deliveries", "stats", "deal_status/x"]


@pytest.mark.parametrize("token", [None, "wrong-token", ""])
def test_every_admin_route_needs_the_token(env: dict[str, str], sb: fxpay.testing.RemoteSandbox, token: str | None) -> None:
    # `sb` resets the module's served sandbox: a fault another test left pending (e.g. the
    # never-firing "/_sandbox/*" one below) would otherwise fail the check at the end.
    for path in ADMIN_GETS:
        status, body = raw(env, "GET", f"/_sandbox/{path}", token)
        assert status == 401, path
        assert body["errors"][0]["errorCode"] == "sandbox:admin:4010"
    for path in ADMIN_POSTS:
        status, body = raw(env, "POST", f"/_sandbox/{path}", token, {"seconds": 1})
        assert status == 401, path
    # A client's own access token is no admin token either.
    with remote(env).client() as c:
        c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    # Nothing was changed by the refused calls.
    assert sb.stats()["faults_pending"] == 0


def test_admin_calls_are_neither_counted_nor_faulted(env: dict[str, str], sb: fxpay.testing.RemoteSandbox) -> None:
    sb.fail_next("/_sandbox/*", 500, times=5)
    assert sb.now() > 0
    status, _ = raw(env, "GET", "/_sandbox/stats", env["FXPAY_ADMIN_TOKEN"])
    assert status == 200
    st = sb.stats()
    assert st["requests"] == 0
    assert st["faults_fired"] == 0
    with pytest.warns(fxpay.testing.UnfiredFaultWarning, match=r"1 fault\(s\) set .* never fired before reset"):
        sb.reset()


def test_identity(env: dict[str, str], sb: fxpay.testing.RemoteSandbox) -> None:
    assert sb.base_url == env["FXPAY_BASE_URL"]
    assert (sb.client_id, sb.client_secret) == (env["FXPAY_CLIENT_ID"], env["FXPAY_CLIENT_SECRET"])
    assert (sb.username, sb.password) == (env["FXPAY_USERNAME"], env["FXPAY_PASSWORD"])
    assert sb.redirect_uri == env["FXPAY_REDIRECT_URI"]
    assert sb.admin_token == env["FXPAY_ADMIN_TOKEN"]
    assert sb.ca_bundle is None
    assert "FXPAY_CA_BUNDLE" not in env


def test_clock_deal_status_deals_stats_and_reset(sb: fxpay.testing.RemoteSandbox) -> None:
    with sb.client() as c:
        deal = book(c)
    assert sb.deal_status(deal.deal_id) == "Booked"
    t0 = sb.now()
    sb.advance(86399)
    assert 86399 <= sb.now() - t0 < 86399 + 60
    assert sb.deal_status(deal.deal_id) == "Booked"
    sb.advance(2)
    assert sb.deal_status(deal.deal_id) == "Paid"
    (d,) = sb.deals()
    assert d["dealId"] == deal.deal_id
    assert d["status"] == "Paid"
    st = sb.stats()
    assert st["token_requests"] == 1
    assert st["paths"]["POST /v1/payments/deals"] == 1
    assert st["deals"] == 1
    assert st["quotes"] == 1
    assert st["beneficiaries"] == 1
    sb.reset()
    assert sb.deals() == []
    st = sb.stats()
    assert (st["requests"], st["deals"], st["quotes"], st["beneficiaries"]) == (0, 0, 0, 0)
    with pytest.raises(fxpay.InvalidRequestError, match="no deal"):
        sb.deal_status(deal.deal_id)


def test_reset_forgets_faults_and_quotes(sb: fxpay.testing.RemoteSandbox) -> None:
    with sb.client(max_retries=0) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        sb.fail_next("/v1/payments/quotes", 503, times=3)
        assert sb.stats()["faults_pending"] == 1
        with pytest.warns(fxpay.testing.UnfiredFaultWarning, match=r"1 fault\(s\) set .* never fired before reset"):
            sb.reset()
        assert sb.stats()["faults_pending"] == 0
        with pytest.raises(fxpay.NotFoundError):
            c.get_quote(qid)
        c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")


def test_faults(sb: fxpay.testing.RemoteSandbox) -> None:
    with sb.client(max_retries=0) as c:
        sb.fail_next("POST /v1/payments/quotes", 429, retry_after=7)
        with pytest.raises(fxpay.RateLimitError) as e:
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        assert e.value.retry_after == 7
        sb.drop_next("/v1/payments/quotes", after_processing=False)
        with pytest.raises(fxpay.TransportError):
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        sb.delay_next("/v1/payments/quotes", 0.3)
        start = time.monotonic()
        c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        assert time.monotonic() - start >= 0.3
    assert sb.stats()["faults_fired"] == 3


def test_deliveries(sb: fxpay.testing.RemoteSandbox) -> None:
    got = threading.Event()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            got.set()

        def log_message(self, *args: Any) -> None:
            pass

    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        with sb.client() as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
            q = c.get_quote(qid)
            bid = c.create_beneficiary(make_beneficiary())
            s = c.create_spot_deal(
                quote_id=qid,
                funding_source="Own account",
                beneficiaries=[fxpay.DealBeneficiary(bid, Decimal(q.sell_amount), "Invoice 42", "INV-42")],
                callback_url=f"http://127.0.0.1:{hook.server_address[1]}/hook",
            )
        assert got.wait(20)
        wait_for(lambda: len(sb.deliveries()) == 1)
        (d,) = sb.deliveries()
        assert d["processId"] == s.process_id
        assert d["status"] == 200
        assert sb.stats()["deliveries_ok"] == 1
    finally:
        hook.shutdown()
        hook.server_close()


def test_approve_and_register_client(sb: fxpay.testing.RemoteSandbox) -> None:
    sb.register_client("second-client", "second-secret", ["https://second.example.test/cb"])
    with fxpay.Client("second-client", "second-secret", base_url=sb.base_url) as c:
        c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        auth = c.authorization_url("https://second.example.test/cb")
        redirect = sb.approve(auth.url)
        assert redirect.startswith("https://second.example.test/cb?")
        token = c.exchange_code(auth, redirect)
        assert len(c.user_session(token).list_virtual_accounts()) > 0
        denied = sb.approve(c.authorization_url("https://second.example.test/cb").url, allow=False)
        assert "error=access_denied" in denied
    with pytest.raises(fxpay.FxPayError, match="approve failed"):
        sb.approve("http://127.0.0.1:9/nothing-listens")


def test_bad_arguments(env: dict[str, str], sb: fxpay.testing.RemoteSandbox) -> None:
    with pytest.raises(TypeError, match="status"):
        sb.fail_next("/v1/payments/quotes", "500")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seconds"):
        sb.advance("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after_processing"):
        sb.drop_next("/x", after_processing=1)  # type: ignore[arg-type]
    with pytest.raises(fxpay.InvalidRequestError, match="status"):
        sb.fail_next("/v1/payments/quotes", 700)
    with pytest.raises(fxpay.InvalidRequestError, match="seconds"):
        sb.advance(float("nan"))
    with pytest.raises(fxpay.InvalidRequestError, match="seconds"):
        sb.delay_next("/x", -1)
    # The server checks too: a raw bad body is a 400 with the field named.
    status, body = raw(env, "POST", "/_sandbox/fail_next", env["FXPAY_ADMIN_TOKEN"], {"path": "/x", "status": 42})
    assert status == 400
    assert body["errors"][0]["fieldName"] == "status"
    status, body = raw(env, "POST", "/_sandbox/advance", env["FXPAY_ADMIN_TOKEN"], {"seconds": -5})
    assert status == 400
    assert body["errors"][0]["fieldName"] == "seconds"
    wrong = fxpay.testing.RemoteSandbox(env["FXPAY_BASE_URL"], client_id="a", client_secret="b", admin_token="not-the-token")
    with pytest.raises(fxpay.ConfigurationError, match="admin token"):
        wrong.now()
    with pytest.raises(TypeError, match="admin_token"):
        fxpay.testing.RemoteSandbox(env["FXPAY_BASE_URL"], client_id="a", client_secret="b", admin_token=None)  # type: ignore[arg-type]
    gone = fxpay.testing.RemoteSandbox("http://127.0.0.1:9", client_id="a", client_secret="b", admin_token="t")
    with pytest.raises(fxpay.TransportError):
        gone.now()
    assert sb.stats()["faults_pending"] == 0


def test_openapi_describes_the_admin_api(env: dict[str, str]) -> None:
    status, doc = raw(env, "GET", "/openapi.json", None)
    assert status == 200
    assert doc["components"]["securitySchemes"]["adminToken"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "The sandbox's admin token (FXPAY_ADMIN_TOKEN).",
    }
    ops = {path.removeprefix("/_sandbox/").split("/")[0] for path in doc["paths"] if path.startswith("/_sandbox/")}
    assert ops == {p.split("/")[0] for p in [*ADMIN_GETS, *ADMIN_POSTS]}
    for path, item in doc["paths"].items():
        if path.startswith("/_sandbox/"):
            for op in item.values():
                assert op["security"] == [{"adminToken": []}]
                assert "401" in op["responses"]

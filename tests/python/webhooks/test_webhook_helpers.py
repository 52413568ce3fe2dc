"""Issue 30 item 6: webhook helpers for tests. ``sb.redeliver`` sends a spot deal's recorded
DealCreated again (same body, nonce, URL), ``sb.send_deal_created`` sends one of the test's
choosing, and ``fxpay.testing.deal_created_request`` builds one for a framework's test
client. Real receivers (FastAPI under uvicorn, Django's threaded server) on loopback, the
embedded sandbox and a served one driven by RemoteSandbox."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fxpay
import fxpay.testing
from fxpay.testing import deal_created_request

import webhook_support as tw
from conftest import make_beneficiary

NONCE = "helper-n0nce-0123456789abcdef"
PID1 = "1b0c3a0e-1f2d-4c39-9d55-8a5f8d1e7a11"
PID2 = "2b0c3a0e-1f2d-4c39-9d55-8a5f8d1e7a12"
PID9 = "9b0c3a0e-1f2d-4c39-9d55-8a5f8d1e7a19"
DID9 = "d0ffee00-1234-4abc-8def-0123456789a9"


class App:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[fxpay.DealCreated] = []

    def record(self, ev: fxpay.DealCreated) -> None:
        with self.lock:
            self.events.append(ev)


@pytest.fixture(params=["fastapi", "django"])
def receiver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, App]]:
    app = App()
    monkeypatch.setattr(tw, "routes", lambda _rec: [("/hooks/deal", {"nonce": NONCE, "on_event": app.record})])
    serve = tw.serve_fastapi if request.param == "fastapi" else tw.serve_django
    gen = serve(tw.Recorder())
    base = next(gen)
    yield base + "/hooks/deal", app
    gen.close()


def wait_for(cond: Callable[[], Any], seconds: float = 10.0) -> Any:
    end = time.monotonic() + seconds
    while not (v := cond()):
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)
    return v


def book_spot(sb: Any, url: str) -> fxpay.SpotDeal:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        q = c.get_quote(qid)
        bid = c.create_beneficiary(make_beneficiary())
        return c.create_spot_deal(
            quote_id=qid,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "r", "ref")],
            callback_url=url,
            callback_nonce=NONCE,
        )


def test_redeliver_is_answered_200_without_a_second_on_event(receiver: tuple[str, App]) -> None:
    url, app = receiver
    with fxpay.testing.Sandbox() as sb:
        spot = book_spot(sb, url)
        first = wait_for(lambda: [d for d in sb.deliveries() if d["status"] == 200])
        wait_for(lambda: app.events)
        again = sb.redeliver(spot.process_id)
        assert again["kind"] == "redelivery"
        assert again["status"] == 200
        # Same body, nonce and URL as the first delivery.
        assert (again["body"], again["nonce"], again["url"]) == (first[0]["body"], first[0]["nonce"], first[0]["url"])
        assert again["processId"] == spot.process_id
        assert sb.deliveries()[-1] == again
        time.sleep(0.1)
        assert len(app.events) == 1  # on_event ran once


def test_send_deal_created_fail_reaches_on_event_with_the_errors(receiver: tuple[str, App]) -> None:
    url, app = receiver
    errors = [
        fxpay.FieldError("validation:beneficiary:1004", "PaymentReason", "Payment reason must not be empty"),
        {"errorCode": "business:deal:2001", "fieldName": None, "message": "Insufficient funds"},
    ]
    with fxpay.testing.Sandbox() as sb:
        d = sb.send_deal_created(url, status="fail", errors=errors, nonce=NONCE, process_id=PID1)
        assert d["status"] == 200
        assert d["kind"] == "sent"
        assert d["processId"] == PID1
        (ev,) = app.events
        assert (ev.status, ev.ok, ev.process_id, ev.deal_id) == ("fail", False, PID1, None)
        assert [(e.error_code, e.field_name, e.message) for e in ev.errors] == [
            ("validation:beneficiary:1004", "PaymentReason", "Payment reason must not be empty"),
            ("business:deal:2001", "", "Insufficient funds"),
        ]
        assert sb.deliveries() == [d]
        # A success with a generated process and deal id; a wrong nonce is refused (401).
        ok = sb.send_deal_created(url, nonce=NONCE)
        assert ok["status"] == 200
        assert app.events[-1].ok
        assert app.events[-1].deal_id
        assert sb.send_deal_created(url, nonce="wrong")["status"] == 401
        assert len(sb.deliveries()) == 3


def test_deal_created_request_drives_a_test_client() -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from fxpay.contrib.fastapi import deal_created_router

    app = App()
    api = FastAPI()
    api.include_router(deal_created_router(nonce=NONCE, on_event=app.record))
    body, headers = deal_created_request(process_id=PID9, deal_id=DID9, nonce=NONCE)
    assert headers == {"content-type": "application/json", "callback-nonce": NONCE}
    with TestClient(api) as http:
        assert http.post("/fxpay/deal-created", content=body, headers=headers).status_code == 200
        assert http.post("/fxpay/deal-created", content=body, headers=headers).json()["duplicate"] is True
    (ev,) = app.events
    assert (ev.process_id, ev.deal_id, ev.ok) == (PID9, DID9, True)
    assert fxpay.parse_deal_created(body, headers, nonce=NONCE) == ev


def test_the_helpers_build_the_same_bytes_the_sandbox_sends(receiver: tuple[str, App]) -> None:
    url, _app = receiver
    body, _ = deal_created_request(status="fail", process_id=PID2, errors=[{"errorCode": "a:b:1", "message": "m"}])
    with fxpay.testing.Sandbox() as sb:
        d = sb.send_deal_created(url, status="fail", process_id=PID2, errors=[{"errorCode": "a:b:1", "message": "m"}])
        import json

        assert d["body"] == json.loads(body)


def test_argument_checks() -> None:
    with pytest.raises(fxpay.InvalidRequestError, match="status"):
        deal_created_request(status="ok")
    with pytest.raises(TypeError, match="errors"):
        deal_created_request(status="fail", errors="boom")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"errors\[0\]"):
        deal_created_request(status="fail", errors=[42])  # type: ignore[list-item]
    with pytest.raises(fxpay.InvalidRequestError, match="deal_id"):
        deal_created_request(status="fail", deal_id="d")
    with pytest.raises(TypeError, match="nonce"):
        deal_created_request(nonce=1)  # type: ignore[arg-type]
    with fxpay.testing.Sandbox() as sb:
        with pytest.raises(fxpay.InvalidRequestError, match="no DealCreated"):
            sb.redeliver("nope")
        with pytest.raises(TypeError, match="process_id"):
            sb.redeliver(1)  # type: ignore[arg-type]
        with pytest.raises(fxpay.InvalidRequestError, match="url"):
            sb.send_deal_created("ftp://127.0.0.1/x")
        # An unreachable receiver is a recorded delivery with an error, not an exception.
        d = sb.send_deal_created("http://127.0.0.1:9/x")
        assert d["status"] is None
        assert d["error"]


def test_each_wrong_argument_is_named_in_its_refusal() -> None:
    """The exact refusal of each argument deal_created_request checks (the same checks guard
    send_deal_created on both sandboxes)."""
    bad_nonce = "nonce must be 1 to 512 visible ASCII characters, as a callback_nonce is, got "
    refusals: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"process_id": ""}, fxpay.InvalidRequestError, "process_id must not be empty"),
        ({"deal_id": ""}, fxpay.InvalidRequestError, "deal_id must not be empty"),
        ({"nonce": ""}, fxpay.InvalidRequestError, "nonce must not be empty"),
        (
            {"nonce": "a\r\nx-injected: 1"},
            fxpay.InvalidRequestError,
            bad_nonce + "'a\\r\\nx-injected: 1'",
        ),
        (
            {"nonce": "n" * 513},
            fxpay.InvalidRequestError,
            bad_nonce + repr("n" * 513),
        ),
        (
            {"nonce": "café"},
            fxpay.InvalidRequestError,
            bad_nonce + "'café'",
        ),
        ({"status": 1}, TypeError, "status must be a str, got int"),
        (
            {"status": "fail", "errors": {"errorCode": "a:b:1"}},
            TypeError,
            "errors must be a sequence of fxpay.FieldError or mappings, got dict",
        ),
        ({"status": "fail", "errors": "a:b:1"}, TypeError, "errors must be a sequence of fxpay.FieldError or mappings, got str"),
        ({"status": "fail", "errors": 42}, TypeError, "errors must be a sequence of fxpay.FieldError or mappings, got int"),
        (
            {"status": "fail", "errors": [{"errorCode": "a:b:1", "field": "Amount"}]},
            fxpay.InvalidRequestError,
            "errors[0] has unknown keys ['field'] (errorCode, fieldName, message)",
        ),
        ({"status": "fail", "errors": [{"errorCode": 7}]}, TypeError, "errors[0]['errorCode'] must be a str, got int"),
        (
            {"status": "fail", "errors": [{"errorCode": "a:b:1"}, {"errorCode": "a:b:2", "fieldName": 3}]},
            TypeError,
            "errors[1]['fieldName'] must be a str or None, got int",
        ),
        (
            {"status": "fail", "errors": [{"errorCode": "a:b:1", "message": None}]},
            TypeError,
            "errors[0]['message'] must be a str, got NoneType",
        ),
        (
            {"errors": [{"errorCode": "a:b:1"}]},
            fxpay.InvalidRequestError,
            "errors are for a 'fail' event; a 'success' event carries none",
        ),
    ]
    for kw, kind, message in refusals:
        with pytest.raises(kind) as info:
            deal_created_request(**kw)
        assert str(info.value) == message
    # What is accepted: a fieldName of None or missing is "" on the wire, a message defaults to
    # "". The body is compact UTF-8 JSON, as the sandbox's own (no escaped non-ASCII); without
    # a nonce there is no callback-nonce header.
    body, headers = deal_created_request(
        status="fail",
        process_id=PID1,
        errors=[{"errorCode": "a:b:1", "fieldName": None}, fxpay.FieldError("a:b:2", "Amount", "zu hoch: 5 €")],
    )
    assert body == (
        b'{"eventType":"DealCreated","status":"fail","eventBody":{"processId":"' + PID1.encode() + b'","errors":'
        b'[{"errorCode":"a:b:1","fieldName":"","message":""},{"errorCode":"a:b:2","fieldName":"Amount","message":"'
        + "zu hoch: 5 €".encode()
        + b'"}]}}'
    )
    assert headers == {"content-type": "application/json"}


def test_remote_sandbox_has_the_helpers(receiver: tuple[str, App]) -> None:
    url, app = receiver
    with fxpay.testing.Sandbox() as served:
        remote = fxpay.testing.RemoteSandbox(
            served.base_url, client_id=served.client_id, client_secret=served.client_secret, admin_token=served.admin_token
        )
        spot = book_spot(remote, url)
        # The sandbox records a delivery once the receiver's answer is in, after on_event ran:
        # wait for that record, or the redelivery's may come first (seen once on CI).
        wait_for(lambda: [d for d in remote.deliveries() if d["kind"] == "callback" and d["status"] == 200])
        wait_for(lambda: app.events)
        again = remote.redeliver(spot.process_id)
        assert again["status"] == 200
        assert again["kind"] == "redelivery"
        sent = remote.send_deal_created(url, status="fail", errors=[{"errorCode": "x:y:1", "message": "m"}], nonce=NONCE)
        assert sent["status"] == 200
        assert app.events[-1].errors[0].error_code == "x:y:1"
        assert remote.deliveries()[-2:] == [again, sent]
        assert len([e for e in app.events if e.process_id == spot.process_id]) == 1
        with pytest.raises(fxpay.InvalidRequestError, match="no DealCreated"):
            remote.redeliver("nope")

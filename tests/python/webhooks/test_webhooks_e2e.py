"""End to end: the sandbox books spot deals and delivers DealCreated to a real uvicorn-served
FastAPI app and to a real Django server on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import fxpay
import fxpay.contrib.receiver
from fxpay.seen import Claim, MemorySeenSet

import webhook_support as tw
from conftest import make_beneficiary


class App:
    """The application behind the receivers: the nonces it stored with each SpotDeal and the
    events it saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.nonces: dict[str, str] = {}
        self.events: list[fxpay.DealCreated] = []
        self.flaky_failures = 0
        # Down for longer than the sandbox's whole default retry schedule (1.4 s).
        self.outage = Outage(2.0)

    def remember(self, spot: fxpay.SpotDeal) -> None:
        assert spot.callback_nonce is not None
        with self.lock:
            self.nonces[spot.process_id] = spot.callback_nonce

    def nonce_for(self, process_id: str) -> str | None:
        with self.lock:
            return self.nonces.get(process_id)

    def record(self, ev: fxpay.DealCreated) -> None:
        with self.lock:
            self.events.append(ev)

    def flaky(self, ev: fxpay.DealCreated) -> None:
        with self.lock:
            if self.flaky_failures == 0:
                self.flaky_failures += 1
                raise RuntimeError("database is restarting")
        self.record(ev)


class Outage(MemorySeenSet):
    """A seen-set that is down (Redis unreachable) for ``seconds`` from its first claim."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.claims: list[float] = []

    def claim(self, key: str) -> Claim:
        now = time.monotonic()
        self.claims.append(now)
        if now - self.claims[0] < self.seconds:
            raise ConnectionError("redis is down")
        return super().claim(key)


def app_routes(app: App) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/hooks/deal", {"nonce_for": app.nonce_for, "on_event": app.record}),
        ("/hooks/flaky", {"nonce_for": app.nonce_for, "on_event": app.flaky}),
        ("/hooks/outage", {"nonce_for": app.nonce_for, "on_event": app.record, "seen": app.outage}),
    ]


@pytest.fixture(params=["fastapi", "django"])
def receiver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, App]]:
    app = App()
    monkeypatch.setattr(tw, "routes", lambda _rec: app_routes(app))
    serve = tw.serve_fastapi if request.param == "fastapi" else tw.serve_django
    gen = serve(tw.Recorder())
    base = next(gen)
    yield base, app
    gen.close()


def wait_for(cond: Callable[[], bool], seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def spot(
    sb: Any, c: fxpay.Client, url: str, *, app: App | None = None, amount_delta: str = "0", nonce: str | None = None
) -> fxpay.SpotDeal:
    from decimal import Decimal

    qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    q = c.get_quote(qid)
    bid = c.create_beneficiary(make_beneficiary())
    # Hold the receiver's lookup until the application has stored the nonce, as a real app
    # would (it stores process_id and nonce in the same transaction that books the deal).
    lock = app.lock if app is not None else threading.Lock()
    with lock:
        s = c.create_spot_deal(
            quote_id=qid,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount + Decimal(amount_delta), "r", "ref")],
            callback_url=url,
            callback_nonce=nonce,
        )
        if app is not None:
            app.nonces[s.process_id] = s.callback_nonce or ""
    return s


def deliveries_for(sb: Any, process_id: str) -> list[dict[str, Any]]:
    return [d for d in sb.deliveries() if d["processId"] == process_id]


def test_success_event_reaches_the_app(fxpay_sandbox: Any, receiver: tuple[str, App]) -> None:
    base, app = receiver
    c = fxpay_sandbox.client()
    s = spot(fxpay_sandbox, c, f"{base}/hooks/deal", app=app)
    wait_for(lambda: len(deliveries_for(fxpay_sandbox, s.process_id)) == 1)
    ev = app.events[0]
    assert isinstance(ev, fxpay.DealCreated)
    assert ev.ok
    assert ev.status == "success"
    assert ev.process_id == s.process_id
    booked = [d for d in fxpay_sandbox.deals() if d["processId"] == s.process_id]
    assert [d["dealId"] for d in booked] == [ev.deal_id]
    assert [d["status"] for d in deliveries_for(fxpay_sandbox, s.process_id)] == [200]


def test_fail_event_reaches_the_app(fxpay_sandbox: Any, receiver: tuple[str, App]) -> None:
    base, app = receiver
    c = fxpay_sandbox.client()
    s = spot(fxpay_sandbox, c, f"{base}/hooks/deal", app=app, amount_delta="0.01")
    wait_for(lambda: len(app.events) == 1)
    ev = app.events[0]
    assert not ev.ok
    assert ev.status == "fail"
    assert ev.deal_id is None
    assert ev.process_id == s.process_id
    assert ev.errors
    assert all(isinstance(e, fxpay.FieldError) for e in ev.errors)
    assert ev.errors[0].layer == "business"
    assert ev.errors[0].component == "deal"
    assert not [d for d in fxpay_sandbox.deals() if d.get("processId") == s.process_id]


def test_a_forged_nonce_is_refused(fxpay_sandbox: Any, receiver: tuple[str, App]) -> None:
    base, app = receiver
    c = fxpay_sandbox.client()
    s = spot(fxpay_sandbox, c, f"{base}/hooks/deal", nonce="forged-nonce-value")
    app.nonces[s.process_id] = "the-real-nonce"
    wait_for(lambda: len(deliveries_for(fxpay_sandbox, s.process_id)) == 4)
    assert [d["status"] for d in deliveries_for(fxpay_sandbox, s.process_id)] == [401] * 4
    assert app.events == []


def test_a_tampered_body_is_refused(fxpay_sandbox: Any, receiver: tuple[str, App]) -> None:
    base, app = receiver
    c = fxpay_sandbox.client()
    s = spot(fxpay_sandbox, c, f"{base}/hooks/deal", app=app)
    wait_for(lambda: len(deliveries_for(fxpay_sandbox, s.process_id)) == 1)
    (sent,) = deliveries_for(fxpay_sandbox, s.process_id)
    body = sent["body"]
    tampered = {**body, "eventBody": {**body["eventBody"], "dealId": "not-a-uuid"}}
    r = httpx.post(f"{base}/hooks/deal", json=tampered, headers={"callback-nonce": s.callback_nonce or ""})
    assert r.status_code == 400
    r = httpx.post(f"{base}/hooks/deal", json=body, headers={"callback-nonce": "guess"})
    assert r.status_code == 401
    assert len(app.events) == 1


def test_a_500_makes_the_sandbox_retry_and_the_retry_is_accepted(fxpay_sandbox: Any, receiver: tuple[str, App]) -> None:
    base, app = receiver
    c = fxpay_sandbox.client()
    s = spot(fxpay_sandbox, c, f"{base}/hooks/flaky", app=app)
    # The sandbox records an attempt once the receiver's answer is in.
    wait_for(lambda: len(deliveries_for(fxpay_sandbox, s.process_id)) == 2)
    attempts = deliveries_for(fxpay_sandbox, s.process_id)
    assert [d["status"] for d in attempts] == [500, 200]
    assert [d["attempt"] for d in attempts] == [1, 2]
    assert app.events[0].process_id == s.process_id


def test_a_seen_set_outage_is_a_503_the_sandbox_waits_out(
    fxpay_sandbox: Any, receiver: tuple[str, App], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 23 item 8: with 500s, a 2 s outage outlasted the sender's retries and the event
    # was lost. A 503 with Retry-After makes the sender wait until the seen-set is back.
    monkeypatch.setattr(fxpay.contrib.receiver, "SEEN_RETRY_AFTER", 3, raising=False)
    base, app = receiver
    c = fxpay_sandbox.client()
    s = spot(fxpay_sandbox, c, f"{base}/hooks/outage", app=app)
    wait_for(lambda: len(app.events) == 1, seconds=20)
    # The sandbox records an attempt once the receiver's answer is in: after on_event ran.
    wait_for(lambda: len(deliveries_for(fxpay_sandbox, s.process_id)) == 2)
    attempts = deliveries_for(fxpay_sandbox, s.process_id)
    assert [d["status"] for d in attempts] == [503, 200]
    assert app.events[0].process_id == s.process_id
    first, second = app.outage.claims
    assert second - first >= 3.0  # the sandbox waited as Retry-After asked

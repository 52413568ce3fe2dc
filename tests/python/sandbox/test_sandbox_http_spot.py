"""Spot deals and DealCreated notifications to a real local receiver, over plain HTTP (httpx)."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

from sandbox_http_support import Api, Receiver, api, dumps, errors_of, wait_for

SPOT = "/v1/payments/deals/spot"


def spot_body(a: Api, buy: str = "USD", sell: str = "AUD") -> dict[str, Any]:
    quote_id = a.quote(buy, 1000, sell)
    return a.deal_body(quote_id, [(a.beneficiary(sell), a.read_quote(quote_id)["sellAmount"])])


def test_spot_success_event_with_nonce(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver() as rx:
        body = spot_body(a)
        headers = {**a.h, "Content-Type": "application/json", "callback-location": rx.url}
        headers["callback-nonce"] = "n0nce-42 ✓".encode()  # type: ignore[assignment]  # raw bytes
        r = a.c.post(SPOT, content=dumps(body), headers=headers)
        assert r.status_code == 202, r.text
        assert r.headers["content-type"] == "application/json"
        process_id = r.json()["processId"]
        assert r.json() == {"processId": process_id}
        assert uuid.UUID(process_id).version == 4
        (got,) = rx.wait(1)
        assert got["path"] == "/hooks/deal"
        assert got["headers"]["content-type"] == "application/json"
        # the nonce comes back byte for byte
        assert got["headers"]["callback-nonce"].encode("latin-1") == "n0nce-42 ✓".encode()
        event = json.loads(got["body"])
        deal_id = event["eventBody"]["dealId"]
        assert event == {
            "eventType": "DealCreated",
            "status": "success",
            "eventBody": {"processId": process_id, "dealId": deal_id},
        }
        assert sb.deal_status(deal_id) == "Booked"
        (deal,) = sb.deals()
        assert (deal["dealId"], deal["kind"], deal["processId"], deal["quoteId"]) == (
            deal_id,
            "spot",
            process_id,
            body["quoteId"],
        )
        (delivery,) = wait_for(lambda: sb.deliveries())
        assert delivery["processId"] == process_id
        assert delivery["url"] == rx.url
        assert delivery["attempt"] == 1
        assert delivery["status"] == 200
        assert delivery["error"] is None
        assert delivery["body"] == event
        # the spot deal used the quote: a plain deal on it now conflicts
        r = a.post("/v1/payments/deals", body)
        assert r.status_code == 409
        assert errors_of(r) == [("business:deal:2002", "QuoteId")]
        sb.advance(86400.5)
        assert sb.deal_status(deal_id) == "Paid"


def test_spot_fail_event_lists_the_errors(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver() as rx:
        quote_id = a.quote("USD", 1000, "AUD", beneficiaries=2)
        body = a.deal_body(quote_id, [(a.beneficiary("EUR"), Decimal(5))])
        r = a.post(SPOT, body, **{"callback-location": rx.url})
        assert r.status_code == 202  # business rules are not checked synchronously
        process_id = r.json()["processId"]
        (got,) = rx.wait(1)
        assert "callback-nonce" not in got["headers"]
        event = json.loads(got["body"])
        assert event["eventType"] == "DealCreated"
        assert event["status"] == "fail"
        assert set(event["eventBody"]) == {"processId", "errors"}
        assert event["eventBody"]["processId"] == process_id
        errors = event["eventBody"]["errors"]
        assert [(e["errorCode"], e["fieldName"]) for e in errors] == [
            ("business:deal:2004", "Beneficiaries"),
            ("business:deal:2005", "Beneficiaries[0].BeneficiaryId"),
            ("business:deal:2006", "Beneficiaries"),
        ]
        assert all(set(e) == {"errorCode", "fieldName", "message"} and e["message"] for e in errors)
        assert sb.deals() == []


def test_spot_unknown_quote_fails_in_the_event(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver() as rx:
        body = a.deal_body(str(uuid.uuid4()), [(a.beneficiary(), Decimal(10))])
        r = a.post(SPOT, body, **{"callback-url": rx.url, "callback-nonce": "abc"})
        assert r.status_code == 202
        (got,) = rx.wait(1)
        assert got["headers"]["callback-nonce"] == "abc"
        event = json.loads(got["body"])
        assert event["status"] == "fail"
        assert [(e["errorCode"], e["fieldName"]) for e in event["eventBody"]["errors"]] == [("business:deal:2001", "QuoteId")]


def test_spot_on_a_used_quote_fails_in_the_event(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver() as rx:
        body = spot_body(a)
        assert a.post("/v1/payments/deals", body).status_code == 201
        r = a.post(SPOT, body, **{"callback-location": rx.url})
        assert r.status_code == 202  # business rules are reported in the event
        (got,) = rx.wait(1)
        event = json.loads(got["body"])
        assert event["status"] == "fail"
        assert [(e["errorCode"], e["fieldName"]) for e in event["eventBody"]["errors"]] == [("business:deal:2002", "QuoteId")]
        assert len(sb.deals()) == 1


def test_callback_url_header_name_is_accepted(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver() as rx:
        r = a.post(SPOT, spot_body(a), **{"callback-url": rx.url})
        assert r.status_code == 202
        (got,) = rx.wait(1)
        event = json.loads(got["body"])
        assert event["status"] == "success"
        assert event["eventBody"]["processId"] == r.json()["processId"]
        assert wait_for(lambda: sb.deliveries())[0]["url"] == rx.url


def test_callback_location_wins_when_both_are_sent(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver() as first, Receiver() as second:
        r = a.post(SPOT, spot_body(a), **{"callback-url": first.url, "callback-location": second.url})
        assert r.status_code == 202
        second.wait(1)
        assert first.requests == []


def test_receiver_500_then_200_is_retried(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver([500, 503]) as rx:
        r = a.post(SPOT, spot_body(a), **{"callback-location": rx.url, "callback-nonce": "retry-me"})
        assert r.status_code == 202
        got = rx.wait(3)
        assert [g["answered"] for g in got] == [500, 503, 200]
        assert len({g["body"] for g in got}) == 1  # the same event every time
        assert all(g["headers"]["callback-nonce"] == "retry-me" for g in got)
        deliveries = wait_for(lambda: sb.deliveries() if len(sb.deliveries()) == 3 else None)
        assert [(d["attempt"], d["status"]) for d in deliveries] == [(1, 500), (2, 503), (3, 200)]
        # waits of 0.2 s and 0.4 s before attempts 2 and 3
        assert deliveries[2]["at"] - deliveries[0]["at"] >= 0.55
        assert {d["processId"] for d in deliveries} == {r.json()["processId"]}
        assert all(d["nonce"] == "retry-me" for d in deliveries)
        stats = sb.stats()
        assert (stats["deliveries"], stats["deliveries_ok"]) == (3, 1)
        # one deal, however many deliveries
        assert len(sb.deals()) == 1


def test_receiver_that_keeps_failing_gets_four_attempts(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a, Receiver([500, 500, 500, 500, 500]) as rx:
        assert a.post(SPOT, spot_body(a), **{"callback-location": rx.url}).status_code == 202
        rx.wait(4)
        deliveries = wait_for(lambda: sb.deliveries() if len(sb.deliveries()) == 4 else None)
        assert [(d["attempt"], d["status"]) for d in deliveries] == [(1, 500), (2, 500), (3, 500), (4, 500)]
        assert sb.stats()["deliveries_ok"] == 0


def test_unreachable_receiver_is_recorded_as_an_error(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with Receiver() as rx:
        dead = rx.url  # closed when the block ends
    with api(sb) as a:
        assert a.post(SPOT, spot_body(a), **{"callback-location": dead}).status_code == 202
        deliveries = wait_for(lambda: sb.deliveries() if len(sb.deliveries()) == 4 else None)
        assert all(d["status"] is None and d["error"] for d in deliveries)
        assert len(sb.deals()) == 1  # the deal is booked regardless


def test_spot_without_callback_still_books(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        r = a.post(SPOT, spot_body(a))
        assert r.status_code == 202
        deals = wait_for(lambda: sb.deals())
        assert deals[0]["processId"] == r.json()["processId"]
        assert sb.deliveries() == []


def test_spot_bad_callback_and_field_errors_are_synchronous_400(fxpay_sandbox: Any) -> None:
    sb = fxpay_sandbox
    with api(sb) as a:
        body = spot_body(a)
        for url in ["http://example.com/hook", "ftp://127.0.0.1/x", "not a url", "https:///nohost"]:
            r = a.post(SPOT, body, **{"callback-location": url})
            assert r.status_code == 400, url
            assert errors_of(r) == [("validation:callback:1016", "callback-location")]
        r = a.post(SPOT, body, **{"callback-url": "http://10.0.0.1/hook"})
        assert errors_of(r) == [("validation:callback:1016", "callback-url")]
        r = a.post(SPOT, body, **{"callback-nonce": "x" * 1025})
        assert errors_of(r) == [("validation:callback:1003", "callback-nonce")]
        # both headers are checked, even when callback-location is the one used
        r = a.post(SPOT, body, **{"callback-location": "https://a.example/x", "callback-url": "http://example.com/y"})
        assert errors_of(r) == [("validation:callback:1016", "callback-url")]
        r = a.c.post(SPOT, content='{"quoteId":', headers={**a.h, "Content-Type": "application/json"})
        assert r.status_code == 400
        assert errors_of(r) == [("validation:request:1001", "")]
        r = a.post(SPOT, {"quoteId": 5, "fundingSource": "Own account", "beneficiaries": {}})
        assert errors_of(r) == [("validation:deal:1002", "QuoteId"), ("validation:deal:1002", "Beneficiaries")]
        assert sb.deals() == []
        bad = {**body, "fundingSource": "Cash"}
        r = a.post(SPOT, bad, **{"callback-location": "http://example.com/"})
        assert errors_of(r) == [
            ("validation:callback:1016", "callback-location"),
            ("validation:deal:1008", "FundingSource"),
        ]
        # https anywhere and http to loopback are fine
        r = a.post(SPOT, body, **{"callback-location": "https://hooks.example.test/deal"})
        assert r.status_code == 202
        assert wait_for(lambda: sb.deals())[0]["quoteId"] == body["quoteId"]

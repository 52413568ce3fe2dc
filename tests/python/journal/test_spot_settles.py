"""A keyed spot deal whose answer was lost settles itself: its DealCreated, received by a real
server (uvicorn with the FastAPI router, or Django's) given the journal alone, is verified
against the nonce the journal issued and settles the key. The sandbox delivers over HTTP."""

from __future__ import annotations

import collections
import json
import logging
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

import fxpay

import webhook_support as tw
from conftest import make_beneficiary, need
from journal_support import deal_args, requests_to

SPOT = "POST /v1/payments/deals/spot"
SPOT_PATH = "/v1/payments/deals/spot"
WORKER = Path(__file__).with_name("spot_worker.py")

Receiver = tuple[str, fxpay.Journal, list[Any]]


def wait_until(cond: Callable[[], bool], what: str, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture(params=["fastapi", "django"])
def receiver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Receiver]:
    """A real server whose one route is given the journal alone (no nonce setting)."""
    need(request.param)
    need("uvicorn" if request.param == "fastapi" else "asgiref")
    journal = fxpay.SqliteJournal(tmp_path / "spot.journal")
    events: list[Any] = []
    monkeypatch.setattr(tw, "routes", lambda _rec: [("/hook", {"journal": journal, "on_event": events.append})])
    serve = tw.serve_fastapi if request.param == "fastapi" else tw.serve_django
    gen = serve(tw.Recorder())
    base = next(gen)
    yield base, journal, events
    gen.close()


def test_a_lost_spot_deal_is_settled_by_its_notification(fxpay_sandbox: Any, receiver: Receiver) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        fxpay_sandbox.drop_next(SPOT_PATH, after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_spot_deal(**args, callback_url=base + "/hook", idempotency_key="lost")
        assert requests_to(fxpay_sandbox, SPOT) == 1
        wait_until(lambda: journal.get("lost") is not None and journal.get("lost").state == "done", "the key was never settled")  # type: ignore[union-attr]
        (deal,) = [d for d in fxpay_sandbox.deals() if d.get("processId")]
        entry = journal.get("lost")
        assert entry is not None
        assert (entry.result, entry.deal_id) == (deal["processId"], deal["dealId"])
        assert journal.unknown() == []
        # A repeat returns the SpotDeal and sends nothing.
        again = c.create_spot_deal(**args, callback_url=base + "/hook", idempotency_key="lost")
        assert again.process_id == deal["processId"]
        assert again.callback_nonce  # the nonce the lost request carried
        assert requests_to(fxpay_sandbox, SPOT) == 1
    wait_until(lambda: len(events) == 1, "on_event never ran")
    assert [e.process_id for e in events] == [deal["processId"]]
    # A repeated delivery changes nothing and runs on_event no more.
    fxpay_sandbox.redeliver(deal["processId"])
    assert journal.get("lost") == entry
    assert len(events) == 1


def test_a_failed_spot_deal_releases_its_key(fxpay_sandbox: Any, receiver: Receiver) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        b = args["beneficiaries"][0]
        args["beneficiaries"] = [
            fxpay.DealBeneficiary(beneficiary_id=b.beneficiary_id, amount=b.amount + Decimal("0.01"), pay_reason="x", pay_reference="y")
        ]
        fxpay_sandbox.drop_next(SPOT_PATH, after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_spot_deal(**args, callback_url=base + "/hook", idempotency_key="bad")
        wait_until(lambda: journal.get("bad") is not None and journal.get("bad").state == "released", "the key was never released")  # type: ignore[union-attr]
        entry = journal.get("bad")
        assert entry is not None
        assert entry.result is None
        assert "failed" in (entry.error or "")
        assert journal.unknown() == []
    # The key is settled before on_event runs.
    wait_until(lambda: len(events) == 1, "on_event never ran")
    assert not events[0].ok
    assert fxpay_sandbox.deals() == []


def test_a_spot_deal_answered_normally_is_done_with_its_deal_id(fxpay_sandbox: Any, receiver: Receiver) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        spot = c.create_spot_deal(**deal_args(c), callback_url=base + "/hook", idempotency_key="ok")
    wait_until(lambda: len(events) == 1, "no event")
    entry = journal.get("ok")
    assert entry is not None
    (deal,) = fxpay_sandbox.deals()
    assert (entry.state, entry.result, entry.deal_id) == ("done", spot.process_id, deal["dealId"])


def test_a_nonce_the_journal_never_issued_is_a_401(fxpay_sandbox: Any, receiver: Receiver) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        spot = c.create_spot_deal(**deal_args(c), callback_url=base + "/hook", idempotency_key="mine")
    wait_until(lambda: len(events) == 1, "no event")
    body = tw.dumps(tw.success(spot.process_id))
    with httpx.Client(base_url=base) as http:
        for headers in ({"callback-nonce": "forged-" + "x" * 40}, {}, {"callback-nonce": (spot.callback_nonce or "") + "x"}):
            r = http.post("/hook", content=body, headers={"content-type": "application/json", **headers})
            assert r.status_code == 401, (headers, r.text)
        # Two nonce headers, one of them right: refused too.
        r = http.post("/hook", content=body, headers=[("callback-nonce", spot.callback_nonce or ""), ("callback-nonce", "x")])
        assert r.status_code == 401
        # The right nonce with a body that is not an event: 400.
        r = http.post("/hook", content=b"{}", headers={"callback-nonce": spot.callback_nonce or ""})
        assert r.status_code == 400
    assert len(events) == 1


def test_settle_deal_created_serves_a_receiver_written_by_hand(fxpay_sandbox: Any, tmp_path: Path) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    hook = "http://127.0.0.1:9/hook"  # the sandbox's own delivery goes nowhere: the test hands the event over
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        fxpay_sandbox.drop_next(SPOT_PATH, after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_spot_deal(**args, callback_url=hook, idempotency_key="hand")
        wait_until(lambda: len(fxpay_sandbox.deals()) == 1, "not booked")
        (deal,) = fxpay_sandbox.deals()
        nonce = json.loads(journal.get("hand").to_json())["nonce"]  # type: ignore[union-attr]
        body = tw.dumps(tw.success(deal["processId"], dealId=deal["dealId"]))
        with pytest.raises(fxpay.WebhookVerificationError, match="not issued by this journal"):
            fxpay.settle_deal_created(body, {"callback-nonce": "y" * 43}, journal=journal)
        assert journal.get("hand").state == "unknown"  # type: ignore[union-attr]
        with pytest.raises(fxpay.WebhookPayloadError):
            fxpay.settle_deal_created(b"[]", {"Callback-Nonce": nonce}, journal=journal)
        # Verified alone (what the receivers of fxpay.contrib build on): the key, nothing settled.
        verified, key = fxpay.journals.verify_deal_created(journal, body, {"Callback-Nonce": nonce})
        assert (verified.process_id, key) == (deal["processId"], "hand")
        assert journal.get("hand").state == "unknown"  # type: ignore[union-attr]
        ev = fxpay.settle_deal_created(body, {"Callback-Nonce": nonce}, journal=journal)
        assert (ev.process_id, ev.deal_id) == (deal["processId"], deal["dealId"])
        entry = journal.get("hand")
        assert entry is not None
        assert (entry.state, entry.result, entry.deal_id) == ("done", deal["processId"], deal["dealId"])
        assert c.create_spot_deal(**args, callback_url=hook, idempotency_key="hand").process_id == deal["processId"]
        assert requests_to(fxpay_sandbox, SPOT) == 1
    with pytest.raises(TypeError):
        fxpay.settle_deal_created(body, {"callback-nonce": nonce}, journal=object())  # type: ignore[arg-type]


def test_settle_spot_key_returns_the_entry_as_it_stands_and_logs_only_a_contradiction(
    fxpay_sandbox: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The two public steps of a receiver written by hand: ``settle_spot_key`` returns the
    key's entry as it now stands, settled or kept, and logs at error level only when the
    notification contradicts the key (a settle that goes through logs nothing)."""
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    hook = "http://127.0.0.1:9/hook"  # the sandbox's own delivery goes nowhere: the test hands the event over
    with fxpay_sandbox.client(journal=journal) as c:
        fxpay_sandbox.drop_next(SPOT_PATH, after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            c.create_spot_deal(**deal_args(c), callback_url=hook, idempotency_key="steps")
        wait_until(lambda: len(fxpay_sandbox.deals()) == 1, "not booked")
    (deal,) = fxpay_sandbox.deals()
    entry = journal.get("steps")
    assert entry is not None
    assert entry.state == "unknown"
    nonce = json.loads(entry.to_json())["nonce"]
    success = tw.dumps(tw.success(deal["processId"], dealId=deal["dealId"]))
    with caplog.at_level(logging.DEBUG, logger="fxpay.journal"):
        caplog.clear()
        event, key = fxpay.journals.verify_deal_created(journal, success, {"callback-nonce": nonce})
        settled = fxpay.journals.settle_spot_key(journal, key, event)
        assert settled is not None
        assert (settled.key, settled.state, settled.result, settled.deal_id) == ("steps", "done", deal["processId"], deal["dealId"])
        assert settled == journal.get("steps")
        # Delivered again: nothing changes, nothing is logged.
        assert fxpay.journals.settle_spot_key(journal, key, event) == settled
        assert [r for r in caplog.records if r.name == "fxpay.journal" and r.levelno >= logging.WARNING] == []
        # A fail for the done key: the key keeps what it had, returned as it stands, and the
        # contradiction is logged once.
        fail, _ = fxpay.journals.verify_deal_created(journal, tw.dumps(tw.fail(deal["processId"])), {"callback-nonce": nonce})
        kept = fxpay.journals.settle_spot_key(journal, key, fail)
        assert kept == settled == journal.get("steps")
        (rec,) = [r for r in caplog.records if r.name == "fxpay.journal" and r.levelno >= logging.WARNING]
        assert rec.levelno == logging.ERROR
        assert "'steps'" in rec.getMessage()
        assert "never releases a done key" in rec.getMessage()


def test_keyed_spot_deals_killed_at_random_settle_without_duplicates(
    fxpay_sandbox: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Chaos: a process booking 80 keyed spot deals is SIGKILLed at random moments 6 times,
    with a receiver running, then run to its end. No key is sent twice; every key whose spot
    deal the sandbox booked ends done; a key stays unknown only if its request never reached
    the sandbox."""
    need("fastapi")
    need("uvicorn")
    path = tmp_path / "chaos.journal"
    journal = fxpay.SqliteJournal(path)
    events: list[Any] = []
    monkeypatch.setattr(tw, "routes", lambda _rec: [("/hook", {"journal": journal, "on_event": events.append})])
    gen = tw.serve_fastapi(tw.Recorder())
    base = next(gen)
    try:
        with fxpay_sandbox.client() as c:
            bid = c.create_beneficiary(make_beneficiary())
            deals = []
            for i in range(80):
                qid = c.create_quote(buy_currency="USD", buy_amount=Decimal(50 + i), sell_currency="AUD")
                deals.append({"key": f"chaos-{i}", "quote_id": qid, "beneficiary_id": bid, "amount": str(c.get_quote(qid).sell_amount)})
        cfg = {
            "base_url": fxpay_sandbox.base_url,
            "client_id": fxpay_sandbox.client_id,
            "client_secret": fxpay_sandbox.client_secret,
            "journal": str(path),
            "callback_url": base + "/hook",
            "deals": deals,
        }
        argv = [sys.executable, str(WORKER), json.dumps(cfg)]
        # Each spot request's answer is held 30 ms, so a run books about 30 deals a second
        # whatever the build's speed: the kills below land inside runs, most of them while a
        # request is out.
        for _ in range(len(deals) * 2):
            fxpay_sandbox.delay_next(SPOT_PATH, 0.03)
        rng = random.Random(4242)
        kills = 0
        for _ in range(6):
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", p.communicate(timeout=60)
            # Killed at a random moment of its run (a run that finishes first is not a kill).
            time.sleep(rng.uniform(0.05, 0.4))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            p.communicate(timeout=60)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        last = json.loads(out.strip().splitlines()[-1])
        quote_of = {d["quote_id"]: d["key"] for d in deals}
        # Every delivery the sandbox owes has been made (4 tries at most, 1.4 s of backoff).
        time.sleep(3)
        deliveries = fxpay_sandbox.deliveries()
        booked = {d["processId"]: d for d in fxpay_sandbox.deals() if d.get("processId")}
        fails = [d for d in deliveries if '"fail"' in json.dumps(d)]
        duplicates = [d for d in fails if "business:deal:2002" in json.dumps(d)]
        states = collections.Counter()
        for d in deals:
            e = journal.get(d["key"])
            states[e.state if e is not None else "absent"] += 1
        sent = requests_to(fxpay_sandbox, SPOT)
        print(
            f"chaos: {kills} kills; last run {last}; spot requests {sent}; booked {len(booked)}; "
            f"fail events {len(fails)} (duplicates {len(duplicates)}); keys {dict(states)}"
        )
        assert duplicates == [], duplicates
        assert fails == [], fails
        for pid, deal in booked.items():
            key = quote_of[deal["quoteId"]]
            e = journal.get(key)
            assert e is not None, key
            assert (e.state, e.result, e.deal_id) == ("done", pid, deal["dealId"]), key
        booked_keys = {quote_of[d["quoteId"]] for d in booked.values()}
        for d in deals:
            e = journal.get(d["key"])
            if d["key"] not in booked_keys:
                # Never reached the sandbox: the kill came between the claim and the send.
                assert e is None or e.state in ("unknown", "released"), (d["key"], e)
        assert not [e.key for e in journal.unknown() if e.key in booked_keys]
        assert len(events) == len(booked)
        assert kills >= 4, kills
    finally:
        gen.close()

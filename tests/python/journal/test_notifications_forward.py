"""A notification settles only the claim its nonce was issued to, and only forward.

Each case sent a booked spot deal again before (issue 52): a ``fail`` carrying a booked deal's
own nonce released its key; one ``callback_nonce`` given to two keys let A's fail release B's
deal; a key released and used again kept its old nonce, so the old deal's redelivered fail
released the new deal. The notifications go over HTTP, from the sandbox to a real receiver
(uvicorn with the FastAPI router, given the journal alone).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay

import webhook_support as tw
from conftest import need
from journal_support import deal_args, requests_to

SPOT = "POST /v1/payments/deals/spot"
SPOT_PATH = "/v1/payments/deals/spot"

Receiver = tuple[str, fxpay.Journal, list[Any]]

#: The arguments each key's spot deal was booked with (a repeat must send the same request).
LAST_ARGS: dict[str, dict[str, Any]] = {}


def wait_until(cond: Callable[[], bool], what: str, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Receiver]:
    need("fastapi")
    need("uvicorn")
    journal = fxpay.SqliteJournal(tmp_path / "spot.journal")
    events: list[Any] = []
    monkeypatch.setattr(tw, "routes", lambda _rec: [("/hook", {"journal": journal, "on_event": events.append})])
    gen = tw.serve_fastapi(tw.Recorder())
    base = next(gen)
    yield base, journal, events
    gen.close()


def nonce_of(journal: fxpay.Journal, key: str) -> str:
    entry = journal.get(key)
    assert entry is not None
    nonce: str = json.loads(entry.to_json())["nonce"]
    return nonce


def booked(
    sb: Any, c: fxpay.Client, journal: fxpay.Journal, base: str, key: str, events: list[Any], **extra: Any
) -> tuple[dict[str, Any], fxpay.SpotDeal]:
    """A keyed spot deal, booked and settled by its own notification."""
    n = len(events)
    args = deal_args(c)
    spot = c.create_spot_deal(**args, callback_url=base + "/hook", idempotency_key=key, **extra)
    LAST_ARGS[key] = args
    wait_until(lambda: len(events) > n, "its DealCreated never came")
    (deal,) = [d for d in sb.deals() if d.get("processId") == spot.process_id]
    entry = journal.get(key)
    assert entry is not None
    assert (entry.state, entry.result, entry.deal_id) == ("done", spot.process_id, deal["dealId"])
    return deal, spot


def test_a_fail_with_a_booked_deals_own_nonce_never_releases_it(
    fxpay_sandbox: Any, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        for i in range(5):
            key = f"booked-{i}"
            _deal, spot = booked(fxpay_sandbox, c, journal, base, key, events)
            before = journal.get(key)
            sent = requests_to(fxpay_sandbox, SPOT)
            with caplog.at_level(logging.ERROR, logger="fxpay.journal"):
                caplog.clear()
                # A fail for this very deal, with its own nonce: answered 200 (the provider must
                # not deliver it again for ever), logged as an error, and the key kept as it was.
                d = fxpay_sandbox.send_deal_created(base + "/hook", status="fail", process_id=spot.process_id, nonce=nonce_of(journal, key))
                assert d["status"] == 200, d
                assert journal.get(key) == before
                assert any("fail" in r.getMessage() and key in r.getMessage() for r in caplog.records), caplog.text
                # A success naming another deal: kept too.
                d = fxpay_sandbox.send_deal_created(
                    base + "/hook", status="success", process_id=spot.process_id, deal_id=str(uuid.uuid4()), nonce=nonce_of(journal, key)
                )
                assert d["status"] == 200, d
                assert journal.get(key) == before
                # And one naming another process.
                d = fxpay_sandbox.send_deal_created(base + "/hook", status="fail", nonce=nonce_of(journal, key))
                assert d["status"] == 200, d
                assert journal.get(key) == before
            # The next call with the key replays: nothing is sent again.
            again = c.create_spot_deal(**LAST_ARGS[key], callback_url=base + "/hook", idempotency_key=key)
            assert again.process_id == spot.process_id
            assert requests_to(fxpay_sandbox, SPOT) == sent
    refs = [d["processId"] for d in fxpay_sandbox.deals() if d.get("processId")]
    assert len(refs) == len(set(refs)) == 5


def test_a_nonce_given_to_two_keys_is_refused_before_anything_is_sent(fxpay_sandbox: Any, receiver: Receiver) -> None:
    base, journal, events = receiver
    shared = "shared-" + "n" * 40
    with fxpay_sandbox.client(journal=journal) as c:
        _, spot_a = booked(fxpay_sandbox, c, journal, base, "A", events, callback_nonce=shared)
        sent = requests_to(fxpay_sandbox, SPOT)
        with pytest.raises(fxpay.InvalidRequestError, match='already issued to key "A"') as info:
            c.create_spot_deal(**deal_args(c), callback_url=base + "/hook", idempotency_key="B", callback_nonce=shared)
        assert "nothing was sent" in str(info.value)
        assert requests_to(fxpay_sandbox, SPOT) == sent
        b = journal.get("B")
        assert b is not None
        assert b.state == "released", b
        # A's fail (a forged one, or A's own) cannot touch B, and cannot release A.
        d = fxpay_sandbox.send_deal_created(base + "/hook", status="fail", process_id=spot_a.process_id, nonce=shared)
        assert d["status"] == 200
        a = journal.get("A")
        assert a is not None
        assert (a.state, a.result) == ("done", spot_a.process_id)
        # B with a nonce of its own goes through.
        _, spot_b = booked(fxpay_sandbox, c, journal, base, "B", events)
        assert spot_b.callback_nonce not in (None, shared)


def test_a_key_used_again_after_its_release_gets_a_fresh_nonce(fxpay_sandbox: Any, receiver: Receiver) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        for i in range(5):
            key = f"again-{i}"
            # The first claim fails its notification: released.
            fxpay_sandbox.fail_next(SPOT_PATH, 400)
            with pytest.raises(fxpay.ApiError):
                c.create_spot_deal(**deal_args(c), callback_url=base + "/hook", idempotency_key=key)
            first = journal.get(key)
            assert first is not None
            assert first.state == "released"
            old_nonce = json.loads(first.to_json())["nonce"]
            # Used again: a fresh nonce, the deal booked.
            _, spot = booked(fxpay_sandbox, c, journal, base, key, events)
            assert spot.callback_nonce
            assert spot.callback_nonce != old_nonce
            sent = requests_to(fxpay_sandbox, SPOT)
            # The old claim's nonce (its deal's fail redelivered) no longer settles the key.
            d = fxpay_sandbox.send_deal_created(base + "/hook", status="fail", nonce=old_nonce)
            assert d["status"] == 401, d
            e = journal.get(key)
            assert e is not None
            assert (e.state, e.result) == ("done", spot.process_id)
            # Giving the old nonce to the new claim by hand is refused too: one nonce, one claim.
            fxpay_sandbox.fail_next(SPOT_PATH, 400)
            with pytest.raises(fxpay.ApiError):
                c.create_spot_deal(
                    **deal_args(c), callback_url=base + "/hook", idempotency_key=key + "-x", callback_nonce=f"own-{i}-" + "z" * 40
                )
            with pytest.raises(fxpay.InvalidRequestError, match="earlier claim of this key"):
                c.create_spot_deal(
                    **deal_args(c), callback_url=base + "/hook", idempotency_key=key + "-x", callback_nonce=f"own-{i}-" + "z" * 40
                )
            assert requests_to(fxpay_sandbox, SPOT) == sent + 1


def test_settle_deal_created_by_hand_logs_a_contradiction_and_keeps_the_key(
    fxpay_sandbox: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = fxpay.SqliteJournal(tmp_path / "j.db")
    hook = "http://127.0.0.1:9/hook"  # the sandbox's own delivery goes nowhere: the test hands the event over
    with fxpay_sandbox.client(journal=journal) as c:
        spot = c.create_spot_deal(**deal_args(c), callback_url=hook, idempotency_key="hand")
        nonce = nonce_of(journal, "hand")
        before = journal.get("hand")
        assert before is not None
        assert before.state == "done"
        body = tw.dumps(tw.fail(spot.process_id))
        with caplog.at_level(logging.ERROR, logger="fxpay.journal"):
            ev = fxpay.settle_deal_created(body, {"callback-nonce": nonce}, journal=journal)
        assert not ev.ok
        assert journal.get("hand") == before
        (rec,) = [r for r in caplog.records if r.name == "fxpay.journal"]
        assert rec.levelno == logging.ERROR
        assert "never releases a done key" in rec.getMessage()

"""The receivers of fxpay.contrib, given the client's journal, record a spot deal's dealId on
its entry when its DealCreated arrives: the sandbox delivers it over HTTP to a real server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import fxpay

import webhook_support as tw
from conftest import need
from journal_support import deal_args

NONCE = "n" * 43


@pytest.fixture(params=["fastapi", "django"])
def receiver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, fxpay.MemoryJournal, list[Any]]]:
    need(request.param)
    need("uvicorn" if request.param == "fastapi" else "asgiref")
    journal = fxpay.MemoryJournal()
    events: list[Any] = []
    monkeypatch.setattr(tw, "routes", lambda _rec: [("/hook", {"nonce": NONCE, "on_event": events.append, "journal": journal})])
    serve = tw.serve_fastapi if request.param == "fastapi" else tw.serve_django
    gen = serve(tw.Recorder())
    base = next(gen)
    yield base, journal, events
    gen.close()


def test_a_spot_deals_entry_gets_its_deal_id(fxpay_sandbox: Any, receiver: tuple[str, fxpay.MemoryJournal, list[Any]]) -> None:
    base, journal, events = receiver
    with fxpay_sandbox.client(journal=journal) as c:
        spot = c.create_spot_deal(**deal_args(c), callback_url=base + "/hook", callback_nonce=NONCE, idempotency_key="spot-1")
    deadline = time.monotonic() + 30
    while not events:
        assert time.monotonic() < deadline, fxpay_sandbox.deliveries()
        time.sleep(0.02)
    entry = journal.get("spot-1")
    assert entry is not None
    booked = [d["dealId"] for d in fxpay_sandbox.deals() if d["processId"] == spot.process_id]
    assert len(booked) == 1
    assert events[0].deal_id == booked[0]
    assert (entry.result, entry.deal_id) == (spot.process_id, booked[0])
    # Recording it again (a repeated delivery) changes nothing.
    assert journal.complete_spot(spot.process_id, booked[0]) == entry


@pytest.mark.parametrize("framework", ["fastapi", "django"])
def test_a_receiver_refuses_a_journal_of_the_wrong_type(framework: str) -> None:
    """Both receivers check `journal` when they are made, not at the first delivery."""
    need(framework)
    if framework == "fastapi":
        from fxpay.contrib.fastapi import deal_created_router as make
    else:
        need("asgiref")
        from fxpay.contrib.django import deal_created_view as make

    with pytest.raises(TypeError, match="journal"):
        make(nonce=NONCE, on_event=print, journal=object())  # type: ignore[arg-type]
    make(nonce=NONCE, on_event=print, journal=fxpay.MemoryJournal())

"""Receiving DealCreated: a FastAPI app that books a spot deal and takes its notification.

The race-free pattern: the app chooses a reference and a nonce and stores them *before* it
books the deal; the callback URL carries the reference, and the receiver looks the nonce up
by it, so a notification that arrives before create_spot_deal has returned is still
verified. Run it and it serves the app next to an embedded sandbox, books one spot deal and
waits for the sandbox's notification.
"""

from __future__ import annotations

import secrets
import threading
import time

import uvicorn
from fastapi import FastAPI

import fxpay
from fxpay.contrib.fastapi import deal_created_router
from fxpay.testing import Sandbox

nonces: dict[str, str] = {}  # ref -> nonce; a real app keeps these in its database
outcomes: dict[str, fxpay.DealCreated] = {}  # ref -> the event


def nonce_for_ref(ref: str) -> str | None:
    return nonces.get(ref)


def on_event(event: fxpay.DealCreated, ref: str) -> None:
    outcomes[ref] = event  # runs at most once per processId


app = FastAPI()
app.include_router(deal_created_router(nonce_for_ref=nonce_for_ref, on_event=on_event, path="/hooks/deal-created"))


def main() -> None:
    with Sandbox() as sb, sb.client() as client:
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]

        quote_id = client.create_quote(buy_currency="USD", buy_amount="750", sell_currency="AUD")
        quote = client.get_quote(quote_id)
        beneficiary_id = client.create_beneficiary(
            fxpay.Beneficiary(
                currency="AUD",
                name="Acme Pty Ltd",
                classification="Business",
                payment_reason="Invoice 7",
                bank_details=fxpay.BankDetails(
                    bank_name="Bank of Sydney",
                    bank_branch_name="George St",
                    branch_code="062000",
                    account="12345678",
                    bank_address=fxpay.Address(
                        address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU"
                    ),
                ),
                address=fxpay.Address(
                    address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU"
                ),
            )
        )
        ref = "order-7"
        nonces[ref] = secrets.token_urlsafe(32)  # saved before the deal is booked
        spot = client.create_spot_deal(
            quote_id=quote_id,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, quote.sell_amount, "Invoice 7", "INV-7")],
            callback_url=f"http://127.0.0.1:{port}/hooks/deal-created?ref={ref}",
            callback_nonce=nonces[ref],
        )
        deadline = time.monotonic() + 10
        while ref not in outcomes and time.monotonic() < deadline:
            time.sleep(0.02)
        event = outcomes[ref]
        assert event.process_id == spot.process_id
        print(f"DealCreated {event.status}: process {event.process_id} -> deal {event.deal_id}")
        server.should_exit = True
        thread.join(5)


if __name__ == "__main__":
    main()

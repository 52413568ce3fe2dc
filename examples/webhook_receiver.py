"""Receiving DealCreated: a FastAPI app that books a spot deal and takes its notification.

The app stores each spot deal's nonce next to its process id; the receiver looks it up to
verify the notification. Run it and it serves the app next to an embedded sandbox, books one
spot deal and waits for the sandbox's notification.
"""

from __future__ import annotations

import threading
import time

import fxpay
import uvicorn
from fastapi import FastAPI
from fxpay.contrib.fastapi import deal_created_router
from fxpay.testing import Sandbox

nonces: dict[str, str] = {}  # a real app keeps these in its database, next to the deal
outcomes: dict[str, fxpay.DealCreated] = {}
saving = threading.Lock()


def nonce_for(process_id: str) -> str | None:
    with saving:
        return nonces.get(process_id)


def on_event(event: fxpay.DealCreated) -> None:
    outcomes[event.process_id] = event


app = FastAPI()
app.include_router(deal_created_router(nonce_for=nonce_for, on_event=on_event, path="/hooks/deal-created"))


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
                currency="AUD", name="Acme Pty Ltd", classification="Business", payment_reason="Invoice 7",
                bank_details=fxpay.BankDetails(
                    bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000",
                    account="12345678",
                    bank_address=fxpay.Address(address_line="1 George St", city_suburb="Sydney",
                                               state_province="NSW", post_code="2000", country="AU"),
                ),
                address=fxpay.Address(address_line="1 George St", city_suburb="Sydney",
                                      state_province="NSW", post_code="2000", country="AU"),
            )
        )
        with saving:  # store the nonce in the same step that books the deal
            spot = client.create_spot_deal(
                quote_id=quote_id,
                funding_source="Own account",
                beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, quote.sell_amount, "Invoice 7", "INV-7")],
                callback_url=f"http://127.0.0.1:{port}/hooks/deal-created",
            )
            assert spot.callback_nonce is not None
            nonces[spot.process_id] = spot.callback_nonce
        deadline = time.monotonic() + 10
        while spot.process_id not in outcomes and time.monotonic() < deadline:
            time.sleep(0.02)
        event = outcomes[spot.process_id]
        print(f"DealCreated {event.status}: process {event.process_id} -> deal {event.deal_id}")
        server.should_exit = True
        thread.join(5)


if __name__ == "__main__":
    main()

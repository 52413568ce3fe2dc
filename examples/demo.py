"""The whole flow against the embedded sandbox: quote, beneficiary, deal, spot deal (with
its DealCreated notification, received and verified here), consent, virtual accounts.
Run: python examples/demo.py"""

from __future__ import annotations

import asyncio
import queue
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fxpay
from fxpay.testing import Sandbox


def payments(sb: Sandbox) -> None:
    with sb.client() as c:
        quote_id = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
        quote = c.get_quote(quote_id)
        print(
            f"quote    {quote.buy_amount} {quote.buy_currency} -> {quote.sell_amount} {quote.sell_currency} "
            f"at {quote.customer_rate} (fee {quote.fee} {quote.fee_currency})"
        )
        address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
        beneficiary_id = c.create_beneficiary(
            fxpay.Beneficiary(
                currency="AUD",
                name="Acme Pty Ltd",
                classification="Business",
                payment_reason="Invoice 42",
                bank_details=fxpay.BankDetails(
                    bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000", account="12345678", bank_address=address
                ),
                address=address,
            )
        )
        print(f"benef.   {beneficiary_id}")
        deal = c.create_deal(
            quote_id=quote_id,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, quote.sell_amount, "Invoice 42", "INV-42")],
        )
        print(f"deal     {deal.deal_id} {sb.deal_status(deal.deal_id)}")
        sb.advance(86_400)
        print(f"deal     {deal.deal_id} {sb.deal_status(deal.deal_id)} (one sandbox day later)")
        spot_deal(c, beneficiary_id)


def spot_deal(c: fxpay.Client, beneficiary_id: str) -> None:
    """A spot deal answers at once with a process id; its outcome comes as a DealCreated
    notification to the callback URL, here a receiver on loopback that checks its nonce."""
    nonce = secrets.token_urlsafe(32)  # chosen (and saved) before the call: the event may come first
    events: queue.Queue[fxpay.DealCreated] = queue.Queue()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                events.put(fxpay.parse_deal_created(body, dict(self.headers), nonce=nonce))
                self.send_response(200)
            except fxpay.WebhookError:
                self.send_response(401)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        quote_id = c.create_quote(buy_currency="USD", buy_amount="250.00", sell_currency="AUD")
        quote = c.get_quote(quote_id)
        spot = c.create_spot_deal(
            quote_id=quote_id,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, quote.sell_amount, "Invoice 43", "INV-43")],
            callback_url=f"http://127.0.0.1:{server.server_address[1]}/deal-created",
            callback_nonce=nonce,
        )
        print(f"spot     process {spot.process_id}")
        event = events.get(timeout=30)
        print(f"spot     DealCreated {event.status}: deal {event.deal_id} (process {event.process_id})")
    finally:
        server.shutdown()
        server.server_close()


async def account_information(sb: Sandbox) -> None:
    async with sb.client() as c:
        auth = c.authorization_url(sb.redirect_uri)
        callback = sb.approve(auth.url)  # a browser would do this
        token = await c.exchange_code_async(auth, callback)
        session = c.user_session(token, on_token=lambda t: print("refreshed token saved"))
        for va in await session.list_virtual_accounts_async():
            print(f"account  {va['currency']} {va.get('accountName')} balance {va.get('balance')}")


def main() -> None:
    with Sandbox() as sb:
        print(f"sandbox  {sb.base_url}")
        payments(sb)
        asyncio.run(account_information(sb))
        print(f"stats    {sb.stats()['requests']} requests, {sb.stats()['token_requests']} token requests")


if __name__ == "__main__":
    main()

"""Quote, beneficiary and deal, blocking; then the same quote read with asyncio.

Runs against FXPAY_BASE_URL/FXPAY_CLIENT_ID/FXPAY_CLIENT_SECRET when they are set, else
against a throw-away embedded sandbox.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import ExitStack
from decimal import Decimal

import fxpay
from fxpay.testing import Sandbox


def open_client(stack: ExitStack) -> fxpay.Client:
    if os.environ.get("FXPAY_BASE_URL"):
        return stack.enter_context(fxpay.Client.from_env())
    sandbox = stack.enter_context(Sandbox())
    return stack.enter_context(sandbox.client())


def main() -> None:
    with ExitStack() as stack:
        client = open_client(stack)
        quote_id = client.create_quote(buy_currency="GBP", buy_amount=Decimal("2500.00"), sell_currency="EUR")
        quote = client.get_quote(quote_id)
        assert quote.sell_amount == (quote.buy_amount * quote.customer_rate).quantize(Decimal("0.01"))
        address = fxpay.Address(address_line="10 Rue de Rivoli", city_suburb="Paris", state_province="IDF", post_code="75001", country="FR")
        beneficiary_id = client.create_beneficiary(
            fxpay.Beneficiary(
                currency="EUR",
                name="Marie Curie SARL",
                classification="Business",
                payment_reason="Supplier invoice 2026-118",
                bank_details=fxpay.BankDetails(
                    bank_name="Banque de Paris",
                    bank_branch_name="Rivoli",
                    branch_code="30004",
                    account="FR7630004000031234567890143",
                    bank_address=address,
                ),
                address=address,
            )
        )
        deal = client.create_deal(
            quote_id=quote_id,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, quote.sell_amount, "Invoice 2026-118", "INV-2026-118")],
        )
        print(f"booked deal {deal.deal_id}: {quote.buy_amount} GBP -> {quote.sell_amount} EUR at {quote.customer_rate}")

        async def read_again() -> fxpay.Quote:
            return await client.get_quote_async(quote_id)

        assert asyncio.run(read_again()) == quote
        print("async read of the same quote: equal")


if __name__ == "__main__":
    main()

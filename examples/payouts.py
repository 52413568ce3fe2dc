"""A table of supplier payments paid twice over, as a re-run notebook cell would: the second
run books nothing. Then a lost answer, reconciled by hand. Run: python examples/payouts.py"""

from __future__ import annotations

import tempfile
from pathlib import Path

import fxpay
from fxpay.testing import Sandbox


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    journal = fxpay.SqliteJournal(folder / "payouts.journal")
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    bank = fxpay.BankDetails(
        bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000", account="12345678", bank_address=address
    )
    supplier = fxpay.Beneficiary(
        currency="AUD", name="Acme Pty Ltd", classification="Business", payment_reason="Invoices", bank_details=bank, address=address
    )
    with Sandbox() as sb, sb.client(journal=journal) as c:
        rows = [
            {
                "key": f"2026-11/ACME-{i}",
                "buy_currency": "USD",
                "buy_amount": f"{100 * (i + 1)}.00",
                "sell_currency": "AUD",
                "beneficiary": supplier,
                "pay_reason": "Invoice",
                "pay_reference": f"ACME-{i}",
            }
            for i in range(5)
        ]
        first = c.pay_out(rows, funding_source="Own account", progress=False)
        print("first run:", [r["status"] for r in first])
        again = c.pay_out(rows, funding_source="Own account", progress=False)
        print("again:    ", [r["status"] for r in again], f"({len(sb.deals())} deals in all)")
        assert len(sb.deals()) == 5

        # A deal whose answer is lost: unknown, never sent again until resolved.
        quote_id = c.create_quote(buy_currency="USD", buy_amount="50", sell_currency="AUD", idempotency_key="inv-99/quote")
        quote = c.get_quote(quote_id)
        paid = [fxpay.DealBeneficiary(first[0]["beneficiary_id"], quote.sell_amount, "Invoice", "INV-99")]
        sb.drop_next("POST /v1/payments/deals", after_processing=True)
        try:
            c.create_deal(quote_id=quote_id, funding_source="Own account", beneficiaries=paid, idempotency_key="inv-99/deal")
        except fxpay.OutcomeUnknownError as e:
            print("lost:     ", e.entry.state if e.entry else None)
        booked = next(d["dealId"] for d in sb.deals() if d["beneficiaries"][0]["payReference"] == "INV-99")
        journal.resolve("inv-99/deal", result=booked)  # found in the provider's records
        deal = c.create_deal(quote_id=quote_id, funding_source="Own account", beneficiaries=paid, idempotency_key="inv-99/deal")
        print("resolved: ", deal.deal_id == booked, f"({len(sb.deals())} deals in all)")


if __name__ == "__main__":
    main()

"""A process that books keyed spot deals under an SQLite journal, for the chaos test: it may be
killed at any moment. argv[1]: JSON with base_url, client_id, client_secret, journal (a path),
callback_url and deals (each key, quote_id, beneficiary_id, amount). Prints the outcome
counts as JSON when it ends."""

from __future__ import annotations

import collections
import json
import sys
from decimal import Decimal

import fxpay


def main() -> None:
    cfg = json.loads(sys.argv[1])
    counts: collections.Counter[str] = collections.Counter()
    journal = fxpay.SqliteJournal(cfg["journal"])
    with fxpay.Client(cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], journal=journal) as c:
        c.create_quote(buy_currency="USD", buy_amount=Decimal(1), sell_currency="AUD")  # the token first
        print("ready", flush=True)
        for d in cfg["deals"]:
            beneficiary = fxpay.DealBeneficiary(
                beneficiary_id=d["beneficiary_id"], amount=Decimal(d["amount"]), pay_reason="invoice", pay_reference=d["key"]
            )
            try:
                c.create_spot_deal(
                    quote_id=d["quote_id"],
                    funding_source="Own account",
                    beneficiaries=[beneficiary],
                    callback_url=cfg["callback_url"],
                    idempotency_key=d["key"],
                )
                counts["sent_or_replayed"] += 1
            except fxpay.OutcomeUnknownError:
                counts["unknown"] += 1
            except fxpay.InProgressError:
                counts["in_progress"] += 1
    print(json.dumps(dict(counts)), flush=True)


if __name__ == "__main__":
    main()

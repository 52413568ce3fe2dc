#!/usr/bin/env python3
"""Draws docs/img/payout-progress.png from a real run: ``Client.pay_out`` of 200 rows (one
refused for its currency, one whose deal's answer is lost, so unknown) against an embedded
``fxpay.testing.Sandbox``, with the progress bar on. The bar's lines are caught as tqdm
draws them; the picture shows one drawn about two thirds of the way and the last, as a
terminal shows them, rendered by headless chromium (Playwright).

Every line shown is checked first: its booked, refused, replayed and unknown add up to its
done count, and the last line's counts are the result's. A bar that draws its counts a row
late (issue 53: "134 done and 133 counted") stops the script.

    .venv/bin/python scripts/payout_progress_picture.py [--out docs/img/payout-progress.png]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import html
import io
import re
import shutil
import sys
from pathlib import Path

import fxpay
import fxpay.testing

ROOT = Path(__file__).resolve().parents[1]
ROWS = 200
PROMPT = 'result = client.pay_out(suppliers, funding_source="Own account")'
LINE = re.compile(r"pay_out:.*?(\d+)/(\d+) \[.*booked=(\d+), refused=(\d+), replayed=(\d+), unknown=(\d+)\]")


class Drawn(io.StringIO):
    """What tqdm writes, kept whole (it draws each line after a carriage return); UTF-8, as a
    terminal is, so that tqdm draws its bar in blocks rather than ``#``."""

    encoding = "utf-8"

    def isatty(self) -> bool:
        return False


def beneficiary() -> fxpay.Beneficiary:
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    bank = fxpay.BankDetails(
        bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000", account="12345678", bank_address=address
    )
    return fxpay.Beneficiary(
        currency="AUD", name="Acme", classification="Business", payment_reason="Invoices", bank_details=bank, address=address
    )


def pay() -> tuple[list[str], collections.Counter[str]]:
    """The bar's drawn lines and the result's statuses."""
    drawn = Drawn()
    with fxpay.testing.Sandbox() as sb, sb.client(journal=fxpay.MemoryJournal()) as client:
        bid = client.create_beneficiary(beneficiary())
        suppliers = [
            {
                "key": f"2026-11/ACME-{i}",
                "buy_currency": "USD",
                "buy_amount": f"{100 + i}.25",
                "sell_currency": "ZZZ" if i == 57 else "AUD",
                "beneficiary_id": bid,
                "pay_reason": "invoice",
                "pay_reference": f"ACME-{i}",
            }
            for i in range(ROWS)
        ]
        sb.drop_next("POST /v1/payments/deals", after_processing=True)  # booked, its answer lost
        with contextlib.redirect_stderr(drawn):
            result = client.pay_out(suppliers, funding_source="Own account", concurrency=8, progress=True)
    # The bar's first line (0 done, before any row ended) has no counts yet.
    lines = [part.strip() for part in re.split(r"[\r\n]", drawn.getvalue()) if LINE.search(part)]
    return lines, collections.Counter(r["status"] for r in result)


def counts(line: str) -> tuple[int, int, dict[str, int]]:
    m = LINE.search(line)
    if m is None:
        raise SystemExit(f"not a bar line with counts: {line!r}")
    done, total, booked, refused, replayed, unknown = map(int, m.groups())
    return done, total, {"booked": booked, "refused": refused, "replayed": replayed, "unknown": unknown}


def checked(lines: list[str], statuses: collections.Counter[str]) -> tuple[str, str]:
    """The line about two thirds of the way and the last, each checked."""
    for line in lines:
        done, _, by = counts(line)
        if sum(by.values()) != done:
            raise SystemExit(f"a drawn line's counts do not add up to its done count: {line!r}")
    *_, last = lines
    done, total, by = counts(last)
    if (done, total) != (ROWS, ROWS) or {k: v for k, v in by.items() if v} != dict(statuses):
        raise SystemExit(f"the last line is not the result ({dict(statuses)}): {last!r}")
    middle = next((line for line in lines if 0.6 * ROWS <= counts(line)[0] < ROWS), None)
    if middle is None:
        raise SystemExit(f"no line drawn between {int(0.6 * ROWS)} and {ROWS - 1} rows done: {lines}")
    return middle, last


def page(middle: str, last: str) -> str:
    def esc(text: str) -> str:
        return html.escape(text)

    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #1e1e1e; }}
pre {{ display: inline-block; margin: 0; padding: 12px 14px 40px 14px; background: #1e1e1e; color: #e8e8e8;
       font: 16px/1.25 "DejaVu Sans Mono", monospace; }}
.prompt {{ color: #8ae234; }} .comment {{ color: #8a8a8a; }}
</style></head><body><pre id="t"><span class="prompt">&gt;&gt;&gt;</span> {esc(PROMPT)}
{esc(middle)}
<span class="comment"># ... and when it has ended:</span>
{esc(last)}
</pre></body></html>"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "payout-progress.png")
    args = p.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs chromium (scripts/setup installs it)")
    from playwright.sync_api import sync_playwright

    lines, statuses = pay()
    middle, last = checked(lines, statuses)
    print(middle, last, sep="\n")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport={"width": 1200, "height": 200})
            tab.set_content(page(middle, last))
            tab.locator("#t").screenshot(path=str(args.out))
        finally:
            browser.close()
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

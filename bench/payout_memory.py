#!/usr/bin/env python3
"""Peak memory of a streamed payout: a process pays N rows from a generator with
``Client.pay_out_iter`` (8 in flight, a SqliteJournal) against ``python -m fxpay.sandbox`` in
its own process, and prints its own peak RSS (``VmHWM``). Issue 44: 100,000 rows under 200 MB,
and the peak flat in the table's length (20,000 rows within 10% of 5,000).

    python bench/payout_memory.py [--rows 5000,20000,100000] [--out bench/results]

Writes ``payout_memory.json`` and ``payout_memory.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import SandboxProcess  # noqa: E402

import fxpay  # noqa: E402

#: The paying process: N rows from a generator, then its own peak RSS and the statuses.
PAYER = """
import json, sys, fxpay
n, base, cid, secret, journal, bid = int(sys.argv[1]), *sys.argv[2:7]
def rows():
    for i in range(n):
        yield {"key": f"m{n}-{i}", "buy_currency": "USD", "buy_amount": "10", "sell_currency": "AUD",
               "beneficiary_id": bid, "pay_reason": "x", "pay_reference": f"M{n}-{i}"}
with fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(journal)) as c:
    counts = {}
    for r in c.pay_out_iter(rows(), funding_source="Own account", concurrency=8):
        counts[r["status"]] = counts.get(r["status"], 0) + 1
# VmHWM: this process's own peak (ru_maxrss is kept across fork and exec: the parent's).
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rss_kb": hwm, "counts": counts}))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="5000,20000,100000")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    sb = SandboxProcess("http")
    folder = Path(tempfile.mkdtemp(prefix="fxpay-bench-memory-"))
    t = sb.target
    runs = []
    try:
        with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url) as c:
            bid = c.create_beneficiary(_beneficiary())
        for n in sizes:
            started = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-c", PAYER, str(n), t.base_url, t.client_id, t.client_secret, str(folder / f"j{n}.db"), bid],
                capture_output=True,
                text=True,
                timeout=3600,
                check=False,
            )
            took = time.perf_counter() - started
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
            got = json.loads(r.stdout)
            runs.append({"rows": n, "peak_rss_mb": round(got["rss_kb"] / 1024, 1), "seconds": round(took, 1), "statuses": got["counts"]})
            print(f"{n:>7} rows: peak RSS {got['rss_kb'] / 1024:.1f} MB, {took:.0f} s, {got['counts']}", flush=True)
    finally:
        sb.close()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    by = {r["rows"]: r["peak_rss_mb"] for r in runs}
    targets = []
    if 100000 in by:
        targets.append({"name": "100,000 rows under 200 MB", "measured": by[100000], "result": "PASS" if by[100000] < 200 else "FAIL"})
    if 5000 in by and 20000 in by:
        ratio = by[20000] / by[5000]
        targets.append(
            {"name": "20,000 rows within 10% of 5,000", "measured": round(ratio, 3), "result": "PASS" if ratio <= 1.10 else "FAIL"}
        )
    doc = {"machine": machine, "runs": runs, "targets": targets}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "payout_memory.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Payouts: peak memory of a streamed table",
        "",
        "A process pays N rows from a generator with `Client.pay_out_iter` (8 in flight, a SqliteJournal) against",
        f"`python -m fxpay.sandbox` in its own process; its own peak RSS (`VmHWM`). {machine}.",
        "Made by `python bench/payout_memory.py`.",
        "",
        "| rows | peak RSS | seconds | statuses |",
        "| ---: | ---: | ---: | --- |",
        *(f"| {r['rows']:,} | {r['peak_rss_mb']} MB | {r['seconds']} | {r['statuses']} |" for r in runs),
        "",
        "| target | measured | result |",
        "| --- | ---: | --- |",
        *(f"| {x['name']} | {x['measured']} | {x['result']} |" for x in targets),
    ]
    (args.out / "payout_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _beneficiary() -> fxpay.Beneficiary:
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    bank = fxpay.BankDetails(
        bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000", account="12345678", bank_address=address
    )
    return fxpay.Beneficiary(
        currency="AUD", name="Acme", classification="Business", payment_reason="Invoices", bank_details=bank, address=address
    )


if __name__ == "__main__":
    raise SystemExit(main())

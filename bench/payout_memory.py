#!/usr/bin/env python3
"""Peak memory of a payout by the table's length and kind: a process pays N rows with
``Client.pay_out_iter`` over a generator, or ``Client.pay_out`` of a list, a pandas or a polars
DataFrame (8 in flight, a SqliteJournal) against ``python -m fxpay.sandbox`` in its own process,
and prints its own peak RSS (``VmHWM``), its RSS once the table was built and the result's
size. Issue 44: 100,000 rows under 200 MB. Issue 53: what ``pay_out`` holds above its input and
its result flat in the length (100,000 rows within 25 MB of 5,000).

    python bench/payout_memory.py [--rows 5000,20000,100000] [--kinds iter,list,pandas,polars] [--out bench/results]

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

#: The paying process: N rows of one kind of input, then its own peak RSS (``VmHWM``), its RSS
#: once the input was built (``VmRSS``), the size of the result table it got back, and the
#: statuses. ``iter``: ``pay_out_iter`` over a generator (nothing held); ``list``, ``pandas``,
#: ``polars``: ``pay_out`` of a table built first.
PAYER = """
import json, sys, fxpay
kind, n, base, cid, secret, journal, bid = sys.argv[1], int(sys.argv[2]), *sys.argv[3:8]
sys.path.insert(0, sys.argv[8])
from payout_memory_size import result_bytes
def status(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field + ":"))
def rows():
    for i in range(n):
        yield {"key": f"m{kind}{n}-{i}", "buy_currency": "USD", "buy_amount": "10", "sell_currency": "AUD",
               "beneficiary_id": bid, "pay_reason": "x", "pay_reference": f"M{kind}{n}-{i}"}
table = None if kind == "iter" else list(rows())
if kind == "pandas":
    import pandas as pd
    table = pd.DataFrame(table)
elif kind == "polars":
    import polars as pl
    table = pl.DataFrame(table)
before = status("VmRSS")
size = 0
with fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(journal)) as c:
    counts = {}
    if kind == "iter":
        for r in c.pay_out_iter(rows(), funding_source="Own account", concurrency=8):
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    else:
        out = c.pay_out(table, funding_source="Own account", concurrency=8, progress=False)
        statuses = out["status"] if kind != "list" else [r["status"] for r in out]
        for s in statuses:
            counts[s] = counts.get(s, 0) + 1
# VmHWM: this process's own peak (ru_maxrss is kept across fork and exec: the parent's), read
# before the result is sized (sizing a polars Object column lists its values).
peak = status("VmHWM")
if kind != "iter":
    size = result_bytes(out, kind)
print(json.dumps({"rss_kb": peak, "before_kb": before, "result_bytes": size, "counts": counts}))
"""

KINDS = ("iter", "list", "pandas", "polars")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="5000,20000,100000")
    p.add_argument("--kinds", default="iter,list,pandas,polars", help=f"of {', '.join(KINDS)}")
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    if not set(kinds) <= set(KINDS):
        p.error(f"--kinds: of {', '.join(KINDS)}")
    sb = SandboxProcess("http")
    folder = Path(tempfile.mkdtemp(prefix="fxpay-bench-memory-"))
    t = sb.target
    runs = []
    try:
        with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url) as c:
            bid = c.create_beneficiary(_beneficiary())
        for kind in kinds:
            for n in sizes:
                started = time.perf_counter()
                r = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        PAYER,
                        kind,
                        str(n),
                        t.base_url,
                        t.client_id,
                        t.client_secret,
                        str(folder / f"j{kind}{n}.db"),
                        bid,
                        str(HERE),
                    ],
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
                peak = got["rss_kb"] / 1024
                above = peak - got["before_kb"] / 1024 - got["result_bytes"] / 2**20
                runs.append(
                    {
                        "kind": kind,
                        "rows": n,
                        "peak_rss_mb": round(peak, 1),
                        "input_rss_mb": round(got["before_kb"] / 1024, 1),
                        "result_mb": round(got["result_bytes"] / 2**20, 1),
                        "above_input_and_result_mb": round(above, 1),
                        "seconds": round(took, 1),
                        "statuses": got["counts"],
                    }
                )
                print(
                    f"{kind:>7} {n:>7} rows: peak RSS {peak:.1f} MB, above input and result {above:.1f} MB, {took:.0f} s, {got['counts']}",
                    flush=True,
                )
    finally:
        sb.close()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    targets = []
    for kind in kinds:
        by = {r["rows"]: r for r in runs if r["kind"] == kind}
        if 100000 in by:
            targets.append(
                {
                    "name": f"{kind}: 100,000 rows under 200 MB",
                    "measured": by[100000]["peak_rss_mb"],
                    "result": "PASS" if by[100000]["peak_rss_mb"] < 200 else "FAIL",
                }
            )
        small = min(by, default=None)
        if small is not None and 100000 in by and small != 100000:
            grew = by[100000]["above_input_and_result_mb"] - by[small]["above_input_and_result_mb"]
            targets.append(
                {
                    "name": f"{kind}: above input and result, 100,000 rows within 25 MB of {small:,}",
                    "measured": round(grew, 1),
                    "result": "PASS" if grew <= 25 else "FAIL",
                }
            )
    doc = {"machine": machine, "runs": runs, "targets": targets}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "payout_memory.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Payouts: peak memory by the table's length and kind",
        "",
        "A process pays N rows against `python -m fxpay.sandbox` in its own process (8 in flight, a SqliteJournal):",
        "`iter` is `Client.pay_out_iter` over a generator (nothing held); `list`, `pandas`, `polars` are `Client.pay_out`",
        "of a table built first. Peak RSS is the process's own `VmHWM`; input RSS its `VmRSS` once the table was built;",
        "the result its deep size (pandas `memory_usage(deep=True)`, the list's dicts and values, polars' estimate of its",
        f"Arrow columns, and the Decimals of a `pl.Object` sell_amount); above input and result = peak - input RSS - result. {machine}.",
        "Made by `python bench/payout_memory.py`.",
        "",
        "| kind | rows | peak RSS | input RSS | result | above input and result | seconds | statuses |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *(
            f"| {r['kind']} | {r['rows']:,} | {r['peak_rss_mb']} MB | {r['input_rss_mb']} MB | {r['result_mb']} MB | "
            f"{r['above_input_and_result_mb']} MB | {r['seconds']} | {r['statuses']} |"
            for r in runs
        ),
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

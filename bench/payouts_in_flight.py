#!/usr/bin/env python3
"""Where a payout's rows/s goes with a durable journal: rows in flight against CPU.

``pay_out`` of ``--rows`` rows (quote, read the quote, deal) with a ``MemoryJournal`` and a
``SqliteJournal`` at each ``--in-flight`` depth (``concurrency``), against
``python -m fxpay.sandbox`` in its own process, interleaved in ``--rounds`` rounds (best
kept). Each cell reads, per row: the client's user and system CPU (``os.times``), the
sandbox's CPU (``/proc``), and the client's context switches (``getrusage``, every thread).

If the journal's commits were what held a row (a row waits for two claims, one after the
other), more rows in flight would hide them and rows/s would rise toward the memory
journal's; if CPU is what holds it, rows/s stays where the CPU per row puts it.

    python bench/payouts_in_flight.py [--rows 10000] [--in-flight 8,32,128] [--rounds 2] [--out bench/results]

Writes ``payouts_in_flight.{json,md}`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import SandboxProcess  # noqa: E402
from payouts import FUNDING, beneficiary, table  # noqa: E402

import fxpay  # noqa: E402

KINDS = ("memory", "SQLite")


def switches() -> int:
    """The process's context switches so far, voluntary and not, every thread's."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_nvcsw + r.ru_nivcsw


def cell(sb: SandboxProcess, journal: fxpay.Journal, rows: list[dict[str, Any]], depth: int) -> dict[str, float]:
    t = sb.target
    c = fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, journal=journal)
    c.create_quote(buy_currency="USD", buy_amount="1", sell_currency="AUD")  # the token, the pool
    n = len(rows)
    server0, times0, sw0 = sb.cpu(), os.times(), switches()
    started = time.perf_counter()
    out = c.pay_out(rows, funding_source=FUNDING, concurrency=depth, progress=False)
    took = time.perf_counter() - started
    times1, sw1, server1 = os.times(), switches(), sb.cpu()
    bad = [r for r in out if r["status"] != "booked"]
    assert not bad, bad[:3]
    return {
        "rows_per_second": n / took,
        "user_us": (times1.user - times0.user) / n * 1e6,
        "system_us": (times1.system - times0.system) / n * 1e6,
        "sandbox_us": ((server1 or 0.0) - (server0 or 0.0)) / n * 1e6,
        "switches": (sw1 - sw0) / n,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--in-flight", default="8,32,128", help="concurrency values (comma-separated)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    depths = [int(d) for d in args.in_flight.split(",") if d.strip()]
    folder = Path(tempfile.mkdtemp(prefix="fxpay-bench-in-flight-"))
    sb = SandboxProcess("http")
    runs: dict[str, list[dict[str, float]]] = {}
    try:
        t = sb.target
        bid = fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url).create_beneficiary(beneficiary())
        made = 0
        for r in range(args.rounds):
            for depth in depths:
                for kind in KINDS:
                    made += 1
                    j: fxpay.Journal = fxpay.SqliteJournal(folder / f"j{made}.db") if kind == "SQLite" else fxpay.MemoryJournal()
                    got = cell(sb, j, table(args.rows, f"f{made}r{r}", bid), depth)
                    runs.setdefault(f"{kind}, {depth}", []).append(got)
                    print(f"round {r} in flight {depth:4d} {kind:7s} " + " ".join(f"{k} {v:,.1f}" for k, v in got.items()), flush=True)
    finally:
        sb.close()
        shutil.rmtree(folder, ignore_errors=True)
    best = {k: max(v, key=lambda x: x["rows_per_second"]) for k, v in runs.items()}
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"rows": args.rows, "rounds": args.rounds, "machine": machine, "load_average_at_end": os.getloadavg(), "runs": runs, "best": best}
    (args.out / "payouts_in_flight.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Payouts: rows in flight against CPU",
        "",
        f"{args.rows:,} rows per cell, `pay_out` against `python -m fxpay.sandbox` in its own process; the round with the",
        f"best rows/s of {args.rounds} interleaved rounds. {machine}. Load average at the end: "
        + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        + ".",
        "Made by `python bench/payouts_in_flight.py"
        + (f" --rows {args.rows}" if args.rows != 10000 else "")
        + (f" --in-flight {args.in_flight}" if args.in_flight != "8,32,128" else "")
        + "`.",
        "",
        "| rows in flight | journal | rows/s | vs memory, same depth | client user µs/row | client system µs/row | sandbox µs/row"
        " | client+sandbox µs/row | context switches/row |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for depth in depths:
        mem = best[f"memory, {depth}"]["rows_per_second"]
        for kind in KINDS:
            b = best[f"{kind}, {depth}"]
            total = b["user_us"] + b["system_us"] + b["sandbox_us"]
            lines.append(
                f"| {depth} | {kind} | {b['rows_per_second']:,.0f} | {b['rows_per_second'] / mem:.2f}x | {b['user_us']:.0f} | "
                f"{b['system_us']:.0f} | {b['sandbox_us']:.0f} | {total:.0f} | {b['switches']:.1f} |"
            )
    (args.out / "payouts_in_flight.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

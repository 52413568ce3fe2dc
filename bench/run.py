#!/usr/bin/env python3
"""fxpay benchmark: fxpay against the usual Python HTTP clients and a pure-Rust ceiling,
over plain http and over TLS (HTTP/1.1 and h2).

    python bench/run.py                 # full run (report only, exit code 0)
    python bench/run.py --quick         # CI: small counts, one TLS pair; exit 1 only if blocking
                                        # fxpay < httpx.Client, or fxpay over TLS does not work
    python bench/run.py --write-readme  # docs/benchmarks.md's table from bench/results/results.json

The parts: ``bench/clients.py`` (how each client is driven), ``bench/measure.py`` (sandbox
processes, cells, rounds, CPU shares, the ceiling, cold start, tracing cost, the sandbox's
throughput, import time, RSS) and ``bench/report.py`` (tables, targets, results.{md,json,png}).
See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402 - after the path is set
import report  # noqa: E402


def attach_instructions(doc: dict[str, Any], path: Path) -> None:
    """Instructions per call are counted apart (bench/instructions.py: callgrind, minutes per
    cell): its table, if there is one, goes into the run's document with the build it counted,
    and bench/report.py judges its targets. A table of another fxpay build than the one this
    run measured is attached all the same, and said to be one (``same_build``)."""
    if not path.exists():
        return
    table = json.loads(path.read_text())
    doc["instructions"] = {k: table.get(k) for k in ("label", "n", "warmup", "build", "per_call", "churned", "quick")}
    doc["instructions"]["source"] = str(path)
    counted = (table.get("build") or {}).get("fxpay_extension_sha256")
    doc["instructions"]["same_build"] = counted is not None and counted == measure.fxpay_extension_sha256()
    if not doc["instructions"]["same_build"]:
        print(f"WARNING: {path} counted another fxpay build than this run's", file=sys.stderr)


def attach_tracing_instructions(doc: dict[str, Any], path: Path) -> None:
    """bench/tracing_instructions.py --count's document (fxpay's own instructions per traced
    attempt), counted apart like the instructions table, if there is one."""
    if path.exists():
        doc["tracing_instructions"] = {**json.loads(path.read_text()), "source": str(path)}


# The parts of a run that are not cells: a run of some cells only (``--only``, ``--no-ceiling``,
# ``--no-extras``) can take them from an earlier results.json (``--keep-from``).
KEPT_PARTS = ("ceiling", "ceiling_note", "cold", "tracing", "sandbox", "imports", "rss", "webhook", "webhook_rate")


def keep_from(doc: dict[str, Any], path: Path) -> None:
    """Takes every part of ``KEPT_PARTS`` this run did not measure, and every cell it did not
    (``rps``, ``cpu_us``, ``server_share``, ``samples``, ``errors``), from an earlier run's
    results.json; ``kept_from`` lists what came from there, and the page says so. The cells
    this run measured are all of this run, so a like-for-like comparison among them is of one
    run; a ratio against a kept part (the ceiling's table) mixes two runs."""
    old = json.loads(path.read_text())
    kept: list[str] = []
    for part in KEPT_PARTS:
        if not doc.get(part) and old.get(part):
            doc[part] = old[part]
            kept.append(part)
    measured = set(doc.get("rps") or {}) | set(doc.get("errors") or {})
    cells = []
    for k in old.get("rps") or {}:
        if k in measured:
            continue
        cells.append(k)
        for part in ("rps", "cpu_us", "server_share", "samples"):
            if k in (old.get(part) or {}):
                doc.setdefault(part, {})[k] = old[part][k]
    for k, v in (old.get("errors") or {}).items():
        if k not in measured and k not in doc.get("rps", {}):
            doc.setdefault("errors", {})[k] = v
    doc["kept_from"] = {
        "path": str(path),
        "parts": kept,
        "cells": cells,
        "seconds": old.get("seconds"),
        "load_average": (old.get("env") or {}).get("load_average"),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rss-child"]:
        measure.rss_child(argv[1:])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CI mode: small counts, the plain cells and one TLS pair")
    p.add_argument("--requests", type=int, help="requests per cell, at most (default 20000; --quick 2000)")
    p.add_argument("--cell-seconds", type=float, help="a slow client's cell makes about this many seconds of calls (default 10; --quick 3)")
    p.add_argument(
        "--min-cell-seconds",
        type=float,
        default=0.5,
        help="a fast client's cell makes at least about this many seconds of calls, whatever --requests says (default 0.5)",
    )
    p.add_argument("--rounds", type=int, help="interleaved rounds, best kept (default 3; --quick 1)")
    p.add_argument("--warmup", type=int, help="warm-up requests per cell (default 1000; --quick 200)")
    p.add_argument("--cold-processes", type=int, default=20, help="fresh processes per client for the cold start (default 20)")
    p.add_argument("--out", type=Path, help="output folder (default bench/results, --quick bench/results/quick)")
    p.add_argument("--only", action="append", help="measure only cells whose name contains this (repeatable)")
    p.add_argument("--no-ceiling", action="store_true", help="skip the pure-Rust ceiling")
    p.add_argument("--no-extras", action="store_true", help="skip cold start, tracing cost, the sandbox's throughput, import time and RSS")
    p.add_argument("--write-readme", action="store_true", help="only write docs/benchmarks.md's table from bench/results/results.json")
    p.add_argument(
        "--instructions",
        type=Path,
        default=HERE / "results" / "instructions.json",
        help="bench/instructions.py's table, judged in this report (default bench/results/instructions.json, if it exists)",
    )
    p.add_argument(
        "--keep-from",
        type=Path,
        help="an earlier results.json: the parts and cells this run does not measure are taken from it (the page lists them)",
    )
    args = p.parse_args(argv)
    if args.write_readme:
        report.write_readme(
            args.out / "results.json" if args.out else HERE / "results" / "results.json", HERE.parent / "docs" / "benchmarks.md"
        )
        return 0
    args.requests = args.requests or (2_000 if args.quick else 20_000)
    args.cell_seconds = args.cell_seconds or (3.0 if args.quick else 10.0)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (200 if args.quick else 1_000)
    out = args.out or (HERE / "results" / "quick" if args.quick else HERE / "results")

    res = measure.measure(args)
    doc = res.to_json()
    if args.keep_from:
        keep_from(doc, args.keep_from)
    attach_instructions(doc, args.instructions)
    attach_tracing_instructions(doc, HERE / "results" / "tracing_instructions.json")
    report.write(doc, out)

    if args.quick:
        fx, hx = res.rps.get("fxpay / loop"), res.rps.get("httpx.Client / loop")
        if fx is None:
            print("CI gate: FAIL (blocking fxpay could not be measured)")
            return 1
        tls_key = "fxpay / loop / https"
        if not args.only and tls_key not in res.rps:
            print(f"CI gate: FAIL (fxpay over TLS could not be measured: {res.errors.get(tls_key, 'not run')})")
            return 1
        tfx, thx = res.rps.get(tls_key), res.rps.get("httpx.Client / loop / https")
        if tfx and thx:
            print(f"TLS (reported, not gated): blocking fxpay {tfx:,.0f} req/s, httpx.Client {thx:,.0f} req/s ({tfx / thx:.2f}x)")
        if hx is None:
            print("CI gate: skipped (httpx.Client could not be measured)")
            return 0
        ok = fx >= hx
        print(f"CI gate (blocking fxpay >= httpx.Client): {'PASS' if ok else 'FAIL'} ({fx / hx:.2f}x)")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

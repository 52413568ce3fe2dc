#!/usr/bin/env python3
"""The journal's cost: 1,000 payout rows (quote, read the quote, deal) against a sandbox in its
own process, every way a user would write it, interleaved in rounds (best kept):

- ``gather, no journal``: the three calls per row with ``asyncio.gather`` in Python, 8 rows at
  a time, no keys (what the journal costs is measured against this);
- ``gather, SQLite`` / ``gather, Redis`` / ``gather, PostgreSQL``: the same, each creating
  call under a key;
- ``pay_out, memory`` / ``pay_out, SQLite`` / ``pay_out, Redis`` / ``pay_out, PostgreSQL``:
  ``Client.pay_out`` (rows run in the Rust core, 8 at a time).

- ``workers, Redis`` / ``workers, SQLite`` at 1, 2 and 4 processes (``--workers``): the table
  split in that many parts, each paid by ``pay_out`` in a process of its own (started first,
  all beginning together) under one shared journal, as Celery or Dask workers of
  ``fxpay.contrib`` pay their chunks; rows/s is the table over the time from the common start
  to the last process's end.

    python bench/payouts.py [--rows 1000] [--rounds 3] [--workers 1,2,4] [--out bench/results]
    python bench/payouts.py --only-workers --rows 2000   # the workers cells alone: payouts_workers.{json,md}
    python bench/payouts.py --storm [--rows 1000]         # a 429 storm alone: payouts_storm.{json,md}

``--storm`` (issue 53): ``--rows`` rows (1,000 by default) paid by one ``pay_out`` at
concurrency 128 against an embedded ``fxpay.testing.Sandbox(rate_limit=5)`` (some 3 requests a
row, so at least ``rows * 3 / 5`` seconds), with a SqliteJournal. The target: every row booked,
none refused; it records the answers 429 of the requests, the rows booked and refused, and the
seconds. ``tests/python/journal/test_payout_pressure.py`` pays 100 rows so on every run.

Writes ``payouts.json`` and ``payouts.md`` in ``--out``. Targets: ``pay_out, SQLite`` at least
0.7x ``gather, no journal`` rows/s, ``pay_out, PostgreSQL`` at least 0.6x, and ``pay_out`` at
least the hand-written gather on the same journal. PostgreSQL is a server of the bench's own
(``initdb`` in a temporary folder, loopback, ``fsync`` and ``synchronous_commit`` on), started
as the journal tests start theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
sys.path.insert(0, str(HERE.parent / "tests" / "python" / "journal"))

from measure import SandboxProcess  # noqa: E402

import fxpay  # noqa: E402

from postgres_support import PostgresServer  # noqa: E402

CONCURRENCY = 8
FUNDING = "Own account"

#: One worker process of the ``workers`` cells: waits for the common start, pays its part with
#: ``pay_out``, prints the seconds from the start to its end and its statuses.
WORKER = """
import json, sys, time, fxpay
cfg = json.loads(sys.stdin.read())
kind, where = cfg["journal"]
journal = fxpay.SqliteJournal(where) if kind == "SQLite" else fxpay.RedisJournal(where, prefix=cfg["prefix"])
c = fxpay.Client(cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], journal=journal)
c.create_quote(buy_currency="USD", buy_amount="1", sell_currency="AUD")  # the token, the pool
time.sleep(max(0.0, cfg["start_at"] - time.time()))
out = c.pay_out(cfg["rows"], funding_source="Own account", concurrency=cfg["concurrency"], progress=False)
statuses = {}
for r in out:
    statuses[r["status"]] = statuses.get(r["status"], 0) + 1
print(json.dumps({"seconds": time.time() - cfg["start_at"], "statuses": statuses}))
"""


def beneficiary() -> fxpay.Beneficiary:
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    bank = fxpay.BankDetails(
        bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000", account="12345678", bank_address=address
    )
    return fxpay.Beneficiary(
        currency="AUD", name="Acme", classification="Business", payment_reason="Invoices", bank_details=bank, address=address
    )


def table(n: int, tag: str, bid: str) -> list[dict[str, Any]]:
    return [
        {
            "key": f"{tag}-{i}",
            "buy_currency": "USD",
            "buy_amount": f"{100 + i}.25",
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": f"{tag}-{i}",
        }
        for i in range(n)
    ]


async def gather_rows(c: fxpay.Client, rows: list[dict[str, Any]], keyed: bool) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(r: dict[str, Any]) -> None:
        async with sem:
            k = r["key"]
            qid = await c.create_quote_async(
                buy_currency=r["buy_currency"],
                buy_amount=r["buy_amount"],
                sell_currency=r["sell_currency"],
                idempotency_key=f"{k}/quote" if keyed else None,
            )
            q = await c.get_quote_async(qid)
            await c.create_deal_async(
                quote_id=qid,
                funding_source=FUNDING,
                beneficiaries=[fxpay.DealBeneficiary(r["beneficiary_id"], q.sell_amount, r["pay_reason"], r["pay_reference"])],
                idempotency_key=f"{k}/deal" if keyed else None,
            )

    await asyncio.gather(*(one(r) for r in rows))


def redis_server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (scripts/setup installs it)")
    sock = folder / "redis.sock"
    # As docs/idempotency.md asks for at most once across a restart: every write on disk.
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    url = f"unix://{sock}?db=0"
    r = redis.Redis.from_url(url)
    deadline = time.monotonic() + 30
    while True:
        try:
            r.ping()
            return proc, url
        except (redis.ConnectionError, FileNotFoundError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def workers_table(best: dict[str, float], counts: list[int], rows: int) -> list[str]:
    """The markdown table of the workers cells: rows/s per journal and number of processes."""
    lines = [
        "## More than one process",
        "",
        f"The {rows} rows split over N processes, each paying its part with `pay_out` ({CONCURRENCY} rows in flight",
        "each) under one shared journal, all starting together; rows/s is the table over the time to the last process's",
        "end. The sandbox is one more process on the same cores.",
        "",
        "| journal | " + " | ".join(f"{n} process{'es' if n > 1 else ''}" for n in counts) + " |",
        "| --- | " + " | ".join("---:" for _ in counts) + " |",
    ]
    for kind in ("Redis", "SQLite"):
        one = best[f"workers, {kind}, {counts[0]}"]
        cells = [f"{best[f'workers, {kind}, {n}']:,.0f} ({best[f'workers, {kind}, {n}'] / one:.2f}x)" for n in counts]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines


STORM_CONCURRENCY = 128
STORM_LIMIT = 5


def storm(n: int, out: Path) -> int:
    """A 429 storm: ``n`` rows at concurrency 128 against ``Sandbox(rate_limit=5)``; writes
    ``payouts_storm.{json,md}`` in ``out``. Fails (1) unless every row is booked once."""
    import collections

    import fxpay.testing

    folder = Path(tempfile.mkdtemp(prefix="fxpay-bench-storm-"))
    try:
        with (
            fxpay.testing.Sandbox(rate_limit=STORM_LIMIT) as sb,
            sb.client(journal=fxpay.SqliteJournal(folder / "j.db")) as c,
        ):
            bid = c.create_beneficiary(beneficiary())
            before = sb.stats()
            rows = table(n, "storm", bid)
            started = time.perf_counter()
            result = c.pay_out(rows, funding_source=FUNDING, concurrency=STORM_CONCURRENCY, progress=False)
            took = time.perf_counter() - started
            stats = sb.stats()
            deals = collections.Counter(b["payReference"] for d in sb.deals() for b in d["beneficiaries"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    statuses = collections.Counter(r["status"] for r in result)
    requests = stats["requests"] - before["requests"]
    limited = stats["rate_limited"] - before["rate_limited"]
    answered = [s["requests"] - s["rate_limited"] for s in stats["per_second"]]
    booked_once = sum(1 for r in rows if deals.get(r["pay_reference"]) == 1)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    ok = statuses.get("booked", 0) == n and booked_once == n
    doc = {
        "rows": n,
        "concurrency": STORM_CONCURRENCY,
        "rate_limit": STORM_LIMIT,
        "machine": machine,
        "seconds": round(took, 1),
        "floor_seconds": round(requests and (requests - limited) / STORM_LIMIT, 1),
        "requests": requests,
        "answers_429": limited,
        "statuses": dict(statuses),
        "rows_booked": statuses.get("booked", 0),
        "rows_refused": statuses.get("refused", 0),
        "deals_booked_once": booked_once,
        "most_answered_in_a_second": max(answered, default=0),
        "load_average_at_end": os.getloadavg(),
        "result": "PASS" if ok else "FAIL",
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "payouts_storm.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Payouts: a 429 storm",
        "",
        f"{n:,} rows paid by one `Client.pay_out` at `concurrency={STORM_CONCURRENCY}` against an embedded",
        f"`fxpay.testing.Sandbox(rate_limit={STORM_LIMIT})` (a SqliteJournal). {machine}.",
        "Made by `python bench/payouts.py --storm" + (f" --rows {n}" if n != 1000 else "") + "`.",
        "",
        "| rows | requests | answers 429 | rows booked | rows refused | deals booked once | elapsed | floor (answered / limit) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {n:,} | {requests:,} | {limited:,} | {doc['rows_booked']:,} | {doc['rows_refused']:,} | {booked_once:,} | "
        f"{doc['seconds']} s | {doc['floor_seconds']} s |",
        "",
        f"Statuses: {dict(statuses)}. Most requests answered (not 429) in one second: {doc['most_answered_in_a_second']}.",
        f"Load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (the host is shared).",
        "",
        "| target | result |",
        "| --- | --- |",
        f"| every row booked once, none refused | {doc['result']} |",
    ]
    (out / "payouts_storm.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--workers", default="1,2,4", help="worker process counts of the workers cells (comma-separated; empty: none)")
    p.add_argument("--only-workers", action="store_true", help="only the workers cells, written to payouts_workers.{json,md}")
    p.add_argument(
        "--storm", action="store_true", help="only a 429 storm (concurrency 128, Sandbox(rate_limit=5)), written to payouts_storm.{json,md}"
    )
    args = p.parse_args()
    if args.storm:
        return storm(args.rows, args.out)
    worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    folder = Path(tempfile.mkdtemp(prefix="fxpay-bench-payouts-"))
    sb = SandboxProcess("http")
    rproc, rurl = redis_server(folder)
    pg = PostgresServer()
    pg.start()
    t = sb.target
    plain = fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url)
    bid = plain.create_beneficiary(beneficiary())
    runs: dict[str, list[float]] = {}
    counter = [0]

    def journal_of(kind: str) -> fxpay.Journal:
        counter[0] += 1
        if kind == "SQLite":
            return fxpay.SqliteJournal(folder / f"j{counter[0]}.db")
        if kind == "Redis":
            rj = fxpay.RedisJournal(rurl, prefix=f"b{counter[0]}:")
            rj.create()  # a shared journal is made once before use (issue 52)
            return rj
        if kind == "PostgreSQL":
            j = fxpay.PostgresJournal(pg.conninfo, table=f"b{counter[0]}")
            j.create_table()
            return j
        return fxpay.MemoryJournal()

    def timed(name: str, run: Callable[[list[dict[str, Any]]], object]) -> None:
        rows = table(args.rows, f"{name.replace(' ', '').replace(',', '')}{counter[0]}x{len(runs.get(name, []))}", bid)
        started = time.perf_counter()
        run(rows)
        runs.setdefault(name, []).append(args.rows / (time.perf_counter() - started))

    def gather(kind: str | None) -> Callable[[list[dict[str, Any]]], object]:
        def go(rows: list[dict[str, Any]]) -> object:
            j = journal_of(kind) if kind else None
            c = fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, journal=j)
            return asyncio.run(gather_rows(c, rows, keyed=kind is not None))

        return go

    def pay_out(kind: str) -> Callable[[list[dict[str, Any]]], object]:
        def go(rows: list[dict[str, Any]]) -> object:
            c = fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, journal=journal_of(kind))
            out = c.pay_out(rows, funding_source=FUNDING, concurrency=CONCURRENCY, progress=False)
            bad = [r for r in out if r["status"] != "booked"]
            assert not bad, bad[:3]
            return out

        return go

    def workers(kind: str, n: int) -> Callable[[list[dict[str, Any]]], object]:
        def go(rows: list[dict[str, Any]]) -> object:
            counter[0] += 1
            where = str(folder / f"w{counter[0]}.db") if kind == "SQLite" else rurl
            if kind == "Redis":
                fxpay.RedisJournal(rurl, prefix=f"w{counter[0]}:").create()  # once, before the workers
            start_at = time.time() + 3.0  # each process imports fxpay and gets its token first
            procs = []
            for i in range(n):
                cfg = {
                    "journal": [kind, where],
                    "prefix": f"w{counter[0]}:",
                    "base_url": t.base_url,
                    "client_id": t.client_id,
                    "client_secret": t.client_secret,
                    "rows": rows[i::n],
                    "concurrency": CONCURRENCY,
                    "start_at": start_at,
                }
                proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(cfg))  # its part of the table (too long for argv)
                proc.stdin.close()
                procs.append(proc)
            ends = []
            for proc in procs:
                out = proc.stdout.read() if proc.stdout is not None else ""
                proc.wait(600)
                assert proc.returncode == 0, out
                got = json.loads(out)
                assert set(got["statuses"]) == {"booked"}, got
                ends.append(got["seconds"])
            return max(ends)

        return go

    def timed_workers(name: str, run: Callable[[list[dict[str, Any]]], object]) -> None:
        rows = table(args.rows, f"{name.replace(' ', '').replace(',', '')}{counter[0]}x{len(runs.get(name, []))}", bid)
        seconds = run(rows)
        assert isinstance(seconds, float)
        runs.setdefault(name, []).append(args.rows / seconds)

    fan_cells = [(f"workers, {kind}, {n}", workers(kind, n)) for kind in ("Redis", "SQLite") for n in worker_counts]
    cells: list[tuple[str, Callable[[list[dict[str, Any]]], object]]] = [
        ("gather, no journal", gather(None)),
        ("gather, SQLite", gather("SQLite")),
        ("gather, Redis", gather("Redis")),
        ("gather, PostgreSQL", gather("PostgreSQL")),
        ("pay_out, memory", pay_out("memory")),
        ("pay_out, SQLite", pay_out("SQLite")),
        ("pay_out, Redis", pay_out("Redis")),
        ("pay_out, PostgreSQL", pay_out("PostgreSQL")),
    ]
    if args.only_workers:
        cells = []
    try:
        timed("gather, no journal", gather(None))  # warm-up: token, pools
        runs.clear()
        for _ in range(args.rounds):
            for name, run in cells:
                timed(name, run)
            for name, run in fan_cells:
                timed_workers(name, run)
    finally:
        sb.close()
        rproc.terminate()
        rproc.wait(10)
        pg.remove()
        shutil.rmtree(folder, ignore_errors=True)
    best = {k: max(v) for k, v in runs.items()}
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only_workers:
        doc = {
            "rows": args.rows,
            "rounds": args.rounds,
            "concurrency": CONCURRENCY,
            "machine": machine,
            "load_average_at_end": os.getloadavg(),
            "rows_per_second": {k: [round(x, 1) for x in v] for k, v in runs.items()},
            "best": {k: round(v, 1) for k, v in best.items()},
        }
        (args.out / "payouts_workers.json").write_text(json.dumps(doc, indent=2) + "\n")
        lines = [
            "# Payouts: rows/s against worker processes",
            "",
            f"Best of {args.rounds} interleaved rounds, against `python -m fxpay.sandbox` in its own process. {machine}.",
            f"Load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (the host is shared).",
            "Made by `python bench/payouts.py --only-workers" + (f" --rows {args.rows}" if args.rows != 1000 else "") + "`.",
            "",
            *workers_table(best, worker_counts, args.rows),
        ]
        (args.out / "payouts_workers.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return 0
    base = best["gather, no journal"]
    targets = [
        {
            "name": "pay_out with a SqliteJournal >= 0.7x the journal-off rate",
            "measured": round(best["pay_out, SQLite"] / base, 3),
            "result": "PASS" if best["pay_out, SQLite"] >= 0.7 * base else "FAIL",
        },
        {
            "name": "pay_out with a PostgresJournal >= 0.6x the journal-off rate",
            "measured": round(best["pay_out, PostgreSQL"] / base, 3),
            "result": "PASS" if best["pay_out, PostgreSQL"] >= 0.6 * base else "FAIL",
        },
        {
            "name": "pay_out >= the hand-written asyncio.gather: SQLite",
            "measured": round(best["pay_out, SQLite"] / best["gather, SQLite"], 3),
            "result": "PASS" if best["pay_out, SQLite"] >= best["gather, SQLite"] else "FAIL",
        },
        {
            "name": "pay_out >= the hand-written asyncio.gather: Redis",
            "measured": round(best["pay_out, Redis"] / best["gather, Redis"], 3),
            "result": "PASS" if best["pay_out, Redis"] >= best["gather, Redis"] else "FAIL",
        },
        {
            "name": "pay_out >= the hand-written asyncio.gather: PostgreSQL",
            "measured": round(best["pay_out, PostgreSQL"] / best["gather, PostgreSQL"], 3),
            "result": "PASS" if best["pay_out, PostgreSQL"] >= best["gather, PostgreSQL"] else "FAIL",
        },
    ]
    doc = {
        "rows": args.rows,
        "rounds": args.rounds,
        "concurrency": CONCURRENCY,
        "machine": machine,
        "rows_per_second": {k: [round(x, 1) for x in v] for k, v in runs.items()},
        "best": {k: round(v, 1) for k, v in best.items()},
        "targets": targets,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "payouts.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "# Payouts: what the journal costs",
        "",
        f"{args.rows} rows (quote, read the quote, deal), {CONCURRENCY} at a time, against `python -m fxpay.sandbox` in its own",
        f"process; best of {args.rounds} interleaved rounds. {doc['machine']}. Redis: AOF with `appendfsync always`;",
        "SQLite: WAL, `synchronous=FULL`. PostgreSQL: a local server, `fsync` and `synchronous_commit` on.",
        "Made by `python bench/payouts.py`.",
        "",
        "| cell | rows/s (best) | vs gather, no journal |",
        "| --- | ---: | ---: |",
    ]
    for k, v in best.items():
        if not k.startswith("workers, "):
            lines.append(f"| {k} | {v:,.0f} | {v / base:.2f}x |")
    if fan_cells:
        lines += ["", *workers_table(best, worker_counts, args.rows)]
    lines += ["", "| target | measured | result |", "| --- | ---: | --- |"]
    lines += [f"| {x['name']} | {x['measured']}x | {x['result']} |" for x in targets]
    (args.out / "payouts.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The client side of the soak test, in its own process so that its memory is measured
alone (the sandbox's growing state stays in the parent). Prints one JSON line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

import fxpay


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def main() -> None:
    cfg: dict[str, Any] = json.loads(sys.argv[1])
    c = fxpay.Client(cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], timeout=2.0)
    session = c.user_session(fxpay.Token.from_dict(cfg["user_token"]))
    lock = threading.Lock()
    outcomes: Counter[str] = Counter()
    untyped: list[str] = []
    booked: list[str] = []
    ops = ["get quote", "get quote", "create quote", "deal", "virtual accounts"]

    def record(op: str, exc: BaseException | None) -> None:
        with lock:
            if exc is None:
                outcomes[f"{op}: ok"] += 1
            elif isinstance(exc, fxpay.FxPayError):
                outcomes[f"{op}: {type(exc).__name__}"] += 1
            else:
                untyped.append(f"{type(exc).__name__}: {exc}")

    def one_sync(i: int) -> None:
        op = ops[i % 5]
        try:
            if op == "get quote":
                c.get_quote(cfg["quote_id"])
            elif op == "create quote":
                c.create_quote(buy_currency="USD", buy_amount=str(1 + i % 97), sell_currency="EUR")
            elif op == "deal":
                qid = c.create_quote(buy_currency="USD", buy_amount="20", sell_currency="AUD")
                q = c.get_quote(qid)
                d = c.create_deal(
                    quote_id=qid,
                    funding_source="Own account",
                    beneficiaries=[fxpay.DealBeneficiary(cfg["beneficiary_id"], q.sell_amount, "r", f"soak-{i}")],
                )
                with lock:
                    booked.append(d.deal_id)
            else:
                session.list_virtual_accounts()
            record(op, None)
        except BaseException as e:
            record(op, e)

    async def one_async(i: int) -> None:
        op = ops[i % 5]
        try:
            if op in ("get quote", "deal"):
                await c.get_quote_async(cfg["quote_id"])
            elif op == "create quote":
                await c.create_quote_async(buy_currency="USD", buy_amount=str(1 + i % 89), sell_currency="GBP")
            else:
                await session.list_virtual_accounts_async()
            record(op, None)
        except BaseException as e:
            record(op, e)

    calls = int(cfg["calls"])
    warm = max(100, calls // 10)
    for i in range(warm):
        one_sync(i)

    async def warm_async() -> None:
        await asyncio.gather(*(one_async(i) for i in range(int(cfg["tasks"]) * 4)))

    asyncio.run(warm_async())
    time.sleep(3)  # let the runtime's blocking-pool threads from the warm-up retire (2 s keep-alive)
    baseline_rss, baseline_threads = rss_mib(), os_threads()
    sync_calls = calls * 2 // 3
    counter = iter(range(warm, warm + sync_calls))

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            one_sync(i)

    async_counter = iter(range(calls - sync_calls))

    async def tasks() -> None:
        # A fixed set of tasks, each taking the next call, as a server's handlers would.
        async def task() -> None:
            for i in async_counter:
                await one_async(i)

        await asyncio.gather(*(task() for _ in range(int(cfg["tasks"]))))

    threads = [threading.Thread(target=worker) for _ in range(int(cfg["threads"]))]
    for t in threads:
        t.start()
    asyncio.run(tasks())
    for t in threads:
        t.join()
    final_rss = rss_mib()
    deadline = time.monotonic() + 8  # the runtime's blocking-pool threads retire 2 s after a burst
    while os_threads() > baseline_threads and time.monotonic() < deadline:
        time.sleep(0.2)
    print(
        json.dumps(
            {
                "outcomes": outcomes,
                "untyped": untyped,
                "booked": booked,
                "calls": sum(outcomes.values()) + len(untyped),
                "expected_calls": warm + int(cfg["tasks"]) * 4 + calls,
                "rss_baseline": baseline_rss,
                "rss_final": final_rss,
                "threads_baseline": baseline_threads,
                "threads_final": os_threads(),
                "python_threads": threading.active_count(),
            }
        )
    )


if __name__ == "__main__":
    main()

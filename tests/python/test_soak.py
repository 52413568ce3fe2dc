"""Soak: mixed calls from 8 threads plus asyncio tasks with 5% of requests faulted.

Zero duplicate deals, every failure typed, memory flat after warm-up, no thread or
connection leak. FXPAY_SOAK_CALLS sets the size (10,000 by default; CI runs a bounded form).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import Counter
from typing import Any

import fxpay
import pytest
from conftest import make_beneficiary

CALLS = int(os.environ.get("FXPAY_SOAK_CALLS", "10000"))
FAULT_RATE = 0.05
THREADS = 8
TASKS = 16


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def thread_names() -> Counter[str]:
    names: Counter[str] = Counter()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            names[f.read().strip()] += 1
    return names


def os_threads() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


class Soak:
    def __init__(self, sb: Any) -> None:
        self.sb = sb
        self.c = sb.client(timeout=2.0)
        self.beneficiary_id = self.c.create_beneficiary(make_beneficiary())
        auth = self.c.authorization_url(sb.redirect_uri)
        self.session = self.c.user_session(self.c.exchange_code(auth, sb.approve(auth.url)))
        self.quote_id = self.c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")
        self.lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self.untyped: list[BaseException] = []
        self.booked: list[str] = []
        self.rng = random.Random(1234)

    def maybe_fault(self, path: str) -> None:
        with self.lock:
            if self.rng.random() >= FAULT_RATE:
                return
            kind = self.rng.choice(["500", "503", "429", "drop-before", "drop-after", "delay"])
        if kind in ("500", "503"):
            self.sb.fail_next(path, int(kind))
        elif kind == "429":
            self.sb.fail_next(path, 429, retry_after=0)
        elif kind == "drop-before":
            self.sb.drop_next(path, after_processing=False)
        elif kind == "drop-after":
            self.sb.drop_next(path, after_processing=True)
        else:
            self.sb.delay_next(path, 0.05)

    def record(self, name: str, exc: BaseException | None) -> None:
        with self.lock:
            if exc is None:
                self.outcomes[f"{name}: ok"] += 1
            elif isinstance(exc, fxpay.FxPayError):
                self.outcomes[f"{name}: {type(exc).__name__}"] += 1
            else:
                self.untyped.append(exc)

    def pick(self, i: int) -> str:
        return ["get quote", "get quote", "create quote", "deal", "virtual accounts"][i % 5]

    def one_sync(self, i: int) -> None:
        op = self.pick(i)
        try:
            if op == "get quote":
                self.maybe_fault("GET /v1/payments/quotes/*")
                self.c.get_quote(self.quote_id)
            elif op == "create quote":
                self.maybe_fault("POST /v1/payments/quotes")
                self.c.create_quote(buy_currency="USD", buy_amount=str(1 + i % 97), sell_currency="EUR")
            elif op == "deal":
                qid = self.c.create_quote(buy_currency="USD", buy_amount="20", sell_currency="AUD")
                q = self.c.get_quote(qid)
                self.maybe_fault("POST /v1/payments/deals")
                d = self.c.create_deal(
                    quote_id=qid,
                    funding_source="Own account",
                    beneficiaries=[fxpay.DealBeneficiary(self.beneficiary_id, q.sell_amount, "r", f"soak-{i}")],
                )
                with self.lock:
                    self.booked.append(d.deal_id)
            else:
                self.maybe_fault("GET /v1/gca/virtual-accounts")
                self.session.list_virtual_accounts()
            self.record(op, None)
        except BaseException as e:  # noqa: BLE001
            self.record(op, e)

    async def one_async(self, i: int) -> None:
        op = self.pick(i)
        try:
            if op in ("get quote", "deal"):
                self.maybe_fault("GET /v1/payments/quotes/*")
                await self.c.get_quote_async(self.quote_id)
            elif op == "create quote":
                self.maybe_fault("POST /v1/payments/quotes")
                await self.c.create_quote_async(buy_currency="USD", buy_amount=str(1 + i % 89), sell_currency="GBP")
            else:
                self.maybe_fault("GET /v1/gca/virtual-accounts")
                await self.session.list_virtual_accounts_async()
            self.record(op, None)
        except BaseException as e:  # noqa: BLE001
            self.record(op, e)


@pytest.mark.slow
def test_soak(fxpay_sandbox: Any, capsys: pytest.CaptureFixture[str]) -> None:
    s = Soak(fxpay_sandbox)
    sync_calls = CALLS * 2 // 3
    async_calls = CALLS - sync_calls
    warm = max(50, CALLS // 20)
    for i in range(warm):
        s.one_sync(i)
    baseline_rss = rss_mib()
    baseline_threads = os_threads()

    counter = iter(range(warm, warm + sync_calls))
    counter_lock = threading.Lock()

    def worker() -> None:
        while True:
            with counter_lock:
                i = next(counter, None)
            if i is None:
                return
            s.one_sync(i)

    async def tasks() -> None:
        sem = asyncio.Semaphore(TASKS)

        async def one(i: int) -> None:
            async with sem:
                await s.one_async(i)

        await asyncio.gather(*(one(i) for i in range(async_calls)))

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    asyncio.run(tasks())
    for t in threads:
        t.join()

    final_rss = rss_mib()
    summary = "\n".join(f"  {k}: {v}" for k, v in sorted(s.outcomes.items()))
    with capsys.disabled():
        print(f"\nsoak: {CALLS} calls, rss {baseline_rss:.1f} -> {final_rss:.1f} MiB, threads {baseline_threads} -> {os_threads()}\n{summary}")  # noqa: E501

    assert s.untyped == [], s.untyped[:3]
    assert sum(s.outcomes.values()) == warm + sync_calls + async_calls
    failures = sum(v for k, v in s.outcomes.items() if not k.endswith(": ok"))
    assert failures > 0, "the faults must have fired"
    deals = fxpay_sandbox.deals()
    ids = [d["dealId"] for d in deals]
    quotes = [d["quoteId"] for d in deals]
    assert len(ids) == len(set(ids)), "a deal id was booked twice"
    assert len(quotes) == len(set(quotes)), "a quote was booked twice"
    assert set(s.booked) <= set(ids)
    assert final_rss - baseline_rss < 10, f"RSS grew {final_rss - baseline_rss:.1f} MiB"
    # Threads of the runtime's blocking pool (DNS lookups) retire 2 s after the burst.
    deadline = time.monotonic() + 8
    while os_threads() > baseline_threads and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os_threads() <= baseline_threads, thread_names()
    assert threading.active_count() == 1
    assert fxpay_sandbox.stats()["open_connections"] <= THREADS + TASKS + 4

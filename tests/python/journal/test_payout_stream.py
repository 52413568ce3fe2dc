"""pay_out_iter: a table paid row by row, read only as fast as rows end (memory grows with
concurrency, not with the table), from a generator, a DataFrame or a LazyFrame; paced by
max_rate; a 429 never makes a row refused. Against the sandbox over loopback."""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need
from journal_support import requests_to

DEALS = "POST /v1/payments/deals"


def rows(bid: str, n: int, prefix: str = "s", *, seen: list[int] | None = None) -> Iterator[dict[str, Any]]:
    for i in range(n):
        if seen is not None:
            seen.append(i)
        yield {
            "key": f"{prefix}{i}",
            "buy_currency": "USD",
            "buy_amount": "10",
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": f"{prefix.upper()}-{i}",
        }


@pytest.fixture
def client(fxpay_sandbox: Any, tmp_path: Path) -> Iterator[fxpay.Client]:
    with fxpay_sandbox.client(journal=fxpay.SqliteJournal(tmp_path / "j.db")) as c:
        yield c


def test_rows_are_read_only_as_fast_as_they_are_paid(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())
    seen: list[int] = []
    it = client.pay_out_iter(rows(bid, 40, seen=seen), funding_source="Own account", concurrency=4)
    first = next(it)
    # One row ended: the generator was read for the 4 in flight, and not further.
    assert len(seen) == 4, seen
    rest = list(it)
    results = [first, *rest]
    assert len(seen) == 40
    assert sorted(r["key"] for r in results) == sorted(f"s{i}" for i in range(40))
    assert {r["status"] for r in results} == {"booked"}
    assert all(r["deal_id"] and r["sell_amount"] is not None for r in results)
    assert requests_to(fxpay_sandbox, DEALS) == 40
    # Run again: every row replays, nothing is sent.
    again = list(client.pay_out_iter(rows(bid, 40), funding_source="Own account"))
    assert {r["status"] for r in again} == {"replayed"}
    assert requests_to(fxpay_sandbox, DEALS) == 40


def test_pay_out_takes_an_iterable_and_a_lazy_frame_in_the_tables_order(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    pl = need("polars")
    bid = client.create_beneficiary(make_beneficiary())
    out = client.pay_out(rows(bid, 12, "g"), funding_source="Own account", progress=False)
    assert [r["key"] for r in out] == [f"g{i}" for i in range(12)]
    assert {r["status"] for r in out} == {"booked"}
    lazy = pl.DataFrame(list(rows(bid, 12, "lz"))).lazy()
    frame = client.pay_out(lazy, funding_source="Own account", progress=False)
    assert isinstance(frame, pl.DataFrame)
    assert frame["key"].to_list() == [f"lz{i}" for i in range(12)]
    assert set(frame["status"].to_list()) == {"booked"}
    streamed = list(client.pay_out_iter(pl.DataFrame(list(rows(bid, 5, "pf"))), funding_source="Own account"))
    assert {r["status"] for r in streamed} == {"booked"}
    pd = need("pandas")
    streamed = list(client.pay_out_iter(pd.DataFrame(list(rows(bid, 5, "pd"))), funding_source="Own account"))
    assert {r["status"] for r in streamed} == {"booked"}
    assert requests_to(fxpay_sandbox, DEALS) == 12 + 12 + 5 + 5


def test_an_invalid_row_is_refused_alone_and_a_wrong_type_raises(client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())
    table = list(rows(bid, 3, "bad"))
    table[1]["buy_currency"] = "XXXX"
    out = {r["key"]: r for r in client.pay_out_iter(table, funding_source="Own account")}
    assert out["bad1"]["status"] == "refused"
    assert out["bad0"]["status"] == out["bad2"]["status"] == "booked"
    with pytest.raises(TypeError, match=r"rows\[1\] must be a mapping"):
        list(client.pay_out_iter([table[0], 7], funding_source="Own account"))
    with pytest.raises(TypeError, match="rows must be"):
        client.pay_out_iter(5, funding_source="Own account")  # type: ignore[arg-type]
    with pytest.raises(fxpay.ConfigurationError, match="max_rate"):
        client.pay_out_iter(table, funding_source="Own account", max_rate=0)
    with pytest.raises(TypeError, match="max_rate"):
        client.pay_out_iter(table, funding_source="Own account", max_rate="fast")  # type: ignore[arg-type]
    with pytest.raises(fxpay.InvalidRequestError, match="concurrency"):
        client.pay_out_iter(table, funding_source="Own account", concurrency=0)


def test_pay_out_iter_needs_a_journal(fxpay_sandbox: Any) -> None:
    with fxpay_sandbox.client() as c, pytest.raises(fxpay.ConfigurationError, match="journal"):
        c.pay_out_iter([], funding_source="Own account")


def test_max_rate_caps_rows_started_per_second(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())
    t0 = time.monotonic()
    out = list(client.pay_out_iter(rows(bid, 21, "m"), funding_source="Own account", concurrency=8, max_rate=20))
    took = time.monotonic() - t0
    assert {r["status"] for r in out} == {"booked"}
    assert took >= 1.0, took  # 21 starts at 20 per second: the last at 1.0 s


def test_a_429_never_makes_a_row_refused(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    """The service refuses before it acts with 429 (more than the client's own retries):
    the row waits out Retry-After and is paid."""
    bid = client.create_beneficiary(make_beneficiary())
    fxpay_sandbox.fail_next("/v1/payments/deals", 429, times=6, retry_after=1)
    out = list(client.pay_out_iter(rows(bid, 3, "rl"), funding_source="Own account", concurrency=1))
    assert [r["status"] for r in out] == ["booked"] * 3, out
    refs = collections.Counter(b["payReference"] for d in fxpay_sandbox.deals() for b in d["beneficiaries"])
    assert refs == {"RL-0": 1, "RL-1": 1, "RL-2": 1}
    # pay_out of a list goes the same way.
    fxpay_sandbox.fail_next("/v1/payments/deals", 429, times=4, retry_after=1)
    table = list(rows(bid, 2, "rm"))
    assert [r["status"] for r in client.pay_out(table, funding_source="Own account", progress=False)] == ["booked"] * 2


def test_the_async_iterator(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    bid = client.create_beneficiary(make_beneficiary())

    async def main() -> list[dict[str, Any]]:
        return [r async for r in client.pay_out_iter_async(rows(bid, 10, "a"), funding_source="Own account", max_rate=50)]

    out = asyncio.run(main())
    assert sorted(r["key"] for r in out) == sorted(f"a{i}" for i in range(10))
    assert {r["status"] for r in out} == {"booked"}
    again = asyncio.run(client.pay_out_async(list(rows(bid, 10, "a")), funding_source="Own account", progress=False, max_rate=100))
    assert [r["status"] for r in again] == ["replayed"] * 10


MEMORY = """
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


def test_peak_memory_is_flat_in_the_tables_length(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Peak RSS of a process paying 5,000 and 20,000 rows from a generator: within 10%, and
    under 200 MB (bench/payout_memory.py measures 100,000 rows)."""
    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    # Both at once (each process's own peak is its own; the run takes the longer one's time).
    procs = {
        n: subprocess.Popen(
            [
                sys.executable,
                "-c",
                MEMORY,
                str(n),
                fxpay_sandbox.base_url,
                fxpay_sandbox.client_id,
                fxpay_sandbox.client_secret,
                str(tmp_path / f"j{n}.db"),
                bid,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in (5000, 20000)
    }
    peaks = {}
    for n, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        got = json.loads(out)
        assert got["counts"] == {"booked": n}
        peaks[n] = got["rss_kb"]
    print(f"peak RSS: 5,000 rows {peaks[5000] / 1024:.1f} MB, 20,000 rows {peaks[20000] / 1024:.1f} MB")
    assert peaks[20000] <= peaks[5000] * 1.10, peaks
    assert peaks[20000] < 200 * 1024, peaks

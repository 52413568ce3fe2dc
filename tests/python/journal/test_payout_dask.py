"""fxpay.contrib.dask against real parts: a dask.distributed LocalCluster of 2 worker
processes, a redis-server holding the shared RedisJournal, the sandbox over loopback.

Chaos: 2,000 rows as a dask.dataframe of 20 partitions, one worker process SIGKILLed mid-run.
Dask reruns its partitions (the one it was paying, and those whose results it held); every
pay reference is booked at most once, and the computed table holds each row once, in order,
as booked, replayed or unknown."""

from __future__ import annotations

import collections
import datetime
import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need
from journal_support import RedisServer, check_named, held_long, named_right_after, requests_to, wait_out
from payout_dask_support import make_client

ROWS = 2000
PARTITIONS = 20
DEALS = "POST /v1/payments/deals"
SLOW = 600


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


def made(url: str, prefix: str) -> str:
    """``prefix``, once the journal under it is made (once, before any worker opens it)."""
    fxpay.RedisJournal(url, prefix=prefix).create()
    return prefix


def frame(bid: str, n: int, prefix: str) -> Any:
    pd = need("pandas")
    return pd.DataFrame(
        {
            "key": [f"{prefix}{i}" for i in range(n)],
            "buy_currency": "USD",
            "buy_amount": [f"{10 + i}.01" for i in range(n)],
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": [f"{prefix.upper()}-{i}" for i in range(n)],
        }
    )


@pytest.fixture
def cluster() -> Iterator[Any]:
    distributed = need("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None, silence_logs=40
        ) as lc,
        distributed.Client(lc) as dc,
    ):
        yield dc


@pytest.mark.filterwarnings("ignore::fxpay.testing.UnfiredFaultWarning")
def test_dask_chaos_each_reference_booked_at_most_once(fxpay_sandbox: Any, redis: RedisServer, cluster: Any) -> None:
    dd = need("dask.dataframe")
    import fxpay.contrib.dask

    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    pdf = frame(bid, ROWS, "dk")
    ddf = dd.from_pandas(pdf, npartitions=PARTITIONS, sort=False)
    assert ddf.npartitions == PARTITIONS
    for i in range(ROWS):
        # So that the kill lands mid-run, and in one deal's request (held 5 s) for certain.
        fxpay_sandbox.delay_next(DEALS, 5.0 if i == SLOW else 0.01)
    factory = functools.partial(
        make_client, fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret, redis.url, made(redis.url, "dask:")
    )
    paid = fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source="Own account", concurrency=8)
    pids = cluster.run(os.getpid)
    assert len(pids) == 2
    box: dict[str, Any] = {}

    def compute() -> None:
        try:
            box["out"] = paid.compute()
        except BaseException as e:  # reported below
            box["error"] = e

    t0 = time.monotonic()
    runner = threading.Thread(target=compute)
    runner.start()
    killed = None
    in_flight = None  # the row whose deal request the killed worker was waiting on
    journal = fxpay.RedisJournal(redis.url, prefix="dask:")
    while runner.is_alive():
        if killed is None and requests_to(fxpay_sandbox, DEALS) > SLOW:
            held = held_long(journal, set(pids.values()), 0.3)
            if held is not None:
                killed, in_flight = held
                os.kill(killed, signal.SIGKILL)
        time.sleep(0.01)
    runner.join()
    took = time.monotonic() - t0
    named, leased, read_at = named_right_after(journal, pdf["key"].tolist())
    assert "error" not in box, box
    out = box["out"]
    refs = collections.Counter(b["payReference"] for d in fxpay_sandbox.deals() for b in d["beneficiaries"])
    counts = collections.Counter(out["status"])
    booked = sum(refs.values())
    print(f"\n{ROWS} rows, {PARTITIONS} partitions, {took:.1f} s; killed worker {killed}; statuses {dict(counts)}; deals {booked}")
    assert killed is not None
    assert max(refs.values()) == 1  # no payment booked twice
    assert out["key"].tolist() == pdf["key"].tolist()  # each row once, in order
    assert set(counts) <= {"booked", "replayed", "unknown"}, counts
    # Dask reran the partitions of the lost worker: rows it had paid replayed (or, in flight
    # when it died, are unknown).
    assert counts["replayed"] + counts["unknown"] > 0, counts
    for ref, status in zip(out["pay_reference"], out["status"], strict=True):
        if status in ("booked", "replayed"):
            assert refs[ref] == 1, ref
    # Right after the run, the journal names every row that came back unknown: journal.unknown()
    # or journal.leased(keys) (a row the killed worker held: pending until its lease lapses).
    out_unknown = set(out["key"][out["status"] == "unknown"])
    print(f"unknown rows {len(out_unknown)}; named right after the run {len(named)}, of which leased {len(leased)}")
    assert in_flight in out_unknown, (in_flight, out_unknown)
    check_named(out_unknown, named, leased, read_at)
    # The same table in 7 partitions (as a resumed job may split it): nothing is paid again.
    again = fxpay.contrib.dask.pay_out_dask(
        dd.from_pandas(pdf, npartitions=7, sort=False), client_factory=factory, funding_source="Own account"
    ).compute()
    assert again["key"].tolist() == pdf["key"].tolist()
    assert set(again["status"]) <= {"replayed", "unknown"}
    # Once the leases have lapsed (the docs' reconcile loop waits for them), unknown() lists them.
    wait_out(leased)
    assert out_unknown <= {e.key.rsplit("/", 1)[0] for e in journal.unknown()}
    assert sum(collections.Counter(b["payReference"] for d in fxpay_sandbox.deals() for b in d["beneficiaries"]).values()) == sum(
        refs.values()
    )


def test_pay_out_dask_is_lazy_and_refuses_bad_arguments(fxpay_sandbox: Any, redis: RedisServer, cluster: Any) -> None:
    dd = need("dask.dataframe")
    import fxpay.contrib.dask

    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    pdf = frame(bid, 30, "lz")
    ddf = dd.from_pandas(pdf, npartitions=4, sort=False)
    factory = functools.partial(
        make_client, fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret, redis.url, made(redis.url, "lazy:")
    )
    paid = fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source="Own account")
    assert requests_to(fxpay_sandbox, DEALS) == 0  # nothing paid until computed
    assert list(paid.columns) == [*pdf.columns, "quote_id", "deal_id", "sell_amount", "status", "error"]
    # Computed on the cluster while the journal's counts are followed (as a notebook's bar).
    journal = fxpay.RedisJournal(redis.url, prefix="lazy:")
    journal.create()
    seen: list[fxpay.PayoutProgress] = []
    out = fxpay.contrib.dask.watch(paid, journal=journal, keys=ddf["key"], progress=seen.append, poll=0.05)
    assert out["key"].tolist() == pdf["key"].tolist()
    assert set(out["status"]) == {"booked"}
    assert seen[-1] == fxpay.PayoutProgress(done=30, total=30, booked=30, replayed=0, unknown=0, refused=0)
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    # Computed again: every row replays (booked before `since`).
    since = datetime.datetime.now(datetime.timezone.utc)
    # (Another graph: Dask would hand back a result it still holds for the same one.)
    twice = fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source="Own account", concurrency=4)
    again = fxpay.contrib.dask.watch(cluster.compute(twice), journal=journal, keys=pdf["key"], progress=seen.append, poll=0.05, since=since)
    assert set(again["status"]) == {"replayed"}
    assert seen[-1] == fxpay.PayoutProgress(done=30, total=30, booked=0, replayed=30, unknown=0, refused=0)
    # Without `since` the journal counts every done deal as booked; the last report is the
    # frame returned, counted: every row replayed.
    thrice = fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source="Own account", concurrency=3)
    seen.clear()
    again = fxpay.contrib.dask.watch(cluster.compute(thrice), journal=journal, keys=pdf["key"], progress=seen.append, poll=0.05)
    assert set(again["status"]) == {"replayed"}
    assert seen[-1] == fxpay.PayoutProgress(done=30, total=30, booked=0, replayed=30, unknown=0, refused=0), seen
    with pytest.raises(TypeError, match="paid"):
        fxpay.contrib.dask.watch(pdf, journal=journal, keys=pdf["key"])
    with pytest.raises(TypeError, match="journal"):
        fxpay.contrib.dask.watch(cluster.compute(paid), journal=None, keys=pdf["key"])  # type: ignore[arg-type]
    from decimal import Decimal

    assert all(isinstance(v, Decimal) for v in out["sell_amount"])
    assert requests_to(fxpay_sandbox, DEALS) == 30
    with pytest.raises(TypeError, match="ddf"):
        fxpay.contrib.dask.pay_out_dask(pdf, client_factory=factory, funding_source="Own account")
    with pytest.raises(TypeError, match="client_factory"):
        fxpay.contrib.dask.pay_out_dask(ddf, client_factory="x", funding_source="Own account")  # type: ignore[arg-type]
    with pytest.raises(fxpay.InvalidRequestError, match="key"):
        fxpay.contrib.dask.pay_out_dask(ddf.drop(columns=["key"]), client_factory=factory, funding_source="Own account")
    with pytest.raises(fxpay.InvalidRequestError, match="concurrency"):
        fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source="Own account", concurrency=0)
    with pytest.raises(fxpay.ConfigurationError, match="max_rate"):
        fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source="Own account", max_rate=0)
    with pytest.raises(TypeError, match="funding_source"):
        fxpay.contrib.dask.pay_out_dask(ddf, client_factory=factory, funding_source=None)  # type: ignore[arg-type]

"""journal.payout_progress(keys): a payout's counts read from the journal alone (booked,
replayed, unknown, refused, still to do), the same on every kind of journal: memory, SQLite,
a real redis-server and a real PostgreSQL server. Rows paid by pay_out over loopback against
the sandbox, then one row made unknown by a lost answer and one refused by a 4xx."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

import fxpay
import fxpay.journals

from conftest import make_beneficiary
from journal_support import RedisServer, hold_elsewhere, make_journal, redis_server
from postgres_support import make_postgres_journal, postgres_server

__all__ = ["postgres_server", "redis_server"]  # fixtures, imported for the tests below


def row(key: str, bid: str, *, currency: str = "USD") -> dict[str, Any]:
    return {
        "key": key,
        "buy_currency": currency,
        "buy_amount": "10",
        "sell_currency": "AUD",
        "beneficiary_id": bid,
        "pay_reason": "invoice",
        "pay_reference": key.upper(),
    }


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis", "postgres"])
def test_payout_progress_counts_each_row_from_the_journal(
    kind: str, fxpay_sandbox: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        journal: fxpay.journals.JournalBase = make_postgres_journal(request.getfixturevalue("postgres_server"))
    else:
        server: RedisServer | None = request.getfixturevalue("redis_server") if kind == "redis" else None
        j = make_journal(kind, tmp_path, server)
        assert isinstance(j, fxpay.journals.JournalBase)
        journal = j
    with fxpay_sandbox.client(journal=journal) as c:
        bid = c.create_beneficiary(make_beneficiary())
        first = [row(f"p{i}", bid) for i in range(3)]
        assert {r["status"] for r in c.pay_out(first, funding_source="Own account", progress=False)} == {"booked"}
        since = datetime.datetime.now(datetime.timezone.utc)
        keys = [f"p{i}" for i in range(6)]
        p = journal.payout_progress(keys)
        assert p == fxpay.PayoutProgress(done=3, total=6, booked=3, replayed=0, unknown=0, refused=0)
        fxpay_sandbox.fail_next("/v1/payments/deals", 500, times=1)  # p3's deal: its answer is lost
        got = c.pay_out([row("p3", bid)], funding_source="Own account", progress=False)
        assert got[0]["status"] == "unknown", got
        got = c.pay_out([row("p4", bid, currency="XXX")], funding_source="Own account", progress=False)
        assert got[0]["status"] == "refused", got
        again = c.pay_out(first, funding_source="Own account", progress=False)
        assert {r["status"] for r in again} == {"replayed"}
    # Without `since` a done deal is booked; with it, a deal done before `since` was replayed
    # by the run that began at `since`.
    assert journal.payout_progress(keys) == fxpay.PayoutProgress(5, 6, 3, 0, 1, 1)
    assert journal.payout_progress(keys, since=since) == fxpay.PayoutProgress(5, 6, 0, 3, 1, 1)
    # Many keys (read in batches: Redis MGET, PostgreSQL = ANY, of 1,000 each), the rows' own
    # last: the absent ones are still to do.
    many = [f"absent{i}" for i in range(2500)] + keys
    assert journal.payout_progress(many, since=since) == fxpay.PayoutProgress(5, 2506, 0, 3, 1, 1)
    assert journal.payout_progress(iter(keys[:1])) == fxpay.PayoutProgress(1, 1, 1, 0, 0, 0)
    assert journal.payout_progress([]) == fxpay.PayoutProgress(0, 0, 0, 0, 0, 0)
    with pytest.raises(TypeError, match="keys"):
        journal.payout_progress("p0")
    with pytest.raises(TypeError, match="since"):
        journal.payout_progress(keys, since="yesterday")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a str"):
        journal.payout_progress([1])  # type: ignore[list-item]
    # A row a worker on another machine holds (it died mid-deal): leased, until its lease lapses.
    hold_elsewhere(journal, "p0/deal", 20)
    assert [e.key for e in journal.leased(keys)] == ["p0/deal"]
    assert [e.key for e in journal.leased()] == ["p0/deal"]
    assert [e.key for e in journal.unknown()] == ["p3/deal"]
    assert journal.payout_progress(keys) == fxpay.PayoutProgress(4, 6, 2, 0, 1, 1)


def test_fanout_progress_tells_a_slow_callable_its_last_report_before_close_returns() -> None:
    """fxpay.contrib.fanout.Progress (what pay_out_celery and dask.watch report through): a
    callable runs on a thread of its own, and close() returns once it has been told the last
    update, so the caller's last report is the table's count when the fan-out returns."""
    import time

    from fxpay.contrib import fanout

    seen: list[fxpay.PayoutProgress] = []

    def slow(p: fxpay.PayoutProgress) -> None:
        time.sleep(0.2)
        seen.append(p)

    bar = fanout.Progress(slow, 3)
    bar.update(1, 3, 1, 0, 0, 0)
    bar.update(3, 3, 2, 0, 1, 0)
    bar.close()
    assert seen[-1] == fxpay.PayoutProgress(3, 3, 2, 0, 1, 0), seen

"""No false unknowns at the end of a call or of a process (issue 52).

- A result that cannot be recorded when its answer comes (its row locked past the journal's
  timeout) is recorded again in the background once the journal answers: before, the booked
  deal stayed ``pending`` and then ``unknown`` (5 of 5).
- A process that ends normally while a claim is being undone, or while payout rows are in
  flight (a script that breaks out of ``pay_out_iter``), lets that work end first (bounded,
  10 s): before, every such key was left ``pending`` and read ``unknown`` by the next run
  (12 of 12 on Redis, 8 of 8 on SQLite, 5 of 5 rows).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need
from journal_support import RedisServer, deal_args, requests_to
from postgres_support import PostgresServer, postgres_server, table_name

__all__ = ["postgres_server"]  # a fixture, imported for the tests below

DEALS = "POST /v1/payments/deals"
QUOTES = "POST /v1/payments/quotes"


def test_a_result_its_locked_row_kept_out_is_recorded_once_the_lock_goes(fxpay_sandbox: Any, postgres_server: PostgresServer) -> None:
    psycopg = need("psycopg")
    journal = fxpay.PostgresJournal(postgres_server.conninfo, table=table_name(), timeout=1.0)
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        for i in range(5):
            key = f"locked-{i}"
            args = deal_args(c)
            fxpay_sandbox.delay_next(DEALS, 1.0)  # the answer comes while the row is locked
            locked, release = threading.Event(), threading.Event()

            def lock_the_row(key: str = key, locked: threading.Event = locked, release: threading.Event = release) -> None:
                with psycopg.connect(postgres_server.conninfo) as conn:
                    deadline = time.monotonic() + 20
                    while not conn.execute(f'SELECT 1 FROM "{journal.table}" WHERE key = %s', (key,)).fetchall():
                        assert time.monotonic() < deadline
                        conn.rollback()
                        time.sleep(0.01)
                    conn.execute(f'SELECT 1 FROM "{journal.table}" WHERE key = %s FOR UPDATE', (key,))
                    locked.set()
                    release.wait(30)
                    conn.rollback()

            locker = threading.Thread(target=lock_the_row)
            locker.start()
            deal = c.create_deal(**args, idempotency_key=key)  # booked: its record waits on the lock
            assert locked.is_set()
            time.sleep(1.5)  # past the journal's timeout: the first record failed
            release.set()
            locker.join(30)
            deadline = time.monotonic() + 20
            while (e := journal.get(key)) is None or e.state != "done":
                assert time.monotonic() < deadline, f"{key} never recorded: {e}"
                time.sleep(0.05)
            assert e.result == deal.deal_id
            # A repeat returns the deal and sends nothing.
            before = requests_to(fxpay_sandbox, DEALS)
            assert c.create_deal(**args, idempotency_key=key).deal_id == deal.deal_id
            assert requests_to(fxpay_sandbox, DEALS) == before
        assert journal.unknown() == []


UNDO_SCRIPT = """
import sys, time, fxpay

kind, where, base, cid, secret, n = sys.argv[1:7]

def slow(cls):
    class Slow(cls):
        def claim(self, entry):
            time.sleep(0.5)  # the claim lands after the call gave up
            return super().claim(entry)
    return Slow

if kind == "sqlite":
    journal = slow(fxpay.SqliteJournal)(where)
else:
    url, prefix = where.split("|")
    journal = slow(fxpay.RedisJournal)(url, prefix=prefix)
with fxpay.Client(cid, secret, base_url=base, journal=journal, deadline=0.1) as c:
    for i in range(int(n)):
        try:
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="AUD", idempotency_key=f"undo-{i}")
        except fxpay.TimeoutError:
            pass
print("exiting", flush=True)
"""


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_an_exit_while_claims_are_undone_leaves_no_false_unknown(
    fxpay_sandbox: Any, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    n = 8 if kind == "sqlite" else 12
    if kind == "sqlite":
        where = str(tmp_path / "undo.journal")
        journal: fxpay.Journal = fxpay.SqliteJournal(where)
    else:
        server = RedisServer(tmp_path)
        server.start()
        request.addfinalizer(server.stop)
        journal = fxpay.RedisJournal(server.url, prefix="undo:")
        journal.create()
        where = f"{server.url}|undo:"
    script = tmp_path / "undo.py"
    script.write_text(UNDO_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), kind, where, fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret, str(n)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "exiting" in out.stdout
    states = {}
    for i in range(n):
        e = journal.get(f"undo-{i}")
        states[f"undo-{i}"] = None if e is None else e.state
    assert set(states.values()) <= {None, "released"}, states
    assert journal.unknown() == []
    assert requests_to(fxpay_sandbox, QUOTES) == 0


BREAK_SCRIPT = """
import json, sys, fxpay

path, base, cid, secret, bid = sys.argv[1:6]
rows = [
    {"key": f"brk{i}", "buy_currency": "USD", "buy_amount": "10", "sell_currency": "AUD",
     "beneficiary_id": bid, "pay_reason": "invoice", "pay_reference": f"BRK-{i}"}
    for i in range(20)
]
c = fxpay.Client(cid, secret, base_url=base, journal=fxpay.SqliteJournal(path))  # never closed, as in a notebook
for result in c.pay_out_iter(rows, funding_source="Own account", concurrency=5):
    print(json.dumps({"first": result["key"], "status": result["status"]}), flush=True)
    break
print("exiting", flush=True)
"""


def test_a_break_out_of_pay_out_iter_leaves_no_row_pending(fxpay_sandbox: Any, tmp_path: Path) -> None:
    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    # The first deal answers at once; the others in flight when the loop breaks take 2 s.
    fxpay_sandbox.delay_next(DEALS, 0.05)
    for _ in range(19):
        fxpay_sandbox.delay_next(DEALS, 2.0)
    path = tmp_path / "break.journal"
    script = tmp_path / "brk.py"
    script.write_text(textwrap.dedent(BREAK_SCRIPT))
    out = subprocess.run(
        [sys.executable, str(script), str(path), fxpay_sandbox.base_url, fxpay_sandbox.client_id, fxpay_sandbox.client_secret, bid],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "exiting" in out.stdout
    first = json.loads(out.stdout.splitlines()[0])
    assert first["status"] == "booked"
    journal = fxpay.SqliteJournal(path)
    states: dict[str, str] = {}
    for i in range(20):
        for step in ("quote", "deal"):
            e = journal.get(f"brk{i}/{step}")
            if e is not None:
                states[f"brk{i}/{step}"] = e.state
    in_flight = [k for k, s in states.items() if s in ("pending", "unknown")]
    assert in_flight == [], states
    booked = [k for k, s in states.items() if k.endswith("/deal") and s == "done"]
    assert len(booked) >= 2, states  # the rows in flight at the break were finished, not dropped
    assert len(booked) == len(fxpay_sandbox.deals())
    assert journal.unknown() == []

"""Two processes race on the same keys, and journals that cannot be used fail closed."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlite_elsewhere import Elsewhere

import fxpay

from conftest import make_beneficiary
from journal_support import RedisServer, deal_args, redis_server, requests_to

__all__ = ["redis_server"]

WORKER = Path(__file__).with_name("payout_worker.py")
DEALS = "POST /v1/payments/deals"


def rows(bid: str, n: int) -> list[dict[str, Any]]:
    return [
        {
            "key": f"race-{i}",
            "buy_currency": "USD",
            "buy_amount": str(Decimal(20 + i)),
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": f"RACE-{i}",
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
def test_two_processes_racing_on_100_keys_book_100_deals(
    fxpay_sandbox: Any, tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"race{time.monotonic_ns()}:"
        fxpay.RedisJournal(server.url, prefix=prefix).create()
        spec = f"redis:{server.url}|{prefix}"
    else:
        spec = f"sqlite:{tmp_path / 'race.journal'}"
    with fxpay_sandbox.client() as c:
        bid = c.create_beneficiary(make_beneficiary())
    table = rows(bid, 100)
    cfg = {
        "base_url": fxpay_sandbox.base_url,
        "client_id": fxpay_sandbox.client_id,
        "client_secret": fxpay_sandbox.client_secret,
        "journal": spec,
        "rows": table,
        "start_at": time.time() + 2.0,  # both start together, whatever their import time
    }
    argv = [sys.executable, str(WORKER), json.dumps(cfg)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
        print(err[-2000:])
    print(kind, outs)
    refs = collections.Counter(b["payReference"] for d in fxpay_sandbox.deals() for b in d["beneficiaries"])
    # Without the journal each process would book its own 100: 200.
    assert sum(refs.values()) == 100
    assert set(refs) == {r["pay_reference"] for r in table}
    assert sum(o.get("booked", 0) for o in outs) == 100
    # A row the other process was booking is in progress here (unknown), or replayed.
    for o in outs:
        assert set(o) <= {"booked", "replayed", "unknown"}


def test_redis_down_fails_closed_and_sends_nothing(fxpay_sandbox: Any, tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    journal = fxpay.RedisJournal(server.url, prefix="down:", socket_timeout=1.0)
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        server.stop()
        before = fxpay_sandbox.stats()["requests"]
        with pytest.raises(fxpay.JournalError) as e:
            c.create_deal(**args, idempotency_key="while-down")
        assert isinstance(e.value, fxpay.IdempotencyError)
        assert e.value.entry is None
        assert fxpay_sandbox.stats()["requests"] == before
        row = {"key": "p", "buy_currency": "USD", "buy_amount": "5", "sell_currency": "AUD", "beneficiary_id": "b"}
        out = c.pay_out([{**row, "pay_reason": "r", "pay_reference": "P"}], funding_source="Own account", progress=False)
        assert out[0]["status"] == "refused"
        assert "journal" in out[0]["error"]
        assert fxpay_sandbox.stats()["requests"] == before
        with pytest.raises(fxpay.JournalError):
            journal.get("while-down")
        # Back up: the same key goes through, once.
        server.start()
        deal = c.create_deal(**args, idempotency_key="while-down")
        assert c.create_deal(**args, idempotency_key="while-down") == deal
        assert requests_to(fxpay_sandbox, DEALS) == 1
    server.stop()


def test_a_locked_sqlite_journal_fails_closed_and_sends_nothing(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "locked.journal"
    journal = fxpay.SqliteJournal(path, timeout=0.2)
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        other = Elsewhere(path)
        other.run("BEGIN EXCLUSIVE")  # another process's long write
        before = fxpay_sandbox.stats()["requests"]
        started = time.monotonic()
        with pytest.raises(fxpay.JournalError, match="locked"):
            c.create_deal(**args, idempotency_key="locked")
        assert time.monotonic() - started < 5
        assert fxpay_sandbox.stats()["requests"] == before
        other.run("ROLLBACK")
        other.close()
        c.create_deal(**args, idempotency_key="locked")
        assert requests_to(fxpay_sandbox, DEALS) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_read_only_sqlite_journal_fails_closed_and_sends_nothing(fxpay_sandbox: Any, tmp_path: Path) -> None:
    path = tmp_path / "ro.journal"
    journal = fxpay.SqliteJournal(path)
    journal.close()
    with fxpay_sandbox.client(journal=journal) as c:
        args = deal_args(c)
        before = fxpay_sandbox.stats()["requests"]
        os.chmod(path, 0o444)
        os.chmod(tmp_path, 0o555)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            outcome = "no error"
            try:
                if os.geteuid() == 0:  # root writes anywhere: be nobody, as a deployed app is
                    os.setgid(65534)
                    os.setuid(65534)
                c.create_deal(**args, idempotency_key="ro")
            except BaseException as e:
                outcome = f"{type(e).__name__}: {e}"
            os.write(w, outcome.encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r) as f:
            outcome = f.read()
        os.chmod(tmp_path, 0o755)
        assert outcome.startswith("JournalError"), outcome
        assert fxpay_sandbox.stats()["requests"] == before


def test_with_aof_a_key_outlives_a_redis_restart(fxpay_sandbox: Any, tmp_path: Path) -> None:
    # docs/idempotency.md: at most once across a Redis restart needs appendonly yes with
    # appendfsync always. The server is killed (SIGKILL: no shutdown save) right after the call.
    server = RedisServer(tmp_path, aof=True)
    server.start()
    try:  # the server is stopped whatever fails, so no redis-server outlives the test
        journal = fxpay.RedisJournal(server.url, prefix="aof:", socket_timeout=1.0)
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            args = deal_args(c)
            deal = c.create_deal(**args, idempotency_key="survives")
            assert server.proc is not None
            server.proc.kill()
            server.proc.wait(10)
            server.proc = None
            server.start()
            assert c.create_deal(**args, idempotency_key="survives") == deal
            assert requests_to(fxpay_sandbox, DEALS) == 1
    finally:
        server.stop()


def test_calls_of_many_threads_waiting_for_a_locked_sqlite_journal_all_complete(fxpay_sandbox: Any, tmp_path: Path) -> None:
    # Another process holds the journal's write lock while six threads of this one create a
    # beneficiary each under its own key: the first write waits for the lock, the five others
    # queue behind it (group commit). Once the lock is given back every call completes: six
    # beneficiaries, six done entries, none lost or mixed up, and repeating a key sends nothing.
    import threading

    path = tmp_path / "journal.db"
    journal = fxpay.SqliteJournal(path, timeout=120)
    other = Elsewhere(path)
    other.run("BEGIN IMMEDIATE")
    results: dict[int, str] = {}
    errors: list[BaseException] = []
    with fxpay_sandbox.client(journal=journal) as c:
        c._payments_token()  # the token first: its request is not under a key

        def create(i: int) -> None:
            try:
                results[i] = c.create_beneficiary(make_beneficiary(), idempotency_key=f"b{i}")
            except BaseException as e:  # re-raised below
                errors.append(e)

        threads = [threading.Thread(target=create, args=(i,), daemon=True) for i in range(6)]
        for t in threads:
            t.start()
        # The queue of writes waiting for the leader's commit: the one place this waits on.
        deadline = time.monotonic() + 60
        while journal._writes_waiting < 5:
            assert time.monotonic() < deadline, f"{journal._writes_waiting} writes queued behind the locked one, not 5"
            time.sleep(0.01)
        assert requests_to_beneficiaries(fxpay_sandbox) == 0  # nothing is sent before its claim is on disk
        other.run("COMMIT")
        other.close()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "a call never completed"
        assert errors == []
        assert sorted(results) == list(range(6))
        assert len(set(results.values())) == 6
        assert requests_to_beneficiaries(fxpay_sandbox) == 6
        for i, bid in results.items():
            entry = journal.get(f"b{i}")
            assert entry is not None
            assert (entry.state, entry.result) == ("done", bid)
            assert c.create_beneficiary(make_beneficiary(), idempotency_key=f"b{i}") == bid
        assert requests_to_beneficiaries(fxpay_sandbox) == 6


def requests_to_beneficiaries(sb: Any) -> int:
    return int(sb.stats()["paths"].get("POST /v1/payments/beneficiaries", 0))

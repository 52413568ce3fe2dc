"""What the journal tests share: a real redis-server, journals of each kind, a deal's steps."""

from __future__ import annotations

import datetime
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need, need_program


class RedisServer:
    """A redis-server on a Unix socket of its own, that a test can stop and start again: with
    AOF (appendfsync always) unless `aof=False`, as RedisJournal requires by default."""

    def __init__(self, folder: Path, *, aof: bool = True, extra: tuple[str, ...] = (), wrap: tuple[str, ...] = ()) -> None:
        """``wrap``: a command the server runs under (strace, to count its fsyncs)."""
        self.folder = folder
        self.extra = extra
        self.wrap = wrap
        self.sock = folder / "redis.sock"
        self.url = f"unix://{self.sock}?db=0"
        self.aof = aof
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        redis = need("redis")
        args = [need_program("redis-server"), "--port", "0", "--unixsocket", str(self.sock), "--dir", str(self.folder), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        args += self.extra
        self.proc = subprocess.Popen([*self.wrap, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 30
        while True:
            try:
                probe.ping()
                break
            except (redis.ConnectionError, FileNotFoundError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    pytest.fail("redis-server did not start")
                time.sleep(0.02)
        probe.close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


def make_journal(kind: str, tmp_path: Path, redis_server: RedisServer | None) -> fxpay.Journal:
    if kind == "memory":
        return fxpay.MemoryJournal()
    if kind == "sqlite":
        return fxpay.SqliteJournal(tmp_path / "journal.db")
    assert redis_server is not None
    journal = fxpay.RedisJournal(redis_server.url, prefix=f"t{time.monotonic_ns()}:")
    journal.create()
    return journal


def journal_over_python(kind: str, where: str, name: str) -> Any:
    """A journal whose storage is Python's, so that the core calls its storage methods back:
    ``"redis client"``, a ``RedisJournal`` over a redis-py client of the server at the URL
    ``where`` with the key prefix ``name``; ``"postgres callable"``, a ``PostgresJournal``
    over a psycopg connection callable for the conninfo ``where`` with the table ``name``.
    Two made with the same arguments share their storage. Not created."""
    if kind == "redis client":
        redis = need("redis")
        return fxpay.RedisJournal(redis.Redis.from_url(where), prefix=name)
    assert kind == "postgres callable", kind
    psycopg = need("psycopg")
    return fxpay.PostgresJournal(lambda: psycopg.connect(where), table=name)


def named_right_after(journal: Any, keys: list[str]) -> tuple[set[str], list[fxpay.JournalEntry], datetime.datetime]:
    """Right after a fan-out: the rows the journal names as of unknown outcome, those that
    ``journal.unknown()`` lists and those ``journal.leased(keys)`` lists (held under a
    lease, which says until when), the leased entries, and when they were read. Leased first:
    a lease that lapses between the two readings is then in ``unknown()``."""
    read_at = datetime.datetime.now(datetime.timezone.utc)
    leased = journal.leased(keys)
    unknown = journal.unknown()
    return {e.key.rsplit("/", 1)[0] for e in [*leased, *unknown]}, leased, read_at


def check_named(out_unknown: set[str], named: set[str], leased: list[fxpay.JournalEntry], read_at: datetime.datetime) -> None:
    """Every row that a fan-out returned ``unknown`` is named by the journal right after it,
    and a lease runs at most 30 s past its reading."""
    assert out_unknown <= named, f"rows unknown in the result but named nowhere: {sorted(out_unknown - named)[:10]}"
    for e in leased:
        assert e.state == "pending", e
        assert e.lease_until <= read_at + datetime.timedelta(seconds=31), (e.key, e.lease_until, read_at)


def wait_out(leased: list[fxpay.JournalEntry]) -> None:
    """Sleeps until the last of ``leased`` has lapsed (what the docs' reconcile loop does)."""
    for e in leased:
        time.sleep(max(0.0, (e.lease_until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) + 0.05)


def hold_elsewhere(journal: Any, key: str, seconds: float, holder: str = "another-host~boot/4242/tok") -> None:
    """``key``'s entry made ``pending`` under ``holder`` (by default on another machine: a
    Celery or Dask worker there) whose lease lapses in ``seconds``: what a worker killed
    mid-deal leaves."""
    entry = journal.get(key)
    assert entry is not None
    data = json.loads(entry.to_json())
    data.update(state="pending", holder=holder, error=None, lease_until=int((time.time() + seconds) * 1000))
    assert journal.swap(entry, fxpay.JournalEntry.from_json(json.dumps(data)))


def held_long(journal: Any, pids: set[int], seconds: float) -> tuple[int, str] | None:
    """The holder pid (one of ``pids``) and row key of a deal step ``pending`` for at least
    ``seconds`` (a deal the sandbox holds on purpose: a kill of that process lands while its
    request is on its way), the longest held first; None while there is none."""
    now = datetime.datetime.now(datetime.timezone.utc)
    for e in sorted(journal.leased(), key=lambda e: e.created_at):
        pid = int(e.holder.rsplit("/", 2)[-2])
        if e.key.endswith("/deal") and pid in pids and (now - e.created_at).total_seconds() >= seconds:
            return pid, e.key.rsplit("/", 1)[0]
    return None


def requests_to(sb: Any, path: str) -> int:
    n: int = sb.stats()["paths"][path]
    return n


def deal_args(c: fxpay.Client, beneficiary_id: str | None = None, *, amount: str = "100") -> dict[str, Any]:
    """A fresh quote (not under a key) and the arguments of a deal on it."""
    if beneficiary_id is None:
        beneficiary_id = c.create_beneficiary(make_beneficiary())
    qid = c.create_quote(buy_currency="USD", buy_amount=Decimal(amount), sell_currency="AUD")
    q = c.get_quote(qid)
    return {
        "quote_id": qid,
        "funding_source": "Own account",
        "beneficiaries": [
            fxpay.DealBeneficiary(beneficiary_id=beneficiary_id, amount=q.sell_amount, pay_reason="invoice", pay_reference="INV-1")
        ],
    }


def read_until(read: Any, want: Any, *, meanwhile: Any, timeout: float = 10.0) -> None:
    """Reads ``read()`` until it gives ``want``; until then it may give ``meanwhile`` only.
    A keyed call's result rides the journal's next commit (one durable write per call, issue
    56): another session reads the claim (``pending``, no result) for a few milliseconds
    after the call returned, then the result; never anything else."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == want:
            return
        assert got == meanwhile, f"read {got!r}: neither {want!r} nor, meanwhile, {meanwhile!r}"
        assert time.monotonic() < deadline, f"still {got!r} after {timeout} s, not {want!r}"
        time.sleep(0.01)


QUOTES = "POST /v1/payments/quotes"


def quote(c: fxpay.Client, key: str) -> str:
    return c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD", idempotency_key=key)


def held_call(sb: Any, c: fxpay.Client, key: str, claimed: Callable[[], object], *, where: str) -> tuple[threading.Thread, list[str]]:
    """Starts ``quote(c, key)`` on a thread, the sandbox's answer delayed by 1 s, and returns
    once ``claimed()`` is true (the call's claim reached its store, ``where``): the thread,
    and the list its result is put in when the call ends."""
    sb.delay_next(QUOTES, 1.0)
    got: list[str] = []
    call = threading.Thread(target=lambda: got.append(quote(c, key)))
    call.start()
    deadline = time.monotonic() + 30
    while not claimed():
        assert time.monotonic() < deadline, f"the claim never reached {where}"
        time.sleep(0.005)
    return call, got


def pending_entry(key: str) -> fxpay.JournalEntry:
    """A ``pending`` claim of ``key`` held by another host (its lease far off), as a journal's
    storage methods take it by hand."""
    return fxpay.JournalEntry.from_json(
        json.dumps(
            {
                "key": key,
                "operation": "create_quote",
                "state": "pending",
                "result": None,
                "deal_id": None,
                "created_at": 1_700_000_000_000,
                "updated_at": 1_700_000_000_000,
                "error": None,
                "holder": "another-host~boot/4242/tok",
                "lease_until": 4_102_444_800_000,
                "fingerprint": "00" * 32,
                "response": None,
                "nonce": None,
                "request": None,
            }
        )
    )

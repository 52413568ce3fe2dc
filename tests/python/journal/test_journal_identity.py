"""A shared journal knows itself (issue 52): a Redis or PostgreSQL that lost its journal is
refused, never taken for a new, empty one that would send every booked key again.

Each case below sent 20-30 booked payments again before: ``FLUSHALL``, a Redis restarted
from an empty data dir, ``appendonly`` switched off under a live client, a writable replica.
The counts are of requests the sandbox received.
"""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need
from journal_support import RedisServer, requests_to

QUOTES = "POST /v1/payments/quotes"
KEYS = 30


def quote(c: fxpay.Client, key: str) -> str:
    return c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD", idempotency_key=key)


def book(c: fxpay.Client, n: int = KEYS) -> dict[str, str]:
    return {f"k{i}": quote(c, f"k{i}") for i in range(n)}


def again_sends_nothing(sb: Any, c: fxpay.Client, match: str, n: int = KEYS) -> None:
    """Every booked key tried again: each a JournalError saying what happened, none sent."""
    before = requests_to(sb, QUOTES)
    for i in range(n):
        with pytest.raises(fxpay.JournalError, match=match) as e:
            quote(c, f"k{i}")
        assert "Nothing was sent" in str(e.value)
    assert requests_to(sb, QUOTES) == before


@pytest.fixture
def server(tmp_path: Path) -> Any:
    s = RedisServer(tmp_path)
    s.start()
    yield s
    s.stop()


def test_opening_never_creates_a_journal(fxpay_sandbox: Any, server: RedisServer) -> None:
    journal = fxpay.RedisJournal(server.url, prefix="new:")
    with fxpay_sandbox.client(journal=journal) as c:
        with pytest.raises(fxpay.JournalError, match="opening a journal never creates one") as e:
            quote(c, "k")
        text = str(e.value)
        assert "create()" in text
        assert "python -m fxpay journal create" in text
        assert "sends every key it held again" in text
        assert requests_to(fxpay_sandbox, QUOTES) == 0
        journal.create()
        journal.create()  # does nothing where the journal is
        qid = quote(c, "k")
        assert quote(c, "k") == qid
    assert requests_to(fxpay_sandbox, QUOTES) == 1


def test_a_flushall_under_a_live_process_is_caught_at_the_next_claim(fxpay_sandbox: Any, server: RedisServer) -> None:
    redis = need("redis")
    journal = fxpay.RedisJournal(server.url, prefix="flush:")
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
        redis.Redis.from_url(server.url).flushall()
        again_sends_nothing(fxpay_sandbox, c, "identity key 'flush:journal' is gone")
        # unknown() does not read an emptied Redis as a journal with nothing open.
        with pytest.raises(fxpay.JournalError, match="is gone"):
            journal.unknown()
    # A process started afterwards refuses it too.
    with fxpay_sandbox.client(journal=fxpay.RedisJournal(server.url, prefix="flush:")) as c:
        again_sends_nothing(fxpay_sandbox, c, "opening a journal never creates one")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


def test_a_journal_made_again_under_a_live_process_is_not_its_journal(fxpay_sandbox: Any, server: RedisServer) -> None:
    redis = need("redis")
    journal = fxpay.RedisJournal(server.url, prefix="again:")
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
        redis.Redis.from_url(server.url).flushall()
        fxpay.RedisJournal(server.url, prefix="again:").create()  # someone made a new one
        again_sends_nothing(fxpay_sandbox, c, "holds another journal")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


def test_a_redis_restarted_from_an_empty_data_dir_is_refused(fxpay_sandbox: Any, server: RedisServer) -> None:
    journal = fxpay.RedisJournal(server.url, prefix="vol:", socket_timeout=2.0)
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
        # A container started again without its volume: same address, no data.
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait(10)
        server.proc = None
        for p in server.folder.iterdir():
            if p.name != "redis.sock":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        server.start()
        again_sends_nothing(fxpay_sandbox, c, "is gone")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


def test_appendonly_switched_off_under_a_live_client_is_caught_at_its_next_connection(fxpay_sandbox: Any, server: RedisServer) -> None:
    redis = need("redis")
    journal = fxpay.RedisJournal(server.url, prefix="aofoff:", socket_timeout=2.0)
    journal.create()
    admin = redis.Redis.from_url(server.url)
    with fxpay_sandbox.client(journal=journal) as c:
        book(c)
        admin.config_set("appendonly", "no")
        # The client's connections are dropped (a restart, a network blip, an idle timeout):
        # each connection made again is checked before its first command.
        admin.client_kill_filter(_type="normal", skipme=True)
        again_sends_nothing(fxpay_sandbox, c, "appendonly setting is 'no'")
    assert requests_to(fxpay_sandbox, QUOTES) == KEYS


def test_a_writable_replica_is_refused(fxpay_sandbox: Any, server: RedisServer, tmp_path: Path) -> None:
    redis = need("redis")
    primary = fxpay.RedisJournal(server.url, prefix="rep:")
    primary.create()
    folder = tmp_path / "replica"
    folder.mkdir()
    replica = RedisServer(folder, extra=("--replica-read-only", "no"))
    replica.start()
    try:
        url = replica.url
        # A replica of the primary on a TCP port of its own: the primary listens on a socket
        # only, so the replica is made one by name (REPLICAOF a host that never answers is
        # still a replica: ROLE says "slave", and its writes would be lost at a resync).
        redis.Redis.from_url(url).execute_command("REPLICAOF", "127.0.0.1", "1")
        with fxpay_sandbox.client(journal=fxpay.RedisJournal(url, prefix="rep:")) as c:
            with pytest.raises(fxpay.JournalError, match="it is a replica") as e:
                quote(c, "k")
            assert "Nothing was sent" in str(e.value)
        with pytest.raises(fxpay.JournalError, match="it is a replica"):
            fxpay.RedisJournal(url, prefix="rep2:").create()
        assert requests_to(fxpay_sandbox, QUOTES) == 0
    finally:
        replica.stop()


def _create(url: str, prefix: str, q: Any) -> None:
    j = fxpay.RedisJournal(url, prefix=prefix)
    j.create()
    q.put(j._identity())


def test_create_is_safe_to_race_from_many_processes(server: RedisServer) -> None:
    redis = need("redis")
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_create, args=(server.url, "race:", q)) for _ in range(8)]
    for p in procs:
        p.start()
    ids = {q.get(timeout=60) for _ in procs}
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert len(ids) == 1, ids
    [made] = ids
    assert made == redis.Redis.from_url(server.url).get("race:journal").decode()  # the one stored


def test_python_m_fxpay_journal_create(fxpay_sandbox: Any, server: RedisServer) -> None:
    url = server.url
    out = subprocess.run(
        [sys.executable, "-m", "fxpay", "journal", "create", url, "--prefix", "cli:"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "created" in out.stdout
    again = subprocess.run(
        [sys.executable, "-m", "fxpay", "journal", "create", url, "--prefix", "cli:"], capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert "already" in again.stdout
    with fxpay_sandbox.client(journal=fxpay.RedisJournal(url, prefix="cli:")) as c:
        quote(c, "k")
    bad = subprocess.run([sys.executable, "-m", "fxpay", "journal", "create", "ftp://x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "redis://" in bad.stderr

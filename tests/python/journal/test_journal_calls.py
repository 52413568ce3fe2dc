"""Creating calls under an idempotency key, on each journal, against the real sandbox over HTTP."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import make_beneficiary, need
from journal_support import RedisServer, deal_args, journal_over_python, make_journal, pending_entry, redis_server, requests_to
from postgres_support import make_postgres_journal, postgres_server, table_name

__all__ = ["postgres_server", "redis_server"]  # fixtures, imported for the tests below

DEALS = "POST /v1/payments/deals"
QUOTES = "POST /v1/payments/quotes"


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres", "redis client", "postgres callable"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> fxpay.Journal:
    """Each journal; the last two keep their storage in Python (a redis-py client, a psycopg
    connection callable), so the core calls their storage methods back."""
    if request.param == "postgres":
        return make_postgres_journal(request.getfixturevalue("postgres_server"))
    if request.param == "redis client":
        on_client = journal_over_python(request.param, request.getfixturevalue("redis_server").url, f"c{time.monotonic_ns()}:")
        on_client.create()
        return on_client
    if request.param == "postgres callable":
        on_callable = journal_over_python(request.param, request.getfixturevalue("postgres_server").conninfo, table_name())
        on_callable.create()
        return on_callable
    server: RedisServer | None = request.getfixturevalue("redis_server") if request.param == "redis" else None
    return make_journal(request.param, tmp_path, server)


@pytest.fixture
def client(fxpay_sandbox: Any, journal: fxpay.Journal) -> Iterator[fxpay.Client]:
    with fxpay_sandbox.client(journal=journal) as c:
        yield c


def test_a_repeated_deal_key_returns_the_first_deal_and_sends_nothing(
    fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal
) -> None:
    args = deal_args(client)
    first = client.create_deal(**args, idempotency_key="inv-1/deal")
    sent = requests_to(fxpay_sandbox, DEALS)
    again = client.create_deal(**args, idempotency_key="inv-1/deal")
    assert again == first
    assert again.raw == first.raw
    assert requests_to(fxpay_sandbox, DEALS) == sent == 1
    assert [d["dealId"] for d in fxpay_sandbox.deals()] == [first.deal_id]
    entry = journal.get("inv-1/deal")
    assert entry is not None
    assert (entry.state, entry.operation, entry.result, entry.error) == ("done", "create_deal", first.deal_id, None)
    assert entry.created_at.tzinfo is not None
    assert entry.updated_at >= entry.created_at
    # Who holds it: this process (``host/pid/token``); what it sent: a SHA-256 in hex, the
    # same for the same request under another key, another for another request.
    host, pid, token = entry.holder.rsplit("/", 2)
    assert host
    assert token
    assert pid == str(os.getpid())
    assert len(entry.fingerprint) == 64
    assert int(entry.fingerprint, 16) >= 0  # hex
    other_quote = client.create_quote(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key="fp-1")
    same = client.create_quote(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key="fp-2")
    fp1, fp2 = journal.get("fp-1"), journal.get("fp-2")
    assert fp1 is not None
    assert fp2 is not None
    assert other_quote != same
    assert fp1.fingerprint == fp2.fingerprint != entry.fingerprint
    # The instants are this call's.
    now = datetime.datetime.now(datetime.timezone.utc)
    assert now - datetime.timedelta(minutes=1) < entry.created_at <= now
    assert now - datetime.timedelta(minutes=1) < entry.updated_at <= now


async def test_the_awaitable_twins_keep_the_same_keys(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    b = make_beneficiary()
    bid = await client.create_beneficiary_async(b, idempotency_key="b1")
    assert await client.create_beneficiary_async(b, idempotency_key="b1") == bid
    # The blocking twin sees the same key.
    assert client.create_beneficiary(b, idempotency_key="b1") == bid
    qid = await client.create_quote_async(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key="q1")
    assert await client.create_quote_async(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key="q1") == qid
    args = deal_args(client, bid)
    deal = await client.create_deal_async(**args, idempotency_key="d1")
    assert await client.create_deal_async(**args, idempotency_key="d1") == deal
    stats = fxpay_sandbox.stats()
    assert (stats["beneficiaries"], stats["deals"]) == (1, 1)  # deal_args made none: bid was given
    assert requests_to(fxpay_sandbox, QUOTES) == 2  # q1 once, and deal_args' own quote


def test_spot_deal_replays_its_process_id_and_generated_nonce(fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal) -> None:
    args = deal_args(client)
    spot = client.create_spot_deal(**args, callback_url="http://127.0.0.1:9/hook", idempotency_key="s1")
    again = client.create_spot_deal(**args, callback_url="http://127.0.0.1:9/hook", idempotency_key="s1")
    assert again == spot
    assert again.callback_nonce == spot.callback_nonce is not None
    assert requests_to(fxpay_sandbox, "POST /v1/payments/deals/spot") == 1
    entry = journal.get("s1")
    assert entry is not None
    assert entry.result == spot.process_id
    # The nonce is kept (a replay must return it) but never shown.
    assert spot.callback_nonce not in repr(entry)
    with pytest.raises(fxpay.KeyReusedError):
        client.create_spot_deal(**args, callback_url="http://127.0.0.1:9/other", idempotency_key="s1")


def test_complete_spot_records_the_deal_id_on_its_spot_deals_entry_once(client: fxpay.Client, journal: fxpay.Journal) -> None:
    """What a receiver does with a ``DealCreated`` (found by its process id), on each journal."""
    spot = client.create_spot_deal(**deal_args(client), callback_url="http://127.0.0.1:9/hook", idempotency_key="s1")
    quote_id = client.create_quote(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key="q1")
    entry = journal.complete_spot(spot.process_id, "deal-1")
    assert entry is not None
    assert (entry.key, entry.state, entry.result, entry.deal_id) == ("s1", "done", spot.process_id, "deal-1")
    assert journal.get("s1") == entry
    # A second notification never overwrites the deal id; only a spot deal is completed.
    assert journal.complete_spot(spot.process_id, "deal-2") == entry
    assert journal.complete_spot(quote_id, "deal-3") is None
    assert journal.complete_spot("no-such-process", "deal-4") is None


def test_the_same_key_for_another_request_is_refused_unsent(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    client.create_quote(buy_currency="AUD", buy_amount="10", sell_currency="USD", idempotency_key="k")
    for other in (
        lambda: client.create_quote(buy_currency="AUD", buy_amount="11", sell_currency="USD", idempotency_key="k"),
        lambda: client.create_quote(buy_currency="AUD", buy_amount="10", sell_currency="USD", beneficiaries=2, idempotency_key="k"),
        lambda: client.create_beneficiary(make_beneficiary(), idempotency_key="k"),
    ):
        before = fxpay_sandbox.stats()["requests"]
        with pytest.raises(fxpay.KeyReusedError) as e:
            other()
        assert isinstance(e.value, fxpay.IdempotencyError)
        assert e.value.entry is not None
        assert e.value.entry.key == "k"
        assert fxpay_sandbox.stats()["requests"] == before


def test_a_key_in_flight_is_in_progress_at_once(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    args = deal_args(client)
    fxpay_sandbox.delay_next(DEALS, 1.5)
    done: list[fxpay.Deal] = []
    t = threading.Thread(target=lambda: done.append(client.create_deal(**args, idempotency_key="slow")))
    t.start()
    deadline = time.monotonic() + 10
    while requests_to(fxpay_sandbox, DEALS) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(fxpay.InProgressError) as e:
        client.create_deal(**args, idempotency_key="slow")
    assert time.monotonic() - started < 1.0
    assert e.value.entry is not None
    assert e.value.entry.state == "pending"
    t.join(10)
    assert len(done) == 1
    assert requests_to(fxpay_sandbox, DEALS) == 1
    assert client.create_deal(**args, idempotency_key="slow") == done[0]


def test_a_claim_equal_to_the_stored_entry_gets_the_stored_one(client: fxpay.Client, journal: fxpay.Journal) -> None:
    # Two calls of one process that claim a key in the same millisecond make equal entries
    # (one holder, the same times and request). The second must get the first's entry, not a
    # claim of its own. MemoryJournal compared texts and said "stored" to both, so both sent:
    # test_a_key_in_flight_is_in_progress_at_once once saw no InProgressError on CPython 3.13.
    args = deal_args(client)
    deal = client.create_deal(**args, idempotency_key="k")
    stored = journal.get("k")
    assert stored is not None
    again = journal.claim(stored)
    assert again is not None
    assert again.to_json() == stored.to_json()
    assert client.create_deal(**args, idempotency_key="k") == deal


@pytest.mark.parametrize("fault", ["drop_after", "500", "timeout"])
def test_a_lost_answer_is_unknown_and_never_sent_again(fxpay_sandbox: Any, journal: fxpay.Journal, fault: str) -> None:
    with fxpay_sandbox.client(journal=journal, timeout=0.5 if fault == "timeout" else 30.0) as client:
        args = deal_args(client)
        if fault == "drop_after":
            fxpay_sandbox.drop_next(DEALS, after_processing=True)
        elif fault == "500":
            fxpay_sandbox.fail_next(DEALS, 500)
        else:
            fxpay_sandbox.delay_next(DEALS, 1.5)
        with pytest.raises(fxpay.OutcomeUnknownError) as e:
            client.create_deal(**args, idempotency_key="lost")
        assert e.value.entry is not None
        assert e.value.entry.state == "unknown"
        assert e.value.entry.error
        sent = requests_to(fxpay_sandbox, DEALS)
        assert sent == 1
        with pytest.raises(fxpay.OutcomeUnknownError):
            client.create_deal(**args, idempotency_key="lost")
        assert requests_to(fxpay_sandbox, DEALS) == 1
        assert [x.key for x in journal.unknown()] == ["lost"]


def test_resolve_settles_an_unknown_key_either_way(fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal) -> None:
    # A quote books one deal: each key has its own.
    args = {key: deal_args(client) for key in ("created", "not-created")}
    for key in args:
        fxpay_sandbox.drop_next(DEALS, after_processing=True)
        with pytest.raises(fxpay.OutcomeUnknownError):
            client.create_deal(**args[key], idempotency_key=key)
    booked = [d["dealId"] for d in fxpay_sandbox.deals()]
    assert len(booked) == 2
    # Found in the provider's records: the first was created...
    entry = journal.resolve("created", result=booked[0])
    assert (entry.state, entry.result) == ("done", booked[0])
    deal = client.create_deal(**args["created"], idempotency_key="created")
    assert deal.deal_id == booked[0]
    assert requests_to(fxpay_sandbox, DEALS) == 2
    # ... and say the second was not: the key is released and the next call sends.
    assert journal.resolve("not-created", result=None).state == "released"
    fresh = client.create_deal(**deal_args(client), idempotency_key="not-created")
    assert requests_to(fxpay_sandbox, DEALS) == 3
    assert fresh.deal_id not in booked
    assert journal.unknown() == []
    # Only an unknown key can be resolved; a key never used is no key.
    with pytest.raises(fxpay.InvalidRequestError):
        journal.resolve("created", result=None)
    with pytest.raises(fxpay.InvalidRequestError):
        journal.resolve("never-used", result="x")


@pytest.mark.parametrize("status", [400, 422, 404])
def test_a_refusal_releases_the_key_for_any_request(fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal, status: int) -> None:
    args = deal_args(client)
    fxpay_sandbox.fail_next(DEALS, status)
    with pytest.raises(fxpay.ApiError) as e:
        client.create_deal(**args, idempotency_key="r")
    assert not isinstance(e.value, fxpay.IdempotencyError)
    assert e.value.status == status
    entry = journal.get("r")
    assert entry is not None
    assert entry.state == "released"
    # Released: the key may now be used, even for another operation.
    qid = client.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="r")
    assert journal.get("r").result == qid  # type: ignore[union-attr]


def test_a_connection_refused_releases_the_key(journal: fxpay.Journal) -> None:
    # Nothing listens there: not a byte can have been sent.
    c = fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", journal=journal, max_retries=0)
    with pytest.raises(fxpay.TransportError) as e:
        c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="nobody")
    assert not isinstance(e.value, fxpay.IdempotencyError)
    assert journal.get("nobody").state == "released"  # type: ignore[union-attr]


async def test_a_cancelled_call_leaves_its_key_unknown(fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal) -> None:
    args = deal_args(client)
    fxpay_sandbox.delay_next(DEALS, 1.0)
    task = asyncio.ensure_future(client.create_deal_async(**args, idempotency_key="cancelled"))
    while requests_to(fxpay_sandbox, DEALS) == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while (e := journal.get("cancelled")) is None or e.state != "unknown":
        assert time.monotonic() < deadline, e
        await asyncio.sleep(0.02)
    with pytest.raises(fxpay.OutcomeUnknownError):
        await client.create_deal_async(**args, idempotency_key="cancelled")


def test_a_keyed_deal_left_in_flight_by_a_thread_that_ended_is_booked_once_and_replays(
    fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal
) -> None:
    # An awaitable deal runs on the process's runtime. The thread that runs the loop stops
    # running it with the deal sent and its answer not yet in, and ends: the call goes on,
    # its key is recorded done when the answer comes, and the loop, run again on another
    # thread, gets the deal. The same key then replays it without sending anything.
    args = deal_args(client)
    loop = asyncio.new_event_loop()
    left: list[asyncio.Future[fxpay.Deal]] = []
    seen: list[BaseException] = []

    async def leave() -> None:
        await client.get_quote_async(args["quote_id"])
        fxpay_sandbox.delay_next(DEALS, 1.0)
        left.append(asyncio.ensure_future(client.create_deal_async(**args, idempotency_key="left")))
        while requests_to(fxpay_sandbox, DEALS) == 0:  # the request is at the sandbox
            await asyncio.sleep(0.01)

    def there() -> None:
        try:
            loop.run_until_complete(asyncio.wait_for(leave(), 20))
        except BaseException as e:  # the assert below shows it
            seen.append(e)

    t = threading.Thread(target=there)
    t.start()
    t.join(60)
    try:
        assert not t.is_alive()
        assert seen == []
        assert not left[0].done()
        deal = loop.run_until_complete(asyncio.wait_for(left[0], 10))
    finally:
        loop.close()
    entry = journal.get("left")
    assert entry is not None
    assert entry.state == "done", entry
    assert client.create_deal(**args, idempotency_key="left").deal_id == deal.deal_id
    assert requests_to(fxpay_sandbox, DEALS) == 1
    assert [d["dealId"] for d in fxpay_sandbox.deals()] == [deal.deal_id]


def test_a_key_used_by_another_account_or_service_is_refused_not_answered_with_its_result(
    fxpay_sandbox: Any, client: fxpay.Client, journal: fxpay.Journal
) -> None:
    # One journal shared by clients of two accounts (tenants of one backend whose keys
    # collide) or of two services (the sandbox and production): the second must not get the
    # first's quote id, or deal, without sending anything. The key is refused, and nothing is
    # sent to either.
    qid = client.create_quote(buy_currency="USD", buy_amount=5, sell_currency="AUD", idempotency_key="inv-1/quote")
    fxpay_sandbox.register_client("tenant-b", "tenant-b-secret")
    with (
        Sandbox() as other,
        other.client(journal=journal) as another_service,
        fxpay.Client("tenant-b", "tenant-b-secret", base_url=fxpay_sandbox.base_url, journal=journal) as another_account,
    ):
        for c in (another_service, another_account):
            with pytest.raises(fxpay.KeyReusedError):
                c.create_quote(buy_currency="USD", buy_amount=5, sell_currency="AUD", idempotency_key="inv-1/quote")
        assert other.stats()["requests"] == 0
    assert requests_to(fxpay_sandbox, QUOTES) == 1
    # The account that made it still gets its own quote back, sending nothing.
    assert client.create_quote(buy_currency="USD", buy_amount=5, sell_currency="AUD", idempotency_key="inv-1/quote") == qid
    assert requests_to(fxpay_sandbox, QUOTES) == 1


def test_a_key_needs_a_journal(fxpay_sandbox: Any) -> None:
    with fxpay_sandbox.client() as c, pytest.raises(fxpay.ConfigurationError, match="journal"):
        c.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key="k")
    assert fxpay_sandbox.stats()["requests"] == 0


def test_wrong_types_and_values(fxpay_sandbox: Any, client: fxpay.Client) -> None:
    with pytest.raises(TypeError, match="idempotency_key"):
        client.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="journal"):
        fxpay_sandbox.client(journal=object())
    for bad in ("", "x" * 256, "a\nb"):
        with pytest.raises(fxpay.InvalidRequestError, match="idempotency_key"):
            client.create_quote(buy_currency="AUD", buy_amount="5", sell_currency="USD", idempotency_key=bad)
    assert fxpay_sandbox.stats()["requests"] == 0


@pytest.mark.parametrize("path", [":memory:", Path(":memory:")])
def test_an_in_memory_sqlite_journal_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str | Path) -> None:
    # SQLite's ":memory:" is one connection's own database, and the journal opens a
    # connection per process: a forked worker would start empty and send a claimed key
    # again. Refused, and no file named ":memory:" is left behind.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(fxpay.ConfigurationError, match="MemoryJournal"):
        fxpay.SqliteJournal(path)
    assert list(tmp_path.iterdir()) == []


def test_a_relative_sqlite_path_is_the_same_file_in_a_child_that_changed_directory(
    fxpay_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The journal's file is opened again in a forked child. A child that changed its working
    # directory (a daemon's chdir, Celery's --workdir) must still open the same file, or it
    # starts with an empty journal and sends a claimed key again.
    first, elsewhere = tmp_path / "first", tmp_path / "elsewhere"
    first.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(first)
    journal = fxpay.SqliteJournal("journal.db")
    assert journal.path == str(first / "journal.db")
    with fxpay_sandbox.client(journal=journal) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=5, sell_currency="AUD", idempotency_key="rel")
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                os.close(read)
                os.chdir(elsewhere)
                again = c.create_quote(buy_currency="USD", buy_amount=5, sell_currency="AUD", idempotency_key="rel")
                os.write(write, again.encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as r:
            answer = r.read().decode()
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer == qid
    assert requests_to(fxpay_sandbox, QUOTES) == 1
    assert list(elsewhere.iterdir()) == []


def test_an_empty_sqlite_path_is_refused() -> None:
    with pytest.raises(fxpay.ConfigurationError, match="empty path"):
        fxpay.SqliteJournal("")


@pytest.mark.parametrize("name", ["j\x00.db", "j\udcff.db"])
def test_a_sqlite_path_sqlite_cannot_open_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(fxpay.ConfigurationError, match="UTF-8 text without NUL"):
        fxpay.SqliteJournal(str(tmp_path) + "/" + name)
    assert list(tmp_path.iterdir()) == []


class _BytesPath:
    """An ``os.PathLike`` whose path is bytes (``os.fspath`` returns them as they are)."""

    def __init__(self, path: bytes) -> None:
        self.path = path

    def __fspath__(self) -> bytes:
        return self.path


@pytest.mark.parametrize("name", [b"j\x00.db", b"j\xff.db"])
def test_a_bytes_path_sqlite_cannot_open_is_refused_as_a_str_one_is(tmp_path: Path, name: bytes) -> None:
    with pytest.raises(fxpay.ConfigurationError, match="UTF-8 text without NUL"):
        fxpay.SqliteJournal(_BytesPath(os.fsencode(tmp_path) + b"/" + name))  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", [123, None, b"j.db"])
def test_a_sqlite_path_of_another_type_is_a_type_error_naming_it(path: object) -> None:
    with pytest.raises(TypeError, match=f"^path must be a str or an os.PathLike, not {type(path).__name__}$"):
        fxpay.SqliteJournal(path)  # type: ignore[arg-type]


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://127.0.0.1:notaport", "nothing"])
def test_a_redis_url_redis_py_cannot_use_is_a_configuration_error(url: str) -> None:
    need("redis")
    from fxpay.seen import RedisSeenSet

    for make, owner in (
        (lambda: fxpay.RedisJournal(url), "RedisJournal"),
        (lambda: fxpay.RedisTokenStore(url=url), "RedisTokenStore"),
        (lambda: RedisSeenSet(url=url), "RedisSeenSet"),
    ):
        with pytest.raises(fxpay.ConfigurationError, match=f"{owner} cannot use the URL"):
            make()


def test_sqlite_journal_is_private_and_durable(tmp_path: Path) -> None:
    j = fxpay.SqliteJournal(tmp_path / "j.db")
    assert stat.S_IMODE(os.stat(tmp_path / "j.db").st_mode) == 0o600
    import sqlite3

    conn = sqlite3.connect(tmp_path / "j.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert j._store.diagnostic("synchronous") == "2"  # FULL: the journal's own connection's
    assert repr(j) == f"SqliteJournal({str(tmp_path / 'j.db')!r})"


def test_a_swap_of_two_keys_is_one_error_in_every_journal(journal: fxpay.Journal) -> None:
    """A swap whose old and new entries are of different keys is a wrong value: the same
    ``fxpay.InvalidRequestError`` (a ``ValueError`` too) from every journal, and nothing
    changes; a wrong type, the same ``TypeError`` naming the parameter."""
    _refuses_what_is_wrong(journal)


def test_the_storage_methods_called_directly_keep_the_protocol(journal: fxpay.Journal) -> None:
    """``claim``, ``get``, ``swap`` and ``find`` called by hand (a journal given to a client
    is called by the core, which may not go through them): a swap of what is stored replaces
    it and answers True, a swap of what is no longer stored changes nothing and answers False."""
    a = pending_entry("direct-a")
    assert journal.claim(a) is None
    stored = journal.get("direct-a")
    assert stored == a
    assert journal.claim(pending_entry("direct-a")) == stored  # taken: the stored entry
    data = json.loads(a.to_json())
    data.update(state="done", result="direct-result", updated_at=1_700_000_001_000)
    done = fxpay.JournalEntry.from_json(json.dumps(data))
    assert journal.swap(stored, done) is True
    assert journal.get("direct-a") == done
    data.update(result="another-result", updated_at=1_700_000_002_000)
    other = fxpay.JournalEntry.from_json(json.dumps(data))
    assert journal.swap(stored, other) is False  # `stored` is no longer what is stored
    assert journal.get("direct-a") == done
    assert journal.find("direct-result") == done
    assert journal.find("another-result") is None
    if isinstance(journal, fxpay.MemoryJournal):
        assert journal.claim(pending_entry("direct-b")) is None
        assert len(journal) == 2
        assert repr(journal) == "MemoryJournal(keys=2)"


@pytest.mark.parametrize("kind", ["redis-client", "postgres-callable"])
def test_a_journal_in_python_refuses_a_wrong_swap_find_or_key_as_every_journal_does(request: pytest.FixtureRequest, kind: str) -> None:
    """The same errors as the journals of the core's (above): a RedisJournal over a redis-py
    client and a PostgresJournal over a callable keep their storage in Python, on the
    journals' one copy of the checks (``fxpay.journals._base``)."""
    journal: fxpay.RedisJournal | fxpay.PostgresJournal
    if kind == "redis-client":
        redis = need("redis")
        server: RedisServer = request.getfixturevalue("redis_server")
        journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix=f"py{time.monotonic_ns()}:")
    else:
        psycopg = need("psycopg")
        conninfo = request.getfixturevalue("postgres_server").conninfo
        journal = fxpay.PostgresJournal(lambda: psycopg.connect(conninfo), table=table_name())
    journal.create()
    assert journal._native_store is None  # its storage is Python's
    journal._before_fork()  # the fork hook: no store of the core to hand its state over
    _refuses_what_is_wrong(journal)


def _refuses_what_is_wrong(journal: Any) -> None:
    """A wrong type is a ``TypeError`` naming the parameter, a wrong value (a swap of two
    keys) an ``fxpay.InvalidRequestError``; nothing changes."""
    assert journal.claim(pending_entry("a")) is None
    assert journal.claim(pending_entry("b")) is None
    a, b = journal.get("a"), journal.get("b")
    assert a is not None
    assert b is not None
    with pytest.raises(fxpay.InvalidRequestError, match=r"\.swap\(\): old and new must have the same key"):
        journal.swap(a, b)
    with pytest.raises(TypeError, match=r"^old must be a fxpay\.JournalEntry, not str$"):
        journal.swap("a", b)
    with pytest.raises(TypeError, match=r"^new must be a fxpay\.JournalEntry, not dict$"):
        journal.swap(a, {"key": "a"})
    with pytest.raises(TypeError, match=r"^result must be a str, not int$"):
        journal.find(5)
    with pytest.raises(TypeError, match=r"^key must be a str, not int$"):
        journal.get(5)
    with pytest.raises(TypeError, match=r"^entry must be a fxpay\.JournalEntry, not str$"):
        journal.claim("a")
    assert (journal.get("a"), journal.get("b")) == (a, b)


@pytest.mark.parametrize(
    ("module", "driver", "place", "said"),
    [("redis", "redis", "app:", "RedisJournal 'app:'"), ("postgres", "psycopg", "app.journal", "PostgresJournal 'app.journal'")],
)
def test_a_result_the_core_could_not_record_is_logged_with_its_resolve_call(
    caplog: pytest.LogCaptureFixture, module: str, driver: str, place: str, said: str
) -> None:
    """What the core's Redis or PostgreSQL store calls when a result waiting for its commit
    finds its key changed otherwise: an ERROR naming the journal's class and place (prefix
    or table), the key, and the ``resolve`` call that settles it."""
    need(driver)
    not_recorded = getattr(importlib.import_module(f"fxpay.journals.{module}"), f"_{module}_not_recorded")
    with caplog.at_level("ERROR", logger="fxpay"):
        not_recorded(place, "k-1", "Q-9")
    [record] = [r for r in caplog.records if "could not be recorded" in r.getMessage()]
    assert record.levelname == "ERROR"
    message = record.getMessage()
    assert message.startswith(f"{said}: the result of key 'k-1' (Q-9)")
    assert "journal.resolve('k-1', result='Q-9')" in message


def test_an_own_journal_hands_the_client_its_store_unless_a_subclass_overrides_a_storage_method(
    journal: fxpay.Journal, request: pytest.FixtureRequest
) -> None:
    """fxpay's own journals hand the client their store of the core, so a keyed call never
    climbs into Python for its claim and swap (issue 56). A subclass that overrides ``get``,
    ``claim``, ``swap`` or ``find`` is called through its methods instead; one that
    overrides none of them still hands the store over. A journal over Python's storage (a
    redis-py client, a connection callable) has no store of the core to hand over."""
    own: Any = journal
    store = own._native_store
    if request.node.callspec.params["journal"] in ("redis client", "postgres callable"):
        assert store is None
        assert own._store is None
        return
    assert store is not None
    assert store is own._store
    cls = type(own)
    for method in (None, "get", "claim", "swap", "find"):

        def through(self: Any, *args: Any, _m: str | None = method) -> Any:
            return getattr(cls, str(_m))(self, *args)

        sub = type(f"Over{method}", (cls,), {} if method is None else {method: through})
        own.__class__ = sub
        try:
            assert (own._native_store is store) is (method is None), method
        finally:
            own.__class__ = cls
    with pytest.raises(TypeError):  # a class keyword nothing takes is refused, as for any class
        type("Keyword", (cls,), {}, unknown=1)

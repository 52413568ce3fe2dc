"""A RedisJournal over a ``redis.Redis`` the user gives (fxpay.journals.redis, on redis-py),
where the URL journal's checks run in Python: a client that decodes its replies, the
persistence warning said once, the missing journal's advice, the pipeline sent in one write
(pymutants survivors of ``journals/redis.py``, issue 55, tests/MUTANTS.md)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay.journals import redis as redis_journal

from conftest import need
from journal_support import QUOTES, RedisServer, held_call, hold_elsewhere, quote, redis_server, requests_to

__all__ = ["redis_server"]  # a fixture, imported for the tests below


def done_calls(
    fxpay_sandbox: Any, url: str, prefix: str, keys: tuple[str, ...] = ("k",)
) -> tuple[fxpay.RedisJournal, dict[str, tuple[fxpay.JournalEntry, dict[str, Any]]]]:
    """A journal over a client of ``url`` under ``prefix`` that made one keyed call per key
    and was closed, and per key its ``done`` entry with the claim (a JSON object) its call
    stored before the result: what a test puts back to make the result wait again."""
    redis = need("redis")
    journal = fxpay.RedisJournal(redis.Redis.from_url(url), prefix=prefix)
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        for key in keys:
            quote(c, key)
    journal.close()
    made = {}
    for key in keys:
        done = journal.get(key)
        assert done is not None
        made[key] = (done, {**json.loads(done.to_json()), "state": "pending", "result": None})
    return journal, made


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_client_that_decodes_its_replies_is_checked_and_used(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture, protocol: int
) -> None:
    """``decode_responses=True``: ROLE and CONFIG answer ``str``, not ``bytes`` (CONFIG a
    list in RESP2, a map in RESP3); the journal's checks read them, and on a Redis with
    ``appendfsync always`` say nothing; its calls claim, record and replay."""
    redis = need("redis")
    client = redis.Redis.from_url(redis_server.url, decode_responses=True, protocol=protocol)
    journal = fxpay.RedisJournal(client, prefix=f"decoded{time.monotonic_ns()}:")
    with caplog.at_level(logging.WARNING, logger="fxpay.journal"):
        assert journal.create() is True
    assert [r.getMessage() for r in caplog.records if r.name == "fxpay.journal"] == []
    before = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c:
        first = quote(c, "k")
        assert quote(c, "k") == first  # replayed from the journal
    entry = journal.get("k")
    assert entry is not None
    assert entry.state == "done"
    assert requests_to(fxpay_sandbox, QUOTES) == before + 1
    hold_elsewhere(journal, "k", 30)  # pending under another machine's holder: an open key
    assert [(e.key, e.state) for e in journal.candidates()] == [("k", "pending")]


def test_a_client_on_an_everysec_redis_warns_once(fxpay_sandbox: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``appendfsync everysec`` is accepted with one warning for the journal, not one per
    connection its pool makes."""
    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    try:
        redis.Redis.from_url(server.url).config_set("appendfsync", "everysec")
        journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="everysec-client:")
        with caplog.at_level(logging.WARNING, logger="fxpay.journal"):
            journal.create()
            with fxpay_sandbox.client(journal=journal) as c:
                for i in range(3):
                    quote(c, f"k{i}")
            # A second connection of the journal's pool is checked too, and says nothing new.
            pool = journal._r.connection_pool
            held = [pool.get_connection(), pool.get_connection()]
            for conn in held:
                pool.release(conn)
        warned = [r.getMessage() for r in caplog.records if r.name == "fxpay.journal"]
        assert len(warned) == 1, warned
        assert "appendfsync everysec" in warned[0]
    finally:
        server.stop()


def test_a_client_on_a_redis_without_the_journal_is_refused_with_the_advice(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """No identity under the prefix: a JournalError that says how a journal is made and
    what to do when one was lost; nothing is sent."""
    redis = need("redis")
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"never-made{time.monotonic_ns()}:")
    before = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.JournalError) as caught:
        quote(c, "k")
    message = str(caught.value)
    assert "found no journal under prefix" in message
    assert "`python -m fxpay journal create URL`" in message
    assert "RedisJournal(url).create()" in message
    assert message.endswith("Nothing was sent.")
    assert requests_to(fxpay_sandbox, QUOTES) == before


class _Sent:
    """A connection class that keeps what it was asked to send (the base `_one_write` wraps)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, bool]] = []

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        self.sent.append((command, check_health))


def test_a_pipeline_goes_out_in_one_write_with_its_health_check() -> None:
    """redis-py packs a pipeline in pieces of about 6 kB: the journal's connections join
    them, so Redis reads (and fsyncs its AOF for) a group commit at once. One piece, or one
    command's bytes, goes as it is; the health check is asked as the caller asks it."""
    one = redis_journal._one_write(_Sent)
    assert one.__name__ == one.__qualname__ == "_Sent"
    assert issubclass(one, _Sent)
    conn = one()
    conn.send_packed_command([b"*1\r\n", b"$4\r\n", b"PING\r\n"])
    conn.send_packed_command([b"only"])
    conn.send_packed_command(b"raw", check_health=False)
    assert conn.sent == [([b"*1\r\n$4\r\nPING\r\n"], True), ([b"only"], True), (b"raw", False)]
    assert redis_journal._one_write(_Sent) is one  # one class per connection class


def test_a_warning_of_the_cores_redis_store_is_logged_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    """The core's Redis store hands its warnings (a Redis that fsyncs every second, one that
    refuses CONFIG) to the ``fxpay.journal`` logger, word for word."""
    with caplog.at_level("WARNING", logger="fxpay.journal"):
        redis_journal._redis_warning("RedisJournal: 100% of this Redis")
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("fxpay.journal", "WARNING", "RedisJournal: 100% of this Redis")
    ]


@pytest.mark.parametrize("given", [42, {}, object(), b"redis://127.0.0.1:6379/0"], ids=["int", "dict", "object", "bytes"])
def test_what_is_neither_a_url_nor_a_redis_client_is_a_type_error(given: Any) -> None:
    """A dict has ``get`` but no ``register_script``: not taken for a client."""
    with pytest.raises(TypeError, match=r"^url_or_client must be a redis URL or a redis\.Redis, not "):
        fxpay.RedisJournal(given)


def test_a_result_waiting_for_its_commit_is_read_by_every_journal_of_its_place_only(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Redis pauses its writes from the moment the call's claim is stored: the result waits
    in this process for its commit. Another ``RedisJournal`` of the same server and prefix
    reads it ``done`` from there; one of another prefix reads nothing under that key."""

    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    admin = redis.Redis.from_url(server.url)
    try:
        journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="here:")
        journal.create()
        elsewhere = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="there:")
        elsewhere.create()
        same = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="here:")
        assert same.get("warm-up") is None  # its checks and identity read before the pause
        with fxpay_sandbox.client(journal=journal) as c:
            quote(c, "warm-up")
            call, got = held_call(fxpay_sandbox, c, "held", lambda: admin.exists("here:k:held"), where="Redis")
            admin.execute_command("CLIENT", "PAUSE", "3000", "WRITE")  # every write now waits
            try:
                call.join(30)
                assert got, "the call did not end"
                stored = journal._entry(admin.get("here:k:held"))
                assert stored is not None
                assert stored.state == "pending"  # not in Redis yet
                for reader in (journal, same):
                    held = reader.get("held")
                    assert held is not None
                    assert (held.state, held.result) == ("done", got[0])
                    many = reader.entries(["held", "warm-up"])["held"]
                    assert (many.state, many.result) == ("done", got[0])
                    assert reader.candidates() == []  # in the open set, yet done here
                    found = reader.find(got[0])  # the result is not indexed in Redis yet
                    assert found is not None
                    assert (found.key, found.state, found.result) == ("held", "done", got[0])
                assert elsewhere.get("held") is None
                assert elsewhere.find(got[0]) is None
            finally:
                admin.execute_command("CLIENT", "UNPAUSE")
        deadline = time.monotonic() + 30
        while True:  # and once Redis takes writes again, the result reaches it
            stored = journal._entry(admin.get("here:k:held"))
            assert stored is not None
            if stored.state == "done":
                break
            assert time.monotonic() < deadline, "the result never reached Redis"
            time.sleep(0.01)
        assert stored.result == got[0]
    finally:
        admin.close()
        server.stop()


def test_results_waiting_for_two_places_are_each_written_to_their_own(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Two journals of one server under two prefixes, each with a call's result waiting for
    its commit at once: each result reaches its own journal's key, none is written (and
    lost) under the other's prefix."""
    redis = need("redis")
    stamp = time.monotonic_ns()
    here = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"here{stamp}:")
    there = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"there{stamp}:")
    here.create()
    there.create()
    admin = redis.Redis.from_url(redis_server.url)
    with caplog.at_level("ERROR", logger="fxpay"):
        with fxpay_sandbox.client(journal=here) as a, fxpay_sandbox.client(journal=there) as b:
            for i in range(5):  # both results wait together (the next commit is 50 ms away)
                quote(a, f"a{i}")
                quote(b, f"b{i}")
        here.close()
        there.close()
    for journal, keys in ((here, [f"a{i}" for i in range(5)]), (there, [f"b{i}" for i in range(5)])):
        for key in keys:
            stored = journal._entry(admin.get(journal._k(key)))
            assert stored is not None, key
            assert stored.state == "done", (journal.prefix, key, stored.state)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    admin.close()


class _StandIn:
    """A client that is not redis-py's ``Redis`` and has no connection pool (a cluster
    client, a wrapper), or one that does not say where it connects: it answers what the
    journal asks through a real client."""

    def __init__(self, real: Any, pool: Any = None) -> None:
        self._real = real
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        if name == "connection_pool":
            if self._pool is None:
                raise AttributeError(name)
            return self._pool
        return getattr(self._real, name)


@pytest.mark.parametrize("pool", [None, object()], ids=["no pool", "a pool without its settings"])
def test_a_client_without_a_connection_pool_is_used_as_it_is(fxpay_sandbox: Any, redis_server: RedisServer, pool: Any) -> None:
    redis = need("redis")
    stand_in = _StandIn(redis.Redis.from_url(redis_server.url), pool)
    journal = fxpay.RedisJournal(stand_in, prefix=f"stand-in{time.monotonic_ns()}:")
    assert journal._r is stand_in  # no pool of the journal's own: the client itself
    assert journal.create() is True
    with fxpay_sandbox.client(journal=journal) as c:
        first = quote(c, "k")
        assert quote(c, "k") == first
    journal.close()
    entry = journal.get("k")
    assert entry is not None
    assert entry.state == "done"


def test_two_clients_without_a_pool_on_two_servers_keep_their_results_apart(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """Two stand-in clients (no pool to say where they connect) of two servers, one prefix:
    each call's result, waiting for its commit beside the other's, reaches its own server."""
    redis = need("redis")
    servers = [RedisServer(tmp_path / "one"), RedisServer(tmp_path / "two")]
    for server in servers:
        server.folder.mkdir()
        server.start()
    try:
        journals = [fxpay.RedisJournal(_StandIn(redis.Redis.from_url(s.url)), prefix="same:") for s in servers]
        for journal in journals:
            journal.create()
        with fxpay_sandbox.client(journal=journals[0]) as a, fxpay_sandbox.client(journal=journals[1]) as b:
            for i in range(5):  # both results wait together (the next commit is 50 ms away)
                quote(a, f"a{i}")
                quote(b, f"b{i}")
        for journal in journals:
            journal.close()
        for server, mine in zip(servers, "ab", strict=True):
            admin = redis.Redis.from_url(server.url)
            for i in range(5):
                raw = admin.get(f"same:k:{mine}{i}")
                stored = journals[0]._entry(raw)
                assert stored is not None, (server.url, mine, i)
                assert stored.state == "done", (server.url, mine, i)
            admin.close()
    finally:
        for server in servers:
            server.stop()


def test_a_fresh_redis_gets_the_scripts_loaded_before_a_pipeline_runs_them(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A Redis that never saw the journal's scripts. A lone claim runs through redis-py's
    ``Script``, which meets ``NOSCRIPT`` once and loads it; a pipeline (the results riding a
    commit) loads both scripts first, so none of its commands is refused and made again."""
    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    try:
        admin = redis.Redis.from_url(server.url)
        journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="fresh:")
        journal.create()
        with fxpay_sandbox.client(journal=journal) as c:
            for i in range(3):
                quote(c, f"k{i}")
        journal.close()
        for i in range(3):
            stored = journal._entry(admin.get(f"fresh:k:k{i}"))
            assert stored is not None
            assert stored.state == "done"
        refused = admin.info("errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0)
        assert refused == 1, "the lone first claim's, and no other"
        admin.close()
    finally:
        server.stop()


def test_the_journals_pool_outliving_its_journal_connects_without_its_checks(redis_server: RedisServer) -> None:
    """The pool the journal made holds it weakly (no cycle): a connection made after the
    journal is gone is connected as redis-py would, not refused."""
    import gc

    redis = need("redis")
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"gone{time.monotonic_ns()}:")
    client = journal._r
    del journal
    gc.collect()
    assert client.ping() is True


def test_a_child_forked_while_a_thread_holds_the_identity_check_lock_does_not_hang(redis_server: RedisServer) -> None:
    """A thread of the parent is inside the journal's identity check at the fork: the child
    has a lock of its own and reads the journal."""
    import threading

    from conftest import fork_quietly, wait_child

    redis = need("redis")
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"forked{time.monotonic_ns()}:")
    journal.create()
    journal._id = None  # read again at the next use, under the lock
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with journal._check_lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        pid = fork_quietly()
        if pid == 0:
            code = 1
            try:
                code = 0 if journal.get("k") is None else 2
            finally:
                os._exit(code)
        assert wait_child(pid) == 0
    finally:
        release.set()
        t.join(10)


def test_a_replica_given_as_a_client_is_refused(redis_server: RedisServer, tmp_path: Path) -> None:
    """``REPLICAOF`` a host that never answers is still a replica (ROLE "slave"): its writes
    are lost at a resync, so the journal refuses it."""
    redis = need("redis")
    replica = RedisServer(tmp_path, extra=("--replica-read-only", "no"))
    replica.start()
    try:
        redis.Redis.from_url(replica.url).execute_command("REPLICAOF", "127.0.0.1", "1")
        journal = fxpay.RedisJournal(redis.Redis.from_url(replica.url), prefix="replica:")
        with pytest.raises(fxpay.JournalError, match=r"it is a replica \(ROLE slave\)"):
            journal.create()
    finally:
        replica.stop()


def test_require_persistence_false_takes_a_redis_without_aof(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """``appendonly no``: refused by default, taken (with no persistence check) when the
    user says ``require_persistence=False``."""
    redis = need("redis")
    server = RedisServer(tmp_path, aof=False)
    server.start()
    try:
        with pytest.raises(fxpay.JournalError, match="appendonly setting is 'no'"):
            fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="no-aof:").create()
        journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="no-aof:", require_persistence=False)
        assert journal.create() is True
        with fxpay_sandbox.client(journal=journal) as c:
            quote(c, "k")
        assert journal.get("k") is not None
    finally:
        server.stop()


def _fork_and_exit() -> None:
    from conftest import fork_quietly, wait_child

    pid = fork_quietly()
    if pid == 0:
        os._exit(0)
    assert wait_child(pid) == 0


def test_a_fork_leaves_the_parents_journals_as_they_were(fxpay_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork hooks make a child's connection pool anew, never the parent's: after three
    forks the parent's journal (over a client, and from a URL) uses the connections it had,
    and no hook failed. (A server of its own: no other test's connection comes or goes.)"""
    redis = need("redis")
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    try:
        hook_errors: list[Any] = []
        monkeypatch.setattr("sys.unraisablehook", hook_errors.append)
        admin = redis.Redis.from_url(redis_server.url)
        stamp = time.monotonic_ns()
        over_client = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"parent{stamp}:")
        from_url = fxpay.RedisJournal(redis_server.url, prefix=f"parent-url{stamp}:")
        for journal in (over_client, from_url):
            journal.create()
        with fxpay_sandbox.client(journal=over_client) as c, fxpay_sandbox.client(journal=from_url) as d:
            quote(c, "before")
            quote(d, "before")
            connected = len(admin.client_list())
            for i in range(3):
                _fork_and_exit()
                quote(c, f"after{i}")
                quote(d, f"after{i}")
            # One more at most (a result written by the flusher while a claim holds the
            # pool's connection); a pool made anew per fork would be three more.
            grown = len(admin.client_list()) - connected
            assert grown < 3, f"{grown} connections more after 3 forks"
        assert hook_errors == []
        admin.close()
    finally:
        redis_server.stop()


def test_a_child_forked_while_a_thread_holds_the_pools_fork_lock_uses_a_pool_of_its_own(redis_server: RedisServer) -> None:
    """redis-py's pool makes itself anew in a child under its ``_fork_lock``, which a thread
    of the parent may hold at the fork (the child would wait 5 s, then fail): the journal's
    child makes a pool of its own instead, at once."""
    import threading

    from conftest import fork_quietly, wait_child

    redis = need("redis")
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"fork-lock{time.monotonic_ns()}:")
    journal.create()
    pool = journal._r.connection_pool
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool._fork_lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        pid = fork_quietly()
        if pid == 0:
            code = 1
            try:
                code = 0 if journal.get("k") is None else 2
            finally:
                os._exit(code)
        assert wait_child(pid) == 0
        assert time.monotonic() - started < 4.0, "the child waited for the inherited pool's lock"
    finally:
        release.set()
        t.join(10)


def test_a_journal_lost_or_made_again_under_a_live_client_is_refused(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """The identity key deleted (a FLUSHALL's effect on it), then a new journal made under the
    prefix: each next call is a JournalError saying which, and nothing is sent."""
    redis = need("redis")
    prefix = f"lost{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix)
    journal.create()
    mine = admin.get(prefix + "journal")
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "before")
        journal.close()
        sent = requests_to(fxpay_sandbox, QUOTES)
        admin.delete(prefix + "journal")
        with pytest.raises(fxpay.JournalError) as gone:
            quote(c, "after-flush")
        assert f"identity key '{prefix}journal' is gone from this Redis" in str(gone.value)
        assert "`python -m fxpay journal create URL`" in str(gone.value)
        assert fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix).create() is True
        other = admin.get(prefix + "journal")
        assert other not in (None, mine)
        with pytest.raises(fxpay.JournalError) as made_again:
            quote(c, "after-remake")
        message = str(made_again.value)
        assert f"now holds another journal under prefix {prefix!r} ({other.decode()})" in message
        assert f"than the one this process opened ({mine.decode()})" in message
        assert message.endswith("Nothing was sent.")
        with pytest.raises(fxpay.JournalError, match="now holds another journal"):
            journal.unknown()
        assert requests_to(fxpay_sandbox, QUOTES) == sent
    admin.close()


def test_an_error_of_redis_that_is_not_the_identitys_is_told_as_it_is(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """A key's slot holding what no journal wrote (a list): the claim's script fails with
    Redis's own error, told as that (fails closed, nothing sent), not as a lost journal."""
    redis = need("redis")
    prefix = f"wrongtype{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix)
    journal.create()
    admin.lpush(prefix + "k:wrong", "not an entry")
    before = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.JournalError) as caught:
        quote(c, "wrong")
    assert "WRONGTYPE" in str(caught.value)
    assert "another journal" not in str(caught.value)
    assert "is gone" not in str(caught.value)
    assert requests_to(fxpay_sandbox, QUOTES) == before
    # A swap's script meets it too: the same.
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "fine")
    fine = journal.get("fine")
    assert fine is not None
    old = json.loads(fine.to_json())
    old["key"] = "wrong"
    new = {**old, "state": "unknown"}
    with pytest.raises(fxpay.JournalError, match="WRONGTYPE"):
        journal.swap(fxpay.JournalEntry.from_json(json.dumps(old)), fxpay.JournalEntry.from_json(json.dumps(new)))
    admin.close()


def test_create_never_replaces_a_journal_and_a_journal_remade_meanwhile_is_refused(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """``create()`` where the journal is: False, its identity kept. A journal object that
    made (or read) one identity refuses another made meanwhile, at its next ``create()``
    and at its next call: it never adopts it."""
    redis = need("redis")
    prefix = f"remade{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix)
    assert journal.create() is True
    mine = admin.get(prefix + "journal")
    assert fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix).create() is False
    assert journal.create() is False
    assert admin.get(prefix + "journal") == mine
    admin.delete(prefix + "journal")
    assert fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix).create() is True
    with pytest.raises(fxpay.JournalError, match="now holds another journal"):
        journal.create()
    before = requests_to(fxpay_sandbox, QUOTES)
    with fxpay_sandbox.client(journal=journal) as c, pytest.raises(fxpay.JournalError, match="now holds another journal"):
        quote(c, "k")
    assert requests_to(fxpay_sandbox, QUOTES) == before
    admin.close()


class _Vanishing(_StandIn):
    """A client under which the identity key is gone as soon as it is made (another client
    deleting it between the ``SET NX`` and the ``GET``)."""

    def get(self, name: str) -> Any:
        return None if name.endswith(":journal") else self._real.get(name)


def test_an_identity_gone_as_it_was_made_is_an_error(redis_server: RedisServer) -> None:
    redis = need("redis")
    journal = fxpay.RedisJournal(_Vanishing(redis.Redis.from_url(redis_server.url)), prefix=f"vanish{time.monotonic_ns()}:")
    with pytest.raises(fxpay.JournalError, match=r"the identity key '.*journal' vanished as it was made"):
        journal.create()


def test_a_swap_runs_its_script_and_tells_a_lost_journal(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """A swap that is not a call's own result (another holder's claim written over an
    entry) runs at once and says whether it swapped; on a journal whose identity is gone
    it is a JournalError saying so."""
    redis = need("redis")
    prefix = f"swap{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix)
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        quote(c, "k")
    journal.close()
    hold_elsewhere(journal, "k", 30)  # asserts the swap said True
    held = journal.get("k")
    assert held is not None
    assert (held.state, held.holder) == ("pending", "another-host~boot/4242/tok")
    admin.delete(prefix + "journal")
    data = json.loads(held.to_json())
    data.update(state="unknown")
    with pytest.raises(fxpay.JournalError, match="is gone from this Redis"):
        journal.swap(held, fxpay.JournalEntry.from_json(json.dumps(data)))
    admin.close()


@pytest.mark.parametrize("given", ["url", "client"])
def test_entries_reads_many_keys_at_once(fxpay_sandbox: Any, redis_server: RedisServer, given: str) -> None:
    """``entries(keys)``: the entries of the keys that have one (over 1,000 keys: more than
    one read), a key with a wrong type refused first; on a journal whose identity is gone, a
    JournalError, never an empty answer."""
    redis = need("redis")
    prefix = f"entries-{given}{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal = fxpay.RedisJournal(redis_server.url if given == "url" else redis.Redis.from_url(redis_server.url), prefix=prefix)
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        results = {k: quote(c, k) for k in ("a", "b")}
    journal.close()
    keys = [f"none{i}" for i in range(1200)] + ["a", "none-x", "b"]
    got = journal.entries(iter(keys))
    assert sorted(got) == ["a", "b"]
    assert {k: (e.key, e.state, e.result) for k, e in got.items()} == {k: (k, "done", r) for k, r in results.items()}
    assert journal.entries([]) == {}
    with pytest.raises(TypeError):
        journal.entries(["a", 7])  # type: ignore[list-item]
    admin.delete(prefix + "journal")
    with pytest.raises(fxpay.JournalError, match=r"is gone|found no journal"):
        journal.entries(["a"])
    admin.close()


def test_a_journal_never_made_is_refused_by_a_read(redis_server: RedisServer) -> None:
    """Reading a key where no journal was made is a JournalError, not "no entry"."""
    redis = need("redis")
    journal = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=f"unmade{time.monotonic_ns()}:")
    with pytest.raises(fxpay.JournalError, match="found no journal under prefix"):
        journal.get("k")
    with pytest.raises(fxpay.JournalError, match="found no journal under prefix"):
        journal.find("a-result")


@pytest.mark.parametrize("given", ["url", "client"])
def test_find_reads_a_result_back_to_its_key_and_a_swap_may_drop_the_result(
    fxpay_sandbox: Any, redis_server: RedisServer, given: str
) -> None:
    """A call's result is indexed as it is written (``find`` reads it back to its key); a
    swap to an entry without a result (a person's undo of a call) is written, and ``find``
    no longer gives that key for the result."""
    redis = need("redis")
    given_as = redis_server.url if given == "url" else redis.Redis.from_url(redis_server.url)
    journal = fxpay.RedisJournal(given_as, prefix=f"find-{given}{time.monotonic_ns()}:")
    journal.create()
    with fxpay_sandbox.client(journal=journal) as c:
        result = quote(c, "k")
    journal.close()
    assert journal.find("Q-never-given") is None  # a result no call gave: not indexed
    found = journal.find(result)
    assert found is not None
    assert (found.key, found.result) == ("k", result)
    data = json.loads(found.to_json())
    data.update(state="unknown", result=None)
    assert journal.swap(found, fxpay.JournalEntry.from_json(json.dumps(data))) is True
    now = journal.get("k")
    assert now is not None
    assert (now.state, now.result) == ("unknown", None)
    assert journal.find(result) is None
    # A key of the open set without an entry (deleted by hand) is no candidate, nor an error.
    admin = redis.Redis.from_url(redis_server.url)
    admin.sadd(journal.prefix + "open", "deleted")
    admin.close()
    assert [e.key for e in journal.unknown()] == ["k"]
    assert repr(journal) == f"RedisJournal(prefix={journal.prefix!r})"


def test_a_pipeline_loads_the_scripts_once_and_again_after_redis_lost_them(tmp_path: Path) -> None:
    """A pipeline runs the scripts by their SHA, loaded first, once (two ``SCRIPT LOAD``,
    not two per pipeline); after Redis lost them (``SCRIPT FLUSH``, a restart) a pipeline
    that met ``NOSCRIPT`` has the next one load them again."""
    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    try:
        admin = redis.Redis.from_url(server.url)
        journal = fxpay.RedisJournal(redis.Redis.from_url(server.url), prefix="piped:")
        journal.create()
        ident = journal._identity()

        def swap_nothing(pipe: Any) -> None:  # a swap of a key that is not there: 0
            pipe.evalsha(journal._swap.sha, 4, "piped:k:none", "piped:open", "", "piped:journal", "{}", "{}", "none", "done", ident)

        def loads() -> int:
            calls: int = admin.info("commandstats").get("cmdstat_script|load", {}).get("calls", 0)
            return calls

        errors = redis.exceptions.NoScriptError
        for _ in range(3):
            assert not any(isinstance(r, errors) for r in journal._piped(swap_nothing))
        assert loads() == 2
        admin.script_flush()
        assert any(isinstance(r, errors) for r in journal._piped(swap_nothing)), "Redis lost them"
        assert not any(isinstance(r, errors) for r in journal._piped(swap_nothing)), "loaded again"
        assert loads() == 4
        # Commands of their own, not a transaction: no MULTI and EXEC around them (two more
        # commands a commit, and a command refused as queued would abort the claims beside it).
        assert "cmdstat_multi" not in admin.info("commandstats")
        admin.close()
    finally:
        server.stop()


def test_a_results_commit_that_found_its_key_changed(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The replies of a commit's result swaps (``_results_answered``), each case on a real
    key: an error reply keeps every result waiting; a key that still holds the call's claim
    (its swap refused as the text differed) gets the result written over it; a key holding
    the result already needs nothing; a key another holder claimed meanwhile keeps that
    claim, and the result is logged with its ``resolve`` call."""
    redis = need("redis")
    prefix = f"answered{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal, made = done_calls(fxpay_sandbox, redis_server.url, prefix, ("over", "same", "settled", "taken", "error"))

    def case(key: str, stored: dict[str, Any] | None) -> tuple[str, str, fxpay.JournalEntry, str]:
        done, claim = made[key]
        if stored is not None:
            admin.set(prefix + "k:" + key, json.dumps(stored))
        return (key, json.dumps(claim), done, done.to_json())

    over = case("over", {**made["over"][1], "lease_until": 1})
    same = case("same", None)
    # The key settled first by its spot deal's notification: the same result and claim, with
    # the deal's id: nothing to write, nothing to log.
    settled = case("settled", {**json.loads(made["settled"][0].to_json()), "deal_id": "D-1"})
    taken = case("taken", {**made["taken"][1], "holder": "another-host~boot/1/t"})
    error = case("error", None)

    journal._later.defer(*error)
    journal._results_answered(journal._later.taken(), [Exception("refused")])
    assert "error" in journal._later.results, "an error keeps them waiting"
    journal._later.landed(journal._later.taken())

    with caplog.at_level("ERROR", logger="fxpay"):
        journal._results_answered([over, same, settled, taken], [0, 0, 0, 0])
    got = {k: journal._entry(admin.get(prefix + "k:" + k)) for k in ("over", "same", "settled", "taken")}
    assert got["settled"] is not None
    assert got["settled"].deal_id == "D-1"
    assert got["over"] is not None
    assert (got["over"].state, got["over"].result) == ("done", over[2].result), "written over its own claim"
    assert got["same"] is not None
    assert got["same"].to_json() == same[3]
    assert got["taken"] is not None
    assert (got["taken"].state, got["taken"].holder) == ("pending", "another-host~boot/1/t")
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1
    assert f"the result of key 'taken' ({taken[2].result}) could not be recorded" in logged[0]
    admin.close()


def quiet_result(fxpay_sandbox: Any, url: str, prefix: str) -> tuple[Any, fxpay.RedisJournal, fxpay.JournalEntry, dict[str, Any]]:
    """An admin client of ``url``; a journal under ``prefix`` that made no call (so no turn of
    the flusher is due for it) with its scripts loaded, as after its first commit; and a
    ``done`` entry of key ``k`` with its claim, the claim already stored at ``{prefix}k:k`` as
    if the result had not been written: what a test defers to make the result wait."""
    redis = need("redis")
    admin = redis.Redis.from_url(url)
    _, made = done_calls(fxpay_sandbox, url, "made:")
    done, claim = made["k"]
    quiet = fxpay.RedisJournal(redis.Redis.from_url(url), prefix=prefix)
    quiet.create()
    quiet._piped(lambda pipe: None)
    admin.set(f"{prefix}k:k", json.dumps(claim))
    return admin, quiet, done, claim


def wait_written(admin: Any, journal: fxpay.RedisJournal, key: str) -> fxpay.JournalEntry:
    """The entry at ``key`` once its result is written (state ``done``); fails after 10 s."""
    deadline = time.monotonic() + 10
    while (stored := journal._entry(admin.get(key))) is None or stored.state != "done":
        assert time.monotonic() < deadline, f"the result at {key} was not written"
        time.sleep(0.01)
    return stored


def test_a_result_whose_write_failed_is_written_again_by_the_flusher(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A result's write meets ``NOSCRIPT`` (Redis lost its scripts): it waits again, and the
    flusher writes it a moment later, with no other call to carry it. (The result is put
    in a journal that made no call, so no turn of the flusher is due for it before.)"""
    server = RedisServer(tmp_path)
    server.start()
    try:
        admin, quiet, done, claim = quiet_result(fxpay_sandbox, server.url, "again:")
        assert quiet._later.defer("k", json.dumps(claim), done, done.to_json())
        admin.script_flush()
        refused = admin.info("errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0)
        quiet._flush_results()  # meets NOSCRIPT; the flusher is woken to try again
        assert admin.info("errorstats")["errorstat_NOSCRIPT"]["count"] == refused + 1
        assert wait_written(admin, quiet, "again:k:k").to_json() == done.to_json()
        admin.close()
    finally:
        server.stop()


def test_the_flusher_tries_a_refused_result_again_at_its_pace(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """While Redis refuses writes (``NOREPLICAS``: too few replicas for
    ``min-replicas-to-write``), a result waiting is tried again once per ``RETRY_DELAY``
    (0.5 s), not at every turn of the flusher (50 ms); once Redis takes writes, it is written."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        admin, quiet, done, claim = quiet_result(fxpay_sandbox, server.url, "paced:")

        def refused() -> int:
            return int(admin.info("errorstats").get("errorstat_NOREPLICAS", {}).get("count", 0))

        admin.config_set("min-replicas-to-write", 1)
        try:
            assert quiet._later.defer("k", json.dumps(claim), done, done.to_json())
            quiet._flush_results()  # refused; the flusher tries again after RETRY_DELAY
            start, began = refused(), time.monotonic()
            assert start >= 1
            time.sleep(1.2)
            tries = refused() - start
            took = time.monotonic() - began
            assert tries <= took / 0.5 + 1, f"{tries} tries in {took:.2f} s"
        finally:
            admin.config_set("min-replicas-to-write", 0)
        assert wait_written(admin, quiet, "paced:k:k").state == "done"
        admin.close()
    finally:
        server.stop()


def test_a_journal_whose_results_are_refused_holds_up_no_other_journals_results(
    fxpay_sandbox: Any, tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One flusher thread writes every journal's waiting results. A journal whose server
    refuses them is tried again after ``RETRY_DELAY`` (made 30 s here) without the flusher
    waiting for it: another journal's result is written at its own pace meanwhile."""
    from fxpay import _later

    monkeypatch.setattr(_later, "RETRY_DELAY", 30.0)
    refusing = RedisServer(tmp_path)
    refusing.start()
    try:
        admin, stuck, done, claim = quiet_result(fxpay_sandbox, refusing.url, "stuck:")
        admin.config_set("min-replicas-to-write", 1)
        assert stuck._later.defer("k", json.dumps(claim), done, done.to_json())
        _later._Later.wake(stuck)  # the flusher's turn: refused, tried again in 30 s
        deadline = time.monotonic() + 10
        while (tries := int(admin.info("errorstats").get("errorstat_NOREPLICAS", {}).get("count", 0))) == 0:
            assert time.monotonic() < deadline, "the flusher did not try the results"
            time.sleep(0.01)
        other_admin, other, other_done, other_claim = quiet_result(fxpay_sandbox, redis_server.url, "other:")
        assert other._later.defer("k", json.dumps(other_claim), other_done, other_done.to_json())
        _later._Later.wake(other)  # as a keyed call's result does
        began = time.monotonic()
        assert wait_written(other_admin, other, "other:k:k").to_json() == other_done.to_json()
        assert time.monotonic() - began < 10
        assert int(admin.info("errorstats")["errorstat_NOREPLICAS"]["count"]) == tries  # not tried again yet
        admin.config_set("min-replicas-to-write", 0)
        stuck._flush_results()  # written by hand: its turn is 30 s away
        assert wait_written(admin, stuck, "stuck:k:k").to_json() == done.to_json()
        admin.close()
        other_admin.close()
    finally:
        refusing.stop()


def test_a_swap_of_another_key_leaves_a_waiting_result_for_its_commit(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """A swap written at once (a person's ``resolve``, not a call's result) writes first only
    a result of its own key that waits; another key's result keeps waiting for the next
    commit (one durable write per call, issue 56), then is written."""
    redis = need("redis")
    prefix = f"tidy{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    _, made = done_calls(fxpay_sandbox, redis_server.url, prefix + "made:")
    done, claim = made["k"]
    quiet = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix)
    quiet.create()
    admin.set(prefix + "k:k", json.dumps(claim))
    other = fxpay.JournalEntry.from_json(json.dumps({**json.loads(done.to_json()), "key": "other"}))
    admin.set(prefix + "k:other", other.to_json())
    assert quiet._later.defer("k", json.dumps(claim), done, done.to_json())  # no flusher turn due
    undone = fxpay.JournalEntry.from_json(json.dumps({**json.loads(other.to_json()), "state": "unknown", "result": None}))
    assert quiet.swap(other, undone) is True
    stored = quiet._entry(admin.get(prefix + "k:other"))
    assert stored is not None
    assert stored.state == "unknown"
    assert quiet._later.get("k") is not None, "another key's result was written with the swap"
    assert json.loads(admin.get(prefix + "k:k")) == claim
    quiet._flush_results()
    written = quiet._entry(admin.get(prefix + "k:k"))
    assert written is not None
    assert written.to_json() == done.to_json()
    admin.close()


def test_find_of_a_waiting_result_gives_no_key_that_now_holds_another(fxpay_sandbox: Any, redis_server: RedisServer) -> None:
    """A result waits in this process for its commit, and meanwhile the key was settled in
    Redis with another result (a person's ``resolve``): ``find`` of the waiting result gives
    no entry, since the key reads the other result; ``find`` of that one gives the key."""
    redis = need("redis")
    prefix = f"ahead{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    _, made = done_calls(fxpay_sandbox, redis_server.url, prefix + "made:")
    done, claim = made["k"]
    quiet = fxpay.RedisJournal(redis.Redis.from_url(redis_server.url), prefix=prefix)
    quiet.create()
    assert quiet._later.defer("k", json.dumps(claim), done, done.to_json())  # no flusher turn due
    try:
        settled = {**json.loads(done.to_json()), "result": "Q-resolved-by-hand"}
        admin.set(prefix + "k:k", json.dumps(settled))
        admin.set(prefix + "r:Q-resolved-by-hand", "k")
        now = quiet.get("k")
        assert now is not None
        assert now.result == "Q-resolved-by-hand"  # the store is ahead of the result waiting
        assert quiet.find(done.result) is None
        found = quiet.find("Q-resolved-by-hand")
        assert found is not None
        assert found.key == "k"
    finally:
        quiet._later.landed(quiet._later.taken())
        admin.close()


@pytest.mark.parametrize("given", ["url", "client"])
def test_close_writes_the_results_waiting_before_os_exit(fxpay_sandbox: Any, redis_server: RedisServer, given: str) -> None:
    """A forked worker that ends with ``os._exit`` (no exit hooks) calls ``close()`` first:
    its call's result, waiting for the next commit, is in Redis when it is gone."""
    from conftest import fork_quietly, wait_child

    redis = need("redis")
    prefix = f"closed-{given}{time.monotonic_ns()}:"
    journal = fxpay.RedisJournal(redis_server.url if given == "url" else redis.Redis.from_url(redis_server.url), prefix=prefix)
    journal.create()
    pid = fork_quietly()
    if pid == 0:
        code = 1
        try:
            with fxpay_sandbox.client(journal=journal) as c:
                quote(c, "k")
            journal.close()
            code = 0
        finally:
            os._exit(code)
    assert wait_child(pid) == 0
    admin = redis.Redis.from_url(redis_server.url)
    stored = fxpay.JournalEntry.from_json(admin.get(prefix + "k:k").decode())
    admin.close()
    assert stored is not None
    assert stored.state == "done"


def test_a_claim_in_a_commit_that_met_noscript_is_made_after_loading_it(fxpay_sandbox: Any, tmp_path: Path) -> None:
    """A claim riding a commit with a waiting result (a pipeline) meets ``NOSCRIPT`` (Redis
    lost its scripts): the claim is made again through the script, loaded, not refused."""
    redis = need("redis")
    server = RedisServer(tmp_path)
    server.start()
    try:
        admin = redis.Redis.from_url(server.url)
        journal, made = done_calls(fxpay_sandbox, server.url, "noscript:")
        done, claim = made["k"]
        admin.set("noscript:k:k", json.dumps(claim))
        assert journal._later.defer("k", json.dumps(claim), done, done.to_json())  # rides the claim below
        admin.script_flush()
        held = {**claim, "key": "held", "holder": "another-host~boot/1/t"}
        admin.set("noscript:k:held", json.dumps(held))
        mine = fxpay.JournalEntry.from_json(json.dumps({**claim, "key": "held"}))
        got = journal.claim(mine)  # the key's entry as it stands: another holder's claim
        assert got is not None
        assert (got.key, got.state, got.holder) == ("held", "pending", "another-host~boot/1/t")
        assert json.loads(admin.get("noscript:k:held")) == held
        admin.close()
    finally:
        server.stop()


def test_results_riding_a_claims_commit_are_answered(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A result waiting rides the next claim's commit (one pipeline): its reply is read
    like any result's, so one whose key another holder claimed meanwhile is logged with its
    ``resolve`` call, and it no longer waits."""
    redis = need("redis")
    prefix = f"ride{time.monotonic_ns()}:"
    admin = redis.Redis.from_url(redis_server.url)
    journal, made = done_calls(fxpay_sandbox, redis_server.url, prefix)
    done, claim = made["k"]
    admin.set(prefix + "k:k", json.dumps({**claim, "holder": "another-host~boot/1/t"}))
    assert journal._later.defer("k", json.dumps(claim), done, done.to_json())
    with caplog.at_level("ERROR", logger="fxpay"):
        assert journal.claim(fxpay.JournalEntry.from_json(json.dumps({**claim, "key": "next"}))) is None
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1
    assert f"the result of key 'k' ({done.result}) could not be recorded" in logged[0]
    assert journal._later.get("k") is None, "answered: no longer waiting"
    admin.close()

"""``RateLimit(redis=)``'s bucket in Redis (``fxpay._rate_limit.RedisBucket``, issue 55's
mutation run): one connection pool per process, a pool of its own in a forked child even
when a thread of the parent held the inherited pool's lock at the fork, and the child's
turns taken from the shared bucket (not from its own, as when Redis fails). A real
redis-server; the sandbox over loopback."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import pytest

import fxpay
import fxpay.testing

from conftest import need
from journal_support import RedisServer, redis_server

__all__ = ["redis_server"]

WAIT = 30.0  # what the child is given before the test fails: reached only by a wrong code


def _connections(stats: Any) -> int:
    """Connections Redis accepted so far (``stats`` stays connected: it adds none)."""
    return int(stats.info("stats")["total_connections_received"])


def test_the_bucket_keeps_one_connection_in_a_process(redis_server: RedisServer) -> None:
    """Ten turns of one process through a redis-py client it gave: one connection, kept
    (not a new connection pool for each turn)."""
    redis = need("redis")
    stats = redis.Redis.from_url(redis_server.url)
    client = redis.Redis.from_url(redis_server.url)
    rl = fxpay.RateLimit(1000, redis=client, name=f"one-pool-{time.monotonic_ns()}")
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        before = _connections(stats)
        for _ in range(10):
            c.get_quote(qid)
        assert _connections(stats) - before <= 1


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("kept", [True, False], ids=["client-kept", "client-only-the-buckets"])
def test_a_child_forked_while_a_thread_holds_the_pools_lock_takes_its_turns_through_redis(kept: bool, redis_server: RedisServer) -> None:
    """A thread of the parent holds the lock of the bucket's connection pool at the fork
    (as one does while it takes a connection). The child's turns go through Redis all the
    same, on a pool of its own: redis-py's own reset of the inherited pool would wait for
    that lock for ever. The child checks that its turns were Redis's (no "Redis failed"
    fallback to its own bucket, which would pace it all the same) and that it opened one
    connection for them, not one per turn. ``client-only-the-buckets``: the bucket holds the
    only reference to its client, as with ``redis=URL``; the child keeps the inherited
    client alive, unused (freed, redis-py's ``Redis.__del__`` would close its pool, and
    so reset it and wait for that lock)."""
    redis = need("redis")
    stats = redis.Redis.from_url(redis_server.url)
    client = redis.Redis.from_url(redis_server.url)
    pool = client.connection_pool
    rl = fxpay.RateLimit(1000, redis=client, name=f"fork-lock-{time.monotonic_ns()}")
    if not kept:
        del client
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")  # the pool made
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with pool._lock:
                held.set()
                release.wait(WAIT)

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        assert held.wait(WAIT)
        before = _connections(stats)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                records = _Records()
                logging.getLogger("fxpay").addHandler(records)
                for _ in range(5):
                    c.get_quote(qid)
                failed = [m for m in records.messages if "Redis failed" in m]
                code = 2 if failed else 0
            finally:
                os._exit(code)
        release.set()
        holder.join(WAIT)
        deadline = time.monotonic() + WAIT
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the child hung on the lock of its parent's connection pool")
            time.sleep(0.05)
        code = os.waitstatus_to_exitcode(status)
        assert code != 2, "the child's turns fell back to its own bucket: Redis failed in the child"
        assert code == 0
        assert _connections(stats) - before <= 1, "the child opened a connection for each turn"


class _Wrapper:
    """A client that is not redis-py's own (a wrapper, as an instrumented client): its
    ``connection_pool`` cannot be made anew (no ``connection_kwargs``)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.connection_pool = object()

    def register_script(self, script: str) -> Any:
        return self._real.register_script(script)


def test_a_client_whose_pool_cannot_be_made_anew_is_kept_in_a_forked_child(redis_server: RedisServer) -> None:
    """The child goes on with such a client as it is (its own library's fork handling is
    its own): its turns go through Redis, no "Redis failed" fallback."""
    redis = need("redis")
    rl = fxpay.RateLimit(1000, redis=_Wrapper(redis.Redis.from_url(redis_server.url)), name=f"wrapped-{time.monotonic_ns()}")
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                records = _Records()
                logging.getLogger("fxpay").addHandler(records)
                for _ in range(3):
                    c.get_quote(qid)
                code = 2 if [m for m in records.messages if "Redis failed" in m] else 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        assert code != 2, "the child's turns fell back to its own bucket: the wrapped client was not kept"
        assert code == 0


def test_an_object_with_half_of_a_clients_methods_is_a_type_error() -> None:
    """A client needs both ``register_script`` and ``connection_pool`` (redis-py's)."""

    class OnlyScripts:
        def register_script(self, script: str) -> Any:
            raise AssertionError("never called")

    class OnlyPool:
        connection_pool = object()

    for half in (OnlyScripts(), OnlyPool()):
        with pytest.raises(TypeError, match="redis must be a redis URL"):
            fxpay.RateLimit(1, redis=half)


def test_the_buckets_repr_shows_its_key_and_never_the_url() -> None:
    """The URL may hold a password: the bucket's repr (in a debugger, a log of its owner)
    shows the key only. No connection is made."""
    need("redis")
    from fxpay._rate_limit import RedisBucket

    bucket = RedisBucket("redis://:hunter2@127.0.0.1:1/0", 40, None)
    assert repr(bucket) == "RedisBucket(key='fxpay:ratelimit:40')"
    assert repr(RedisBucket("redis://127.0.0.1:1/0", 40, "payouts")) == "RedisBucket(key='fxpay:ratelimit:payouts')"

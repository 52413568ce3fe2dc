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


def test_a_child_forked_while_a_thread_holds_the_pools_lock_takes_its_turns_through_redis(redis_server: RedisServer) -> None:
    """A thread of the parent holds the lock of the bucket's connection pool at the fork
    (as one does while it takes a connection). The child's turns go through Redis all the
    same, on a pool of its own: redis-py's own reset of the inherited pool would wait for
    that lock for ever. The child checks that its turns were Redis's (no "Redis failed"
    fallback to its own bucket, which would pace it all the same) and that it opened one
    connection for them, not one per turn."""
    redis = need("redis")
    stats = redis.Redis.from_url(redis_server.url)
    client = redis.Redis.from_url(redis_server.url)
    rl = fxpay.RateLimit(1000, redis=client, name=f"fork-lock-{time.monotonic_ns()}")
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")  # the pool made
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with client.connection_pool._lock:
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

"""Pacing (issue 44): the sandbox's opt-in rate limit answers 429 with Retry-After; pay_out
waits 429s out and never makes a row refused; fxpay.RateLimit caps every request of the
clients given it (retries and token requests included), in one process or, with redis=,
across processes. Real sandbox over loopback, real redis-server."""

from __future__ import annotations

import collections
import logging
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay
import fxpay.testing

from conftest import make_beneficiary, need
from journal_support import RedisServer, redis_server

__all__ = ["redis_server"]

QUOTE = "/v1/payments/quotes/*"


def rows(bid: str, n: int, prefix: str) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield {
            "key": f"{prefix}{i}",
            "buy_currency": "USD",
            "buy_amount": "10",
            "sell_currency": "AUD",
            "beneficiary_id": bid,
            "pay_reason": "invoice",
            "pay_reference": f"{prefix.upper()}-{i}",
        }


def counted_seconds(sb: Any) -> list[tuple[int, int, int]]:
    return [(s["second"], s["requests"], s["rate_limited"]) for s in sb.stats()["per_second"]]


# -- the sandbox's rate limit ----------------------------------------------------------------


def test_the_sandbox_answers_429_with_retry_after_beyond_its_limit() -> None:
    with fxpay.testing.Sandbox(rate_limit=50) as sb, sb.client(max_retries=0) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")

        def until_refused() -> None:
            for _ in range(200):
                c.get_quote(qid)

        with pytest.raises(fxpay.RateLimitError) as info:
            until_refused()
        err = info.value
        assert err.status == 429
        assert err.retry_after == 1
        assert err.headers["Retry-After"] == "1"
        assert [(e.error_code, e.field_name) for e in err.errors] == [("rate:limit:4290", "")]
        assert "50 requests per second" in str(err)
        stats = sb.stats()
        assert stats["rate_limited"] == 1
        assert stats["rate_limit"] == 50
        # The admin API is never limited, however fast it is called.
        for _ in range(100):
            sb.stats()
        assert sb.stats()["rate_limited"] == 1


def test_the_sandbox_limit_is_checked() -> None:
    for bad in ("50", True, [50]):
        with pytest.raises(TypeError, match="rate_limit"):
            fxpay.testing.Sandbox(rate_limit=bad)  # type: ignore[arg-type]
    for value in (0, -1, math.nan, math.inf, 10**400):
        with pytest.raises(fxpay.ConfigurationError, match="rate_limit"):
            fxpay.testing.Sandbox(rate_limit=value)


def test_the_command_line_takes_a_rate_limit(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fxpay.sandbox", "--port", "0", "--rate-limit", "0.5"], stdout=subprocess.PIPE, text=True
    )
    try:
        env: dict[str, str] = {}
        assert proc.stdout is not None
        while "FXPAY_ADMIN_TOKEN" not in env:
            line = proc.stdout.readline()
            assert line, "the sandbox ended before it printed its settings"
            name, _, value = line.strip().partition("=")
            env[name] = value
        remote = fxpay.testing.RemoteSandbox(
            env["FXPAY_BASE_URL"],
            client_id=env["FXPAY_CLIENT_ID"],
            client_secret=env["FXPAY_CLIENT_SECRET"],
            admin_token=env["FXPAY_ADMIN_TOKEN"],
        )
        with remote.client(max_retries=0) as c:
            # A bucket of 1 refilled every 2 s: the token request takes it, the quote is refused.
            with pytest.raises(fxpay.RateLimitError) as info:
                c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
            assert info.value.retry_after == 2
        assert remote.stats()["rate_limited"] == 1
    finally:
        proc.terminate()
        proc.wait(10)


def test_pay_out_under_the_sandbox_limit_waits_429s_out_and_refuses_no_row(tmp_path: Path) -> None:
    """300 rows against a sandbox limited to 50 requests/s, with no max_rate: the sandbox
    answers 429 again and again, and every row is still booked, each once."""
    with fxpay.testing.Sandbox(rate_limit=50) as sb, sb.client(journal=fxpay.SqliteJournal(tmp_path / "j.db")) as c:
        bid = c.create_beneficiary(make_beneficiary())
        started = time.monotonic()
        out = c.pay_out(list(rows(bid, 300, "p")), funding_source="Own account", progress=False, max_rate=None)
        took = time.monotonic() - started
        statuses = collections.Counter(r["status"] for r in out)
        stats = sb.stats()
        print(f"\n300 rows under a 50/s sandbox limit: {took:.1f} s, {stats['rate_limited']} answers 429, {dict(statuses)}")
        assert stats["rate_limited"] > 0, "the limit was never reached: this test tests nothing"
        assert statuses == {"booked": 300}, [r for r in out if r["status"] != "booked"][:3]
        refs = collections.Counter(b["payReference"] for d in sb.deals() for b in d["beneficiaries"])
        assert refs == {f"P-{i}": 1 for i in range(300)}


# -- fxpay.RateLimit in one process -----------------------------------------------------------


def calls(c: fxpay.Client, qid: str, n: int) -> None:
    for _ in range(n):
        c.get_quote(qid)


def test_a_rate_limit_spaces_a_clients_requests() -> None:
    """RateLimit(20): requests 50 ms apart, so 21 calls take at least 1 s, and the sandbox
    limited to 20/s (a bucket of 20) refuses none of them."""
    rl = fxpay.RateLimit(20)
    assert rl.per_second == 20
    assert rl.key is None
    assert repr(rl) == "RateLimit(per_second=20)"
    with fxpay.testing.Sandbox(rate_limit=20) as sb, sb.client(rate_limit=rl) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        started = time.monotonic()
        calls(c, qid, 21)
        took = time.monotonic() - started
        assert took >= 1.0, took
        # 41 more, from 4 threads at once: the same spacing.
        started = time.monotonic()
        threads = [threading.Thread(target=calls, args=(c, qid, n)) for n in (11, 10, 10, 10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        assert took >= 2.0, took
        assert sb.stats()["rate_limited"] == 0


def test_clients_given_one_rate_limit_share_its_bucket() -> None:
    """Two clients (and a with_options one) given the same RateLimit(20) share it: 40 calls
    between them take at least 1.95 s. A bucket per client would take half that."""
    rl = fxpay.RateLimit(20)
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as a, sb.client(rate_limit=rl) as b:
        qid = a.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        calls(b, qid, 1)  # b's token, before the clock starts
        started = time.monotonic()
        threads = [threading.Thread(target=calls, args=(x, qid, 20)) for x in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        assert took >= 1.95, took
        started = time.monotonic()
        calls(a.with_options(timeout=10.0), qid, 11)
        assert time.monotonic() - started >= 0.5


def test_every_attempt_and_token_request_takes_a_turn() -> None:
    """RateLimit(2): a turn every 0.5 s. A call answered 503 twice, then 200, sends three
    attempts: at least 1 s. A new client's first call sends a token request first: 0.5 s."""
    with fxpay.testing.Sandbox() as sb:
        with sb.client() as plain:
            qid = plain.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        with sb.client(rate_limit=fxpay.RateLimit(2)) as c:
            started = time.monotonic()
            c.get_quote(qid)
            assert time.monotonic() - started >= 0.5  # the token request, then the call
            time.sleep(0.6)
            sb.fail_next(QUOTE, 503, times=2)
            started = time.monotonic()
            c.get_quote(qid)
            took = time.monotonic() - started
            assert took >= 1.0, took
            assert sb.stats()["faults_fired"] == 2


def test_a_turn_past_the_deadline_fails_at_once() -> None:
    """RateLimit(0.5): a turn every 2 s. The token request takes the first; the call's own
    turn would come after its deadline of 0.5 s, so it fails at once, nothing sent."""
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=fxpay.RateLimit(0.5), deadline=0.5) as c:
        with sb.client() as plain:
            qid = plain.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        started = time.monotonic()
        with pytest.raises(fxpay.TimeoutError, match="rate limit"):
            c.get_quote(qid)
        assert time.monotonic() - started < 0.2


def test_wrong_types_and_values() -> None:
    for bad in ("40", True, None, [40]):
        with pytest.raises(TypeError, match="per_second"):
            fxpay.RateLimit(bad)  # type: ignore[arg-type]
    for value in (0, -1, 0.0, math.nan, math.inf, -math.inf, 10**400):
        with pytest.raises(fxpay.ConfigurationError, match="per_second"):
            fxpay.RateLimit(value)
    assert issubclass(fxpay.ConfigurationError, fxpay.FxPayError)
    for redis in (42, b"redis://127.0.0.1", object()):
        with pytest.raises(TypeError, match="redis"):
            fxpay.RateLimit(1, redis=redis)
    redis = need("redis")
    import redis.asyncio

    with pytest.raises(TypeError, match="redis"):
        fxpay.RateLimit(1, redis=redis.asyncio.Redis.from_url("redis://127.0.0.1:1"))
    assert fxpay.RateLimit(1, redis=redis.Redis.from_url("redis://127.0.0.1:1")).key == "fxpay:ratelimit:1"
    with pytest.raises(fxpay.ConfigurationError, match="RateLimit"):
        fxpay.RateLimit(1, redis="http://127.0.0.1:1")
    with pytest.raises(TypeError, match="name"):
        fxpay.RateLimit(1, redis="redis://127.0.0.1:1", name=3)  # type: ignore[arg-type]
    with pytest.raises(fxpay.ConfigurationError, match="name"):
        fxpay.RateLimit(1, name="payouts")
    with fxpay.testing.Sandbox() as sb:
        for bad in (40, "40", object()):
            with pytest.raises(TypeError, match="rate_limit"):
                sb.client(rate_limit=bad)


# -- shared through Redis -------------------------------------------------------------------

WORKER = """
import sys, threading, time, fxpay
base, cid, secret, url, name, seconds, threads = sys.argv[1:8]
rl = fxpay.RateLimit(40, redis=url, name=name)
done = 0
with fxpay.Client(cid, secret, base_url=base, rate_limit=rl) as c:
    qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
    end = time.monotonic() + float(seconds)
    def run():
        global done
        while time.monotonic() < end:
            c.get_quote(qid)
            done += 1
    pool = [threading.Thread(target=run) for _ in range(int(threads))]
    for t in pool: t.start()
    for t in pool: t.join()
print(done)
"""


PROCESSES, THREADS = 2, 4


def test_two_processes_sharing_a_redis_rate_limit_stay_within_it(redis_server: RedisServer) -> None:
    """Two processes, each with 4 threads calling as fast as they can for 4 s, share
    RateLimit(40, redis=...). Measured at the sandbox:
    - the sandbox, limited to 40/s itself (a bucket of 40), refuses none of their requests;
    - the whole seconds of the run hold 40 per second: the turns of any second number at
      most 40, and a second's arrivals may add only the requests in flight as it began (one
      per thread, 8), whose turn came before it (on a loaded host a request takes a while
      from its turn to the sandbox: 41 and 42 were seen);
    - they did call at that pace, so the test is not vacuous.
    A bucket per process sends 80/s: the sandbox refuses many, and the seconds hold 80."""
    name = f"two-{time.monotonic_ns()}"
    in_flight = PROCESSES * THREADS
    with fxpay.testing.Sandbox(rate_limit=40) as sb:
        args = [sys.executable, "-c", WORKER, sb.base_url, sb.client_id, sb.client_secret, redis_server.url, name, "4", str(THREADS)]
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * PROCESSES, outs
        seconds = counted_seconds(sb)
        stats = sb.stats()
    print(f"\nrequests per whole second at the sandbox: {[n for _, n, _ in seconds]}; calls per process {outs}")
    assert stats["rate_limited"] == 0, seconds
    whole = seconds[1:-1]  # the first and last seconds are partial
    assert len(whole) >= 3, seconds
    assert all(n <= 40 + in_flight for _, n, _ in whole), whole
    assert sum(n for _, n, _ in whole) <= 40 * len(whole) + in_flight, whole
    assert sum(n for _, n, _ in whole) >= 0.8 * 40 * len(whole), whole


def test_a_forked_child_uses_the_shared_rate_limit(redis_server: RedisServer) -> None:
    """A client and its RedisBucket made before a fork work in the child (a connection pool
    of its own), and the child and the parent still share the bucket."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    rl = fxpay.RateLimit(20, redis=redis_server.url, name=f"fork-{time.monotonic_ns()}")
    assert rl.key is not None
    assert rl.key.startswith("fxpay:ratelimit:fork-")
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        local = sb.client(rate_limit=fxpay.RateLimit(100))
        local.get_quote(qid)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                calls(c, qid, 20)
                calls(local, qid, 5)
                code = 0
            finally:
                os._exit(code)
        calls(c, qid, 20)
        _, status = os.waitpid(pid, 0)
        took = time.monotonic() - started
        assert os.waitstatus_to_exitcode(status) == 0
        # 40 calls between the two processes at 20/s: at least 1.95 s.
        assert took >= 1.95, took
        local.close()


def test_a_redis_that_is_down_falls_back_to_the_process_bucket(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Redis down: calls go on, each process paced by its own bucket; one WARNING for the
    outage, one INFO when Redis answers again, and the bucket is shared again."""
    server = RedisServer(tmp_path, aof=False)
    server.start()
    rl = fxpay.RateLimit(10, redis=server.url)
    with fxpay.testing.Sandbox() as sb, sb.client(rate_limit=rl) as c, caplog.at_level(logging.INFO, logger="fxpay"):
        qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        server.stop()
        started = time.monotonic()
        calls(c, qid, 11)
        took = time.monotonic() - started
        assert took >= 1.0, took  # still 10 per second, from the process's own bucket
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "rate limit's Redis failed" in r.getMessage()]
        assert len(warnings) == 1, caplog.records
        server.start()
        time.sleep(1.1)  # the shared bucket is asked again a second after it failed
        calls(c, qid, 2)
        infos = [r for r in caplog.records if "Redis answers again" in r.getMessage()]
        assert len(infos) == 1, caplog.records
    server.stop()


def test_awaitable_calls_and_from_env_take_turns_too(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The _async twins wait their turn on the runtime (the Redis script on fxpay's blocking
    threads, never on the event loop), and Client.from_env takes rate_limit= as well."""
    import asyncio

    for rl in (fxpay.RateLimit(20), fxpay.RateLimit(20, redis=redis_server.url, name=f"async-{time.monotonic_ns()}")):
        with fxpay.testing.Sandbox() as sb:
            monkeypatch.setenv("FXPAY_BASE_URL", sb.base_url)
            monkeypatch.setenv("FXPAY_CLIENT_ID", sb.client_id)
            monkeypatch.setenv("FXPAY_CLIENT_SECRET", sb.client_secret)
            with fxpay.Client.from_env(rate_limit=rl) as c:
                qid = c.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")

                async def burst(c: fxpay.Client = c, qid: str = qid) -> float:
                    started = time.monotonic()
                    ticks = 0

                    async def tick() -> None:
                        nonlocal ticks
                        while True:
                            ticks += 1
                            await asyncio.sleep(0.01)

                    ticker = asyncio.ensure_future(tick())
                    await asyncio.gather(*(c.get_quote_async(qid) for _ in range(21)))
                    took = time.monotonic() - started
                    ticker.cancel()
                    # The loop ran all along: the turns were not waited for on it.
                    assert ticks >= 50, ticks
                    return took

                took = asyncio.run(burst())
                assert took >= 1.0, (rl, took)

"""A token store that goes down fails soft: the client renews on its own and keeps serving,
logs one warning, and uses the store again once it is back. Real redis-server, stopped and
restarted by the test."""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need, need_program

redis = need("redis")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server on a fixed loopback port that can be stopped and started again."""

    def __init__(self, workdir: Path, program: str) -> None:
        self.program = program
        self.port = free_port()
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # No automatic snapshots; a snapshot is written only when `stop(save=True)` asks.
        self.proc = subprocess.Popen(
            [
                self.program,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
                "--dbfilename",
                "dump.rdb",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    pytest.fail("redis-server did not start")
                time.sleep(0.02)
        probe.close()

    def stop(self, *, save: bool = False) -> None:
        assert self.proc is not None
        if save:
            # Like a server with persistence going down: it comes back with this data.
            redis.Redis.from_url(self.url).shutdown(save=True)
        else:
            self.proc.terminate()
        self.proc.wait(10)
        self.proc = None

    def client(self) -> Any:
        return redis.Redis.from_url(self.url)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, need_program("redis-server"))
    server.start()
    yield server
    if server.proc is not None:
        server.stop()


def store_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "fxpay" and r.levelno == logging.WARNING]


def payments_key(sb: Any) -> str:
    return f"fxpay:{sb.base_url}:{sb.client_id}:payments"


def test_payments_keep_working_while_the_store_is_down(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fxpay")
    store = fxpay.RedisTokenStore(url=redis_server.url, prefix="out:")
    key = payments_key(fxpay_sandbox)
    with fxpay_sandbox.client(token_store=store) as c:
        quote_id = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        first = store.load(key)
        assert first is not None

        redis_server.stop()
        issued = fxpay_sandbox.stats()["tokens_issued"]["client_credentials"]
        # Two renewals during the outage (the sandbox refuses the token; the client renews).
        for _ in range(2):
            fxpay_sandbox.advance(3600)
            for _ in range(3):
                assert c.get_quote(quote_id).id == quote_id
        assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == issued + 2
        warnings = store_warnings(caplog)
        assert len(warnings) == 1, warnings
        assert "token store" in warnings[0]
        assert "on its own" in warnings[0]
        assert first.access_token not in warnings[0]

        redis_server.start()  # empty: nothing was persisted
        assert store.load(key) is None
        fxpay_sandbox.advance(3600)
        assert c.get_quote(quote_id).id == quote_id
        # The renewal went through the store again: its token is there now...
        stored = store.load(key)
        assert stored is not None
        assert stored.access_token != first.access_token
        assert len(store_warnings(caplog)) == 1
        assert any("answers again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
    # ...and another client sharing the store uses it without asking for a token.
    issued = fxpay_sandbox.stats()["tokens_issued"]["client_credentials"]
    with fxpay_sandbox.client(token_store=fxpay.RedisTokenStore(url=redis_server.url, prefix="out:")) as c2:
        assert c2.get_quote(quote_id).id == quote_id
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == issued


def test_payments_never_replay_an_older_token_the_store_comes_back_with(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fxpay")
    store = fxpay.RedisTokenStore(url=redis_server.url, prefix="old:")
    key = payments_key(fxpay_sandbox)
    with fxpay_sandbox.client(token_store=store) as c:
        quote_id = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        t1 = store.load(key)
        assert t1 is not None
        redis_server.stop(save=True)  # goes down with t1 saved
        fxpay_sandbox.advance(3600)
        assert c.get_quote(quote_id).id == quote_id  # renewed on its own: t2
        redis_server.start()  # back, with t1
        assert store.load(key) == t1
        fxpay_sandbox.advance(3600)  # t2 refused: renew through the store, which holds t1
        issued = fxpay_sandbox.stats()["tokens_issued"]["client_credentials"]
        assert c.get_quote(quote_id).id == quote_id
        assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == issued + 1
        t3 = store.load(key)
        assert t3 is not None
        assert t3.access_token != t1.access_token
        assert len(store_warnings(caplog)) == 1


async def test_payments_keep_working_while_the_store_is_down_async(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fxpay")
    store = fxpay.RedisTokenStore(url=redis_server.url, prefix="outa:")
    async with fxpay_sandbox.client(token_store=store) as c:
        quote_id = await c.create_quote_async(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        redis_server.stop()
        fxpay_sandbox.advance(3600)
        assert (await c.get_quote_async(quote_id)).id == quote_id
        assert len(store_warnings(caplog)) == 1
        redis_server.start()
        fxpay_sandbox.advance(3600)
        assert (await c.get_quote_async(quote_id)).id == quote_id
        assert store.load(payments_key(fxpay_sandbox)) is not None


def test_user_session_through_a_store_outage_never_replays_a_stale_token(
    fxpay_sandbox: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fxpay")
    store = fxpay.RedisTokenStore(url=redis_server.url, prefix="us:")
    key = f"fxpay:{fxpay_sandbox.base_url}:user:user-1"
    with fxpay_sandbox.client(token_store=store) as c:
        auth = c.authorization_url(fxpay_sandbox.redirect_uri)
        t0 = c.exchange_code(auth, fxpay_sandbox.approve(auth.url))
        seen: list[fxpay.Token] = []
        session = c.user_session(t0, on_token=seen.append, key="user-1")

        fxpay_sandbox.advance(3600)  # t0 refused: refresh through the store
        assert session.list_virtual_accounts()
        t1 = session.token
        assert store.load(key) == t1

        # The store goes down with t1 saved; the session refreshes on its own meanwhile.
        redis_server.stop(save=True)
        fxpay_sandbox.advance(3600)
        assert session.list_virtual_accounts()
        t2 = session.token
        assert t2.access_token != t1.access_token
        assert len(store_warnings(caplog)) == 1

        # Back, with t1: older than the session's token, its refresh token spent. The next
        # renewal must not hand t1 to the call (a sure 401) nor refresh with it.
        redis_server.start()
        assert store.load(key) == t1
        fxpay_sandbox.advance(3600)
        assert session.list_virtual_accounts()
        t3 = session.token
        assert t3.access_token not in (t1.access_token, t2.access_token)
        assert store.load(key) == t3  # the store is used again
        assert seen == [t1, t2, t3]
        assert fxpay_sandbox.stats()["tokens_issued"]["refresh_token"] == 3


async def test_a_cancelled_renewal_gives_the_store_lock_back(fxpay_sandbox: Any) -> None:
    import asyncio

    store = fxpay.MemoryTokenStore()
    c = fxpay_sandbox.client(token_store=store)
    fxpay_sandbox.delay_next("/v1/oauth/token", 1.0)
    task = asyncio.ensure_future(c.create_quote_async(buy_currency="USD", buy_amount=10, sell_currency="EUR"))
    # Cancelled while its token request (made under the store's lock) is under way.
    deadline = asyncio.get_running_loop().time() + 10
    while fxpay_sandbox.stats()["token_requests"] == 0:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Another client of the same store renews: the lock was given back.
    c2 = fxpay_sandbox.client(token_store=store)
    assert await asyncio.wait_for(c2.create_quote_async(buy_currency="USD", buy_amount=10, sell_currency="EUR"), 10)
    await c.aclose()
    await c2.aclose()


class FailingStore:
    """A token store whose every method raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def load(self, key: str) -> fxpay.Token | None:
        raise self.error

    def save(self, key: str, token: fxpay.Token) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("error", "shown"),
    [(ValueError("disk full"), "ValueError: disk full"), (ConnectionError(), "ConnectionError")],
    ids=["message", "none"],
)
def test_the_outage_warning_names_the_failed_method_and_its_exception(
    fxpay_sandbox: Any, caplog: pytest.LogCaptureFixture, error: Exception, shown: str
) -> None:
    """One warning for the outage, at its first failure (the load; the save that follows
    fails too, and is not reported again), naming the exception as ``Type: message``."""
    caplog.set_level(logging.WARNING, logger="fxpay")
    with fxpay_sandbox.client(token_store=FailingStore(error)) as c:
        assert c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    assert store_warnings(caplog) == [
        f"the token store's load() failed ({shown}); fxpay renews tokens on its own until the store answers again"
    ]

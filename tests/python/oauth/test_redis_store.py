"""Several processes share tokens through a real redis-server on loopback."""

from __future__ import annotations

import json
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

from conftest import fork_quietly, need, need_program, wait_child

redis = need("redis")
WORKER = Path(__file__).with_name("redis_worker.py")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    redis_server = need_program("redis-server")
    # A Unix socket in this session's own temporary directory, no TCP port: parallel runs
    # (xdist workers, other checkouts) cannot collide.
    sock = tmp_path_factory.mktemp("redis") / "redis.sock"
    proc = subprocess.Popen(
        [redis_server, "--port", "0", "--unixsocket", str(sock), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"unix://{sock}?db=0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.ping()
            break
        except (redis.ConnectionError, FileNotFoundError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.02)
    yield url
    proc.terminate()
    proc.wait(5)


def run_workers(n: int, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    cfg = {**cfg, "start_at": time.time() + 1.5}
    procs = [subprocess.Popen([sys.executable, str(WORKER), json.dumps(cfg)], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0, stdout
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def test_store_round_trip(redis_url: str) -> None:
    store = fxpay.RedisTokenStore(url=redis_url, prefix="rt:")
    assert store.load("k") is None
    token = fxpay.Token.from_dict({"access_token": "a", "token_type": "Bearer", "expires_in": 60, "expires_at": time.time() + 60})
    store.save("k", token)
    assert store.load("k") == token
    ttl = redis.Redis.from_url(redis_url).pttl("rt:k")
    assert 0 < ttl <= 60_000
    held = store.lock("k")
    held.release()


def test_an_entry_with_a_refresh_token_does_not_expire(redis_url: str) -> None:
    # The access token expires in a minute, but the refresh token outlives it: the entry
    # must stay, or the user's session is lost with it.
    store = fxpay.RedisTokenStore(url=redis_url, prefix="rf:")
    token = fxpay.Token.from_dict(
        {"access_token": "a", "refresh_token": "r", "token_type": "Bearer", "expires_in": 60, "expires_at": time.time() + 60}
    )
    store.save("k", token)
    assert redis.Redis.from_url(redis_url).pttl("rf:k") == -1  # kept, with no expiry
    assert store.load("k") == token


def test_four_processes_one_token_per_lifetime(fxpay_sandbox: Any, redis_url: str) -> None:
    quote_id = fxpay_sandbox.client().create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 1
    cfg = {
        "mode": "payments",
        "base_url": fxpay_sandbox.base_url,
        "client_id": fxpay_sandbox.client_id,
        "client_secret": fxpay_sandbox.client_secret,
        "redis_url": redis_url,
        "prefix": "t4:",
        "quote_id": quote_id,
        "calls": 10,
        "threads": 4,
    }
    results = run_workers(4, cfg)
    assert [r["errors"] for r in results] == [[]] * 4
    assert sum(r["done"] for r in results) == 4 * 4 * 10
    # One token for the four workers (the first one was the set-up client's).
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 2
    # The next lifetime: the sandbox expires the token; the workers renew it once between them.
    fxpay_sandbox.advance(3600)
    results = run_workers(4, cfg)
    assert [r["errors"] for r in results] == [[]] * 4
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 3


def test_rotated_refresh_token_is_never_used_twice(fxpay_sandbox: Any, redis_url: str) -> None:
    c = fxpay_sandbox.client()
    auth = c.authorization_url(fxpay_sandbox.redirect_uri)
    token = c.exchange_code(auth, fxpay_sandbox.approve(auth.url))
    fxpay_sandbox.advance(3600)  # every process now gets a 401 and must refresh
    cfg = {
        "mode": "accounts",
        "base_url": fxpay_sandbox.base_url,
        "client_id": fxpay_sandbox.client_id,
        "client_secret": fxpay_sandbox.client_secret,
        "redis_url": redis_url,
        "prefix": "u4:",
        "user_token": token.to_dict(),
        "user_key": "user-1",
        "threads": 3,
    }
    results = run_workers(4, cfg)
    assert [r["errors"] for r in results] == [[]] * 4, results
    assert sum(r["done"] for r in results) == 12
    # Exactly one refresh across 4 processes x 3 threads, so no rotated token was replayed.
    assert fxpay_sandbox.stats()["tokens_issued"]["refresh_token"] == 1
    stored = fxpay.RedisTokenStore(url=redis_url, prefix="u4:").load(f"fxpay:{fxpay_sandbox.base_url}:user:user-1")
    assert stored is not None
    assert stored.refresh_token != token.refresh_token


def test_a_given_redis_client_is_used_as_it_is(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    store = fxpay.RedisTokenStore(client, prefix="given:")
    token = fxpay.Token.from_dict({"access_token": "a", "expires_in": 60, "expires_at": time.time() + 60})
    store.save("k", token)
    assert client.get("given:k") is not None
    assert store.load("k") == token
    assert repr(store) == "RedisTokenStore(prefix='given:')"


@pytest.mark.parametrize("given", [True, False], ids=["client-given", "url"])
def test_a_child_forked_while_a_thread_holds_the_pools_lock_uses_a_pool_of_its_own(redis_url: str, given: bool) -> None:
    """A thread of the parent holds the lock of the store's connection pool at the fork (as
    one does while it takes a connection). The child loads and saves all the same, on a pool
    of its own (fxpay._forks): redis-py's own reset of the inherited pool would take that
    lock, and the child would wait for ever. The parent goes on with its client."""
    client = redis.Redis.from_url(redis_url) if given else None
    store = fxpay.RedisTokenStore(client, prefix=f"fork{time.monotonic_ns()}:") if given else fxpay.RedisTokenStore(url=redis_url)
    token = fxpay.Token.from_dict({"access_token": "a", "token_type": "Bearer", "expires_in": 60, "expires_at": time.time() + 60})
    store.save("k", token)  # the pool made, and a connection in it
    parents = store._r
    pool = parents.connection_pool
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(30)
    pid = fork_quietly()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            store.save("from-child", token)
            code = 0 if store.load("k") == token and store._r is not parents else 2
        finally:
            os._exit(code)
    release.set()
    holder.join(30)
    code = wait_child(pid, 30)
    assert code is not None, "the child hung on the lock of its parent's connection pool"
    assert code == 0
    assert store._r is parents
    assert store.load("from-child") == token  # the child's write reached the shared Redis


def test_a_store_needs_a_client_or_a_url() -> None:
    with pytest.raises(fxpay.ConfigurationError, match="client or a url"):
        fxpay.RedisTokenStore()

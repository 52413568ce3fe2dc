"""The client-credentials token: lazy, cached, single-flight, renewed on 401."""

from __future__ import annotations

import asyncio

import pytest

import fxpay
from fxpay.testing import UnfiredFaultWarning

from conftest import all_at_once


def test_32_threads_cause_one_token_request(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    qid = fxpay_sandbox.client().create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    first = fxpay_sandbox.stats()["token_requests"]
    assert first == 1  # the helper client above
    quotes = all_at_once(32, lambda: c.get_quote(qid))
    assert len(quotes) == 32
    assert all(q.id == qid for q in quotes)
    assert fxpay_sandbox.stats()["token_requests"] - first == 1


async def test_50_tasks_cause_one_token_request(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    c = fxpay_sandbox.client()
    ids = await asyncio.gather(*(c.create_quote_async(buy_currency="USD", buy_amount=i + 1, sell_currency="EUR") for i in range(50)))
    assert len(set(ids)) == 50
    assert fxpay_sandbox.stats()["token_requests"] == 1


def test_token_is_reused(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert fxpay_sandbox.stats()["token_requests"] == 1


def test_401_renews_and_replays_once(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    fxpay_sandbox.advance(3600)  # the sandbox expires the token; the client's clock has not moved
    assert fxpay_client.get_quote(qid).id == qid
    assert fxpay_sandbox.stats()["token_requests"] == 2


def test_401_replay_is_not_looped(fxpay_sandbox, fxpay_client) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    fxpay_sandbox.fail_next(f"/v1/payments/quotes/{qid}", 401, times=3)
    before = fxpay_sandbox.stats()["requests"]
    with pytest.raises(fxpay.AuthenticationError) as info:
        fxpay_client.get_quote(qid)
    assert info.value.status == 401
    # first attempt, one token renewal, one replay: three requests, never more
    assert fxpay_sandbox.stats()["requests"] - before == 3
    # two of the three 401s were answered (the first attempt and the replay), no third
    with pytest.warns(UnfiredFaultWarning, match=r"401\): 1 use\(s\) left"):
        fxpay_sandbox.reset()


def test_a_shared_store_shares_the_token(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    store = fxpay.MemoryTokenStore()
    a = fxpay_sandbox.client(token_store=store)
    b = fxpay_sandbox.client(token_store=store)
    a.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    b.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert fxpay_sandbox.stats()["token_requests"] == 1


def test_oauth_errors_from_the_token_endpoint(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    bad = fxpay.Client(fxpay_sandbox.client_id, "wrong-secret", base_url=fxpay_sandbox.base_url)
    with pytest.raises(fxpay.OAuthError) as info:
        bad.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert info.value.error == "invalid_client"
    assert info.value.status == 401
    assert "wrong-secret" not in str(info.value)
    assert "wrong-secret" not in repr(info.value)


async def test_200_tasks_cause_one_token_request(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    qid = fxpay_sandbox.client().create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    c = fxpay_sandbox.client()
    quotes = await asyncio.gather(*(c.get_quote_async(qid) for _ in range(200)))
    assert {q.id for q in quotes} == {qid}
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 2  # the set-up client's and this one's


def test_renewal_before_expiry_is_single_flight(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    # A token whose expiry is near is renewed before use, once for all threads.
    store = fxpay.MemoryTokenStore()
    c = fxpay_sandbox.client(token_store=store)
    qid = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    (key,) = list(store._tokens)
    old = store.load(key)
    assert old is not None
    import datetime as dt

    nearly = old.replace(expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3))
    c2 = fxpay_sandbox.client(token_store=store)
    store.save(key, nearly)
    all_at_once(16, lambda: c2.get_quote(qid))
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 2
    renewed = store.load(key)
    assert renewed is not None
    assert renewed.access_token != old.access_token


def test_token_expired_is_true_only_once_expiry_has_passed() -> None:
    import time

    now = time.time()
    live = fxpay.Token.from_dict({"access_token": "a", "expires_in": 3600, "expires_at": now + 3600})
    dead = fxpay.Token.from_dict({"access_token": "a", "expires_in": 3600, "expires_at": now - 1})
    assert live.expired is False
    assert dead.expired is True


def test_memory_store_lock_excludes_a_second_holder() -> None:
    import threading

    store = fxpay.MemoryTokenStore()
    held = store.lock("k")
    got_it = threading.Event()
    other_key = threading.Event()

    def second() -> None:
        store.lock("k").release()
        got_it.set()

    def different_key() -> None:
        store.lock("other").release()
        other_key.set()

    t = threading.Thread(target=second, daemon=True)
    t.start()
    threading.Thread(target=different_key, daemon=True).start()
    assert other_key.wait(10), "a lock on another key must not wait for this one"
    # The second holder must still be waiting (a no-op lock lets it through at once).
    assert not got_it.wait(0.5), "a second lock('k') was granted while the first was held"
    held.release()
    assert got_it.wait(10), "releasing the lock did not let the waiting holder in"
    t.join(10)


def test_two_clients_sharing_a_store_contend_for_its_lock(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    # Two clients (two token caches) share one store: the store's lock is what keeps them from
    # both asking for a token. The first renewal is held up in the sandbox so the second
    # client's arrives while it is under way.
    import threading

    store = fxpay.MemoryTokenStore()
    a = fxpay_sandbox.client(token_store=store)
    b = fxpay_sandbox.client(token_store=store)
    fxpay_sandbox.delay_next("POST /v1/oauth/token", 3.0)
    done: list[str] = []
    t = threading.Thread(target=lambda: done.append(a.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")), daemon=True)
    t.start()
    wait_until(lambda: fxpay_sandbox.stats()["token_requests"] == 1)
    b.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    t.join(30)
    assert len(done) == 1
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 1


class CountingStore(fxpay.MemoryTokenStore):
    """A memory store that counts lock() and release() calls."""

    def __init__(self) -> None:
        super().__init__()
        self.locked = 0
        self.released = 0
        self.keys: list[str] = []

    def lock(self, key: str):  # type: ignore[no-untyped-def]
        held = super().lock(key)
        self.locked += 1
        self.keys.append(key)
        store = self

        class Held:
            def release(self) -> None:
                store.released += 1
                held.release()

        return Held()


def test_store_lock_is_released_when_the_token_fetch_fails(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    import threading

    store = CountingStore()
    c = fxpay_sandbox.client(token_store=store)
    fxpay_sandbox.fail_next("POST /v1/oauth/token", 500)
    try:
        c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    except fxpay.FxPayError:
        pass
    else:
        raise AssertionError("the token fetch was meant to fail")
    assert store.locked == 1
    assert store.released == 1
    # Nothing holds the lock: another holder gets it at once, and the next call succeeds.
    got = threading.Event()
    threading.Thread(target=lambda: (store.lock(store.keys[0]).release(), got.set()), daemon=True).start()
    assert got.wait(10), "the store's lock was left held after the failed fetch"
    result: list[str] = []
    t = threading.Thread(target=lambda: result.append(c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")), daemon=True)
    t.start()
    t.join(30)
    assert result, "the next call did not finish: the store's lock is still held"
    assert store.locked == store.released == 3


def wait_until(cond, seconds: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    import time

    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.01)


def test_memory_store_repr_counts_keys_and_shows_no_token() -> None:
    store = fxpay.MemoryTokenStore()
    assert repr(store) == "MemoryTokenStore(keys=0)"
    store.save("k", fxpay.Token.from_dict({"access_token": "SECRET-A", "expires_in": 60}))
    assert repr(store) == "MemoryTokenStore(keys=1)"

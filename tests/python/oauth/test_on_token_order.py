"""``on_token(new)`` returns before any request carries ``new``; if it raises, the call fails
with its exception and the same token is offered again before its next use."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import fxpay

VA = "GET /v1/gca/virtual-accounts"


def va_requests(sb: Any) -> int:
    return int(sb.stats()["paths"][VA])


def expired_session_token(sb: Any, c: fxpay.Client) -> fxpay.Token:
    """A user token that both sides consider expired: the session must refresh before use."""
    auth = c.authorization_url(sb.redirect_uri)
    token = c.exchange_code(auth, sb.approve(auth.url))
    sb.advance(3600)  # the sandbox no longer takes it...
    return fxpay.Token.from_dict({**token.to_dict(), "expires_at": 0})  # ...nor does the client


class SlowOnToken:
    """Sleeps 0.3 s; records the virtual-accounts requests the sandbox saw on entry and exit."""

    def __init__(self, sb: Any) -> None:
        self.sb = sb
        self.entered = threading.Event()
        self.offered: list[fxpay.Token] = []
        self.windows: list[tuple[int, int]] = []
        self.returned_at: list[float] = []

    def __call__(self, t: fxpay.Token) -> None:
        self.offered.append(t)
        at_entry = va_requests(self.sb)
        self.entered.set()
        time.sleep(0.3)
        self.windows.append((at_entry, va_requests(self.sb)))
        self.returned_at.append(time.monotonic())


def check_order(sb: Any, cb: SlowOnToken, finished_at: list[float], refreshes_before: int) -> None:
    assert len(cb.offered) == 1
    assert sb.stats()["tokens_issued"]["refresh_token"] - refreshes_before == 1
    # No request (the only token a request could carry is the new one) while on_token ran...
    assert cb.windows == [(0, 0)]
    # ...and no call came back before it returned.
    assert len(finished_at) == 4
    assert min(finished_at) >= cb.returned_at[0]
    assert va_requests(sb) == 4


def test_no_request_carries_a_new_token_before_on_token_returns(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    stale = expired_session_token(fxpay_sandbox, fxpay_client)
    cb = SlowOnToken(fxpay_sandbox)
    session = fxpay_client.user_session(stale, on_token=cb)
    refreshes = fxpay_sandbox.stats()["tokens_issued"]["refresh_token"]
    barrier = threading.Barrier(3)
    finished_at: list[float] = []
    errors: list[BaseException] = []

    def call(wait: Any) -> None:
        try:
            wait()
            session.list_virtual_accounts()
            finished_at.append(time.monotonic())
        except BaseException as e:  # checked below
            errors.append(e)

    # Three threads race the renewal; a fourth call starts while on_token is running.
    threads = [threading.Thread(target=call, args=(barrier.wait,)) for _ in range(3)]
    threads.append(threading.Thread(target=call, args=(lambda: cb.entered.wait(10),)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    check_order(fxpay_sandbox, cb, finished_at, refreshes)


async def test_no_request_carries_a_new_token_before_on_token_returns_async(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    stale = expired_session_token(fxpay_sandbox, fxpay_client)
    cb = SlowOnToken(fxpay_sandbox)
    session = fxpay_client.user_session(stale, on_token=cb)
    refreshes = fxpay_sandbox.stats()["tokens_issued"]["refresh_token"]
    finished_at: list[float] = []

    async def call(late: bool) -> None:
        if late:
            assert await asyncio.to_thread(cb.entered.wait, 10)
        await session.list_virtual_accounts_async()
        finished_at.append(time.monotonic())

    await asyncio.wait_for(asyncio.gather(call(False), call(False), call(False), call(True)), 30)
    check_order(fxpay_sandbox, cb, finished_at, refreshes)


class DiskFull(Exception):
    pass


@pytest.mark.parametrize("aio", [False, True], ids=["blocking", "async"])
async def test_a_failing_on_token_fails_the_call_and_is_offered_again(fxpay_sandbox: Any, fxpay_client: fxpay.Client, aio: bool) -> None:
    stale = expired_session_token(fxpay_sandbox, fxpay_client)
    offered: list[fxpay.Token] = []

    def on_token(t: fxpay.Token) -> None:
        offered.append(t)
        if len(offered) == 1:
            raise DiskFull("cannot persist the token")

    session = fxpay_client.user_session(stale, on_token=on_token)

    async def call() -> list[fxpay.VirtualAccount]:
        if aio:
            return await session.list_virtual_accounts_async()
        return session.list_virtual_accounts()

    with pytest.raises(DiskFull, match="cannot persist the token"):
        await call()
    assert len(offered) == 1
    assert va_requests(fxpay_sandbox) == 0  # the new token was not used
    # The session keeps the new token (the old refresh token is spent) and offers it again.
    assert session.token == offered[0]
    assert await call()
    assert offered == [offered[0], offered[0]]
    assert fxpay_sandbox.stats()["tokens_issued"]["refresh_token"] == 1
    assert va_requests(fxpay_sandbox) == 1
    # Accepted now: later calls do not offer it again.
    assert await call()
    assert len(offered) == 2


async def test_on_token_runs_on_the_calling_thread_of_a_blocking_call_and_off_the_loop_of_an_awaitable_one(
    fxpay_sandbox: Any, fxpay_client: fxpay.Client
) -> None:
    """docs/consent.md: a blocking call runs ``on_token`` on the calling thread (the thread
    that drives the call), an awaitable call on a worker thread, never on the event loop."""
    ran_on: list[int] = []
    blocking = fxpay_client.user_session(
        expired_session_token(fxpay_sandbox, fxpay_client), on_token=lambda t: ran_on.append(threading.get_ident())
    )
    caller: list[int] = []

    def call() -> None:
        caller.append(threading.get_ident())
        blocking.list_virtual_accounts()

    t = threading.Thread(target=call)
    t.start()
    t.join(30)
    assert len(caller) == 1
    assert ran_on == caller, "on_token ran on another thread than the blocking call's"
    ran_on.clear()
    awaited = fxpay_client.user_session(
        expired_session_token(fxpay_sandbox, fxpay_client), on_token=lambda t: ran_on.append(threading.get_ident())
    )
    await asyncio.wait_for(awaited.list_virtual_accounts_async(), 30)
    assert len(ran_on) == 1
    assert ran_on[0] != threading.get_ident(), "on_token ran on the event loop"

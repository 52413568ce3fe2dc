"""Which loop an awaitable call belongs to (crates/fxpay-python/src/running_loop.rs).

Before CPython 3.12, ``asyncio.get_running_loop()`` makes a getpid(2) system call per call,
so fxpay keeps the loop it returned on a thread and takes it again while that loop's
``_thread_id`` says it still runs there. These tests check that the kept loop is never taken
for another one: a second loop on the same thread, the same loop on another thread, a loop
run again, a forked child. Real HTTP over loopback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import NoReaderLoop, SocketPairLoop

OLDER = sys.version_info < (3, 12)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


@pytest.fixture(scope="module")
def quote_id(sb: Sandbox) -> str:
    with sb.client() as c:
        return c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")


async def _calls(c: fxpay.Client, quote_id: str, n: int = 8) -> set[str]:
    """n awaited calls, half one by one and half at once; the ids they answered."""
    ids = {(await c.get_quote_async(quote_id)).id for _ in range(n // 2)}
    ids |= {q.id for q in await asyncio.gather(*(c.get_quote_async(quote_id) for _ in range(n - n // 2)))}
    return ids


@pytest.mark.parametrize("make", [asyncio.new_event_loop, NoReaderLoop, SocketPairLoop], ids=["default", "no_add_reader", "socket_pair"])
def test_each_new_loop_on_a_thread_gets_futures_of_its_own(sb: Sandbox, quote_id: str, make: type[asyncio.AbstractEventLoop]) -> None:
    # A kept loop taken for the next one would hand out futures of a closed loop: "attached to
    # a different loop", or a call that never ends.
    with sb.client() as c:
        for _ in range(3):
            loop = make()
            try:
                assert loop.run_until_complete(asyncio.wait_for(_calls(c, quote_id), 30)) == {quote_id}
            finally:
                loop.close()


def test_a_call_outside_any_loop_still_says_so_after_one_ran(sb: Sandbox, quote_id: str) -> None:
    with sb.client() as c:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(_calls(c, quote_id))
        finally:
            loop.close()
        coro = c.get_quote_async(quote_id)
        with pytest.raises(RuntimeError, match="no running event loop"):
            coro.send(None)
        coro.close()


def test_a_stopped_loop_that_another_loop_replaced_is_not_taken(sb: Sandbox, quote_id: str) -> None:
    # The first loop stops (its _thread_id goes back to None); a second runs on the thread
    # while the first is still open, then the first runs again.
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    with sb.client() as c:
        try:
            for loop in (first, second, first, second):
                assert loop.run_until_complete(asyncio.wait_for(_calls(c, quote_id, 4), 30)) == {quote_id}
        finally:
            first.close()
            second.close()


_COUNTING = textwrap.dedent(
    """
    import asyncio, os, sys
    import fxpay
    from fxpay.testing import Sandbox

    asked = 0
    real = asyncio.get_running_loop

    def counting():
        global asked
        asked += 1
        return real()

    asyncio.get_running_loop = counting  # before fxpay's first awaitable call looks it up

    async def main(c, qid, n):
        for _ in range(n // 2):
            await c.get_quote_async(qid)
        await asyncio.gather(*(c.get_quote_async(qid) for _ in range(n - n // 2)))

    with Sandbox() as sb, sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
        for _ in range(2):
            asyncio.run(main(c, qid, 40))
        if os.environ.get("FORK") == "1":
            pid = os.fork()
            if pid == 0:
                # The child: the parent's kept loop is not its own; a new loop works.
                try:
                    asyncio.run(main(c, qid, 4))
                except BaseException as e:
                    print("child failed:", repr(e), flush=True)
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            print("child", os.waitstatus_to_exitcode(status))
    print("asked", asked)
    """
)


def _counting(fork: bool = False) -> str:
    env = {**os.environ, "FORK": "1" if fork else "0"}
    done = subprocess.run([sys.executable, "-c", _COUNTING], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_running_loop_is_asked_once_per_loop_where_asking_costs_a_system_call() -> None:
    out = _counting()
    # 2 loops of 40 calls: 80 asks where asking is cheap (3.12 and later), one per loop before.
    assert out.splitlines()[-1] == ("asked 2" if OLDER else "asked 80")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_asks_for_its_own_loop() -> None:
    lines = _counting(fork=True).splitlines()
    assert "child 0" in lines, lines

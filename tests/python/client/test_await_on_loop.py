"""Awaitable calls carried out on the event loop's own thread (issue 28, the async cells):
where the loop can watch the thread's runtime descriptor, a call's request, answer and
result never leave the loop's thread; elsewhere (a loop that cannot, ``FXPAY_AWAIT_ON_LOOP=0``)
they run on the shared runtime's worker. Real HTTP over loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import NoReaderLoop, SocketPairLoop


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


class _Threads(logging.Handler):
    """Records the thread that writes each DEBUG line (the thread that ran the attempt)."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.idents: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "quotes/" in record.getMessage():
            self.idents.append(threading.get_ident())


@pytest.fixture
def threads() -> Iterator[_Threads]:
    log = logging.getLogger("fxpay")
    handler, level = _Threads(), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


async def test_a_call_runs_on_the_loops_thread_where_the_loop_can_watch_the_runtime(sb: Sandbox, threads: _Threads) -> None:
    loop = asyncio.get_running_loop()
    async with sb.client() as c:
        qid = await c.create_quote_async(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
        quotes = await asyncio.gather(*(c.get_quote_async(qid) for _ in range(20)))
    assert {q.id for q in quotes} == {qid}
    assert len(threads.idents) == 20
    if isinstance(loop, (NoReaderLoop, SocketPairLoop)):
        assert threading.get_ident() not in threads.idents
    else:
        assert set(threads.idents) == {threading.get_ident()}


async def test_calls_started_in_one_pass_and_later_all_end(sb: Sandbox) -> None:
    # Calls started while a run is pending, from a call's continuation, and after the loop was
    # idle: each is started and resolved (none waits for a run that never comes).
    async with sb.client() as c:
        qid = await c.create_quote_async(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")

        async def chain(n: int) -> int:
            for _ in range(n):
                await c.get_quote_async(qid)
            return n

        assert await asyncio.wait_for(asyncio.gather(*(chain(5) for _ in range(16))), timeout=10) == [5] * 16
        await asyncio.sleep(0.05)
        assert (await asyncio.wait_for(c.get_quote_async(qid), timeout=10)).id == qid


def test_a_deadline_fires_on_a_quiet_loop(sb: Sandbox) -> None:
    # No descriptor announces a timer: the loop runs the runtime on a tick while calls are
    # pending, so a call whose answer is held still ends at its deadline.
    async def main() -> float:
        async with sb.client(deadline=0.5) as c:
            qid = await c.create_quote_async(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
            sb.delay_next(f"/v1/payments/quotes/{qid}", 5)
            started = time.monotonic()
            with pytest.raises(fxpay.TimeoutError):
                await c.get_quote_async(qid)
            return time.monotonic() - started

    assert 0.4 < asyncio.run(main()) < 2


def test_one_loop_runs_on_two_threads_in_turn(sb: Sandbox) -> None:
    # Run here, then on another thread, then here again. The first run ends with a call in
    # flight, so its tick is still scheduled when the loop moves: it comes on the other
    # thread, as may this thread's reader, which stops both there. Back here, calls must
    # still end, a deadline must still fire on a quiet loop (the tick runs again), and the
    # call left in flight must end too.
    loop = asyncio.new_event_loop()
    outcomes: list[object] = []
    left: list[asyncio.Future[fxpay.Quote]] = []

    async def calls(c: fxpay.Client, qid: str, leave: bool) -> object:
        ids = {(await c.get_quote_async(qid)).id for _ in range(4)}
        ids |= {q.id for q in await asyncio.gather(*(c.get_quote_async(qid) for _ in range(4)))}
        sb.delay_next(f"/v1/payments/quotes/{qid}", 5)
        started = time.monotonic()
        try:
            await c.with_options(deadline=0.5).get_quote_async(qid)
            return (ids, "no timeout")
        except fxpay.TimeoutError:
            in_time = time.monotonic() - started < 2
        if leave:
            sb.delay_next(f"/v1/payments/quotes/{qid}", 1)
            left.append(asyncio.ensure_future(c.get_quote_async(qid)))
            await asyncio.sleep(0.05)  # started, and its tick scheduled
        return (ids, in_time)

    def run(c: fxpay.Client, qid: str, leave: bool = False) -> None:
        try:
            outcomes.append(loop.run_until_complete(asyncio.wait_for(calls(c, qid, leave), 20)))
        except BaseException as e:  # the assert below shows it
            outcomes.append(e)

    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
        try:
            run(c, qid, leave=True)
            there = threading.Thread(target=run, args=(c, qid))
            there.start()
            there.join(60)
            run(c, qid)
            last = loop.run_until_complete(asyncio.wait_for(left[0], 10))
            # Back here, the loop watches this thread's runtime again (without that, its
            # calls would only move on the 5 ms tick).
            watched = _watched_runtimes(loop)
        finally:
            loop.close()
    assert outcomes == [({qid}, True)] * 3
    assert last.id == qid
    assert watched, "no runtime descriptor is watched"


def test_a_stale_key_for_the_runtimes_descriptor_number_is_replaced(sb: Sandbox) -> None:
    # A thread that ran the loop ends: its runtime's descriptor is closed (and so leaves the
    # loop's epoll set), while the loop's selector keeps its key. A runtime of a later thread
    # may get that number again. The loop must then watch the new descriptor for real (in its
    # epoll set), not only swap the old key's callback (the events are the same): the new
    # thread's calls would move on the 5 ms tick alone. That state is made here by hand, as
    # the kernel's reuse of numbers would make it: the loop's key for this thread's runtime is
    # taken out of its epoll set, and another loop runs here in between, so that the first
    # loop's runner is made anew when it is back.
    loop, other = asyncio.new_event_loop(), asyncio.new_event_loop()
    seen: list[object] = []

    async def calls(c: fxpay.Client, qid: str) -> set[str]:
        ids = {(await c.get_quote_async(qid)).id for _ in range(3)}
        return ids | {q.id for q in await asyncio.gather(*(c.get_quote_async(qid) for _ in range(3)))}

    def run(c: fxpay.Client, qid: str) -> None:
        try:
            ids = loop.run_until_complete(asyncio.wait_for(calls(c, qid), 20))
            (fd,) = _watched_runtimes(loop)
            loop._selector._selector.unregister(fd)  # type: ignore[attr-defined]
            ids |= other.run_until_complete(asyncio.wait_for(calls(c, qid), 20))
            ids |= loop.run_until_complete(asyncio.wait_for(calls(c, qid), 20))
            watched = _watched_runtimes(loop)
            seen.append((ids, fd, watched, _in_epoll_set(loop, watched)))
        except BaseException as e:  # the assert below shows it
            seen.append(e)

    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
        try:
            t = threading.Thread(target=run, args=(c, qid))
            t.start()
            t.join(60)
        finally:
            loop.close()
            other.close()
    assert len(seen) == 1
    assert not isinstance(seen[0], BaseException), seen[0]
    ids, fd, watched, in_set = seen[0]  # type: ignore[misc]
    assert ids == {qid}
    assert watched == [fd]
    assert in_set == [fd], "the runtime's descriptor is not in the loop's epoll set"


@pytest.mark.parametrize("late", [False, True], ids=["ended", "ends-while-the-loop-runs"])
@pytest.mark.parametrize("handed", [True, False], ids=["in-flight", "not-yet-handed"])
def test_a_call_left_by_a_thread_that_ended_gets_an_error_not_a_hang(sb: Sandbox, handed: bool, late: bool) -> None:
    # A thread's run of the loop ends with a call of its runtime in flight (or started and not
    # yet handed to the runtime), and the thread ends: its runtime goes, with the call. The
    # loop, run again elsewhere, must not wait for that call for ever: it gets a
    # TransportError (its request may have been sent), soon, and the loop's other calls go on.
    # `late`: the thread ends 0.3 s after the loop runs here again (so does a thread's
    # runtime, with a real `join()`: it is dropped after `join()` returns).
    loop = asyncio.new_event_loop()
    left: list[asyncio.Future[fxpay.Quote]] = []
    ran = threading.Event()

    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")

        async def leave() -> None:
            await c.get_quote_async(qid)  # this thread's runtime, watched
            if handed:
                sb.delay_next(f"/v1/payments/quotes/{qid}", 2)
            left.append(asyncio.ensure_future(c.get_quote_async(qid)))
            if handed:
                await asyncio.sleep(0.05)  # the run that hands it to the runtime has come
            # Else the task makes its call in the loop's last pass here, and the run that would
            # hand it to this thread's runtime is left for the loop's next pass (elsewhere).

        def there() -> None:
            try:
                loop.run_until_complete(leave())
            finally:
                ran.set()
            if late:
                time.sleep(0.3)

        t = threading.Thread(target=there)
        t.start()
        assert ran.wait(60)
        if not late:
            t.join(60)
        try:
            started = time.monotonic()
            with pytest.raises(fxpay.TransportError, match="thread"):
                loop.run_until_complete(asyncio.wait_for(left[0], 10))
            took = time.monotonic() - started
            again = loop.run_until_complete(asyncio.wait_for(c.get_quote_async(qid), 10))
        finally:
            loop.close()
            t.join(60)
    assert took < 1.5
    assert again.id == qid


def _in_epoll_set(loop: asyncio.AbstractEventLoop, fds: list[int]) -> list[int]:
    """Those of `fds` in the loop's own epoll set (its /proc fdinfo lists each as `tfd:`)."""
    epoll = loop._selector.fileno()  # type: ignore[attr-defined]
    with open(f"/proc/self/fdinfo/{epoll}") as info:
        registered = {int(line.split()[1]) for line in info if line.startswith("tfd:")}
    return [fd for fd in fds if fd in registered]


def _watched_runtimes(loop: asyncio.AbstractEventLoop) -> list[int]:
    """The open epoll descriptors the loop watches with fxpay's runner (a selector loop)."""
    keys = loop._selector.get_map().values()  # type: ignore[attr-defined]
    fds = [k.fd for k in keys if type(k.data[0]._callback).__name__ == "RunReady"]
    return [fd for fd in fds if _link(fd) == "anon_inode:[eventpoll]"]


def _link(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def test_the_loops_come_and_go_on_one_thread(sb: Sandbox) -> None:
    # One runtime per thread, one loop after another (as pytest-asyncio makes them): each
    # loop's calls end on that loop, and a loop closed with calls pending leaves nothing for
    # the next.
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")

        async def some(n: int) -> set[str]:
            return {q.id for q in await asyncio.gather(*(c.get_quote_async(qid) for _ in range(n)))}

        left: list[asyncio.Future[fxpay.Quote]] = []

        async def abandoned() -> None:
            sb.delay_next(f"/v1/payments/quotes/{qid}", 1)
            left.append(asyncio.ensure_future(c.get_quote_async(qid)))
            await asyncio.sleep(0.05)

        for _ in range(3):
            assert asyncio.run(some(8)) == {qid}
            loop = asyncio.new_event_loop()
            loop.run_until_complete(abandoned())
            loop.close()
        time.sleep(1.2)
        assert asyncio.run(some(8)) == {qid}


def test_fxpay_await_on_loop_0_keeps_calls_on_the_shared_runtime(sb: Sandbox) -> None:
    code = """
    import asyncio, json, logging, sys, threading
    import fxpay
    names = []
    class H(logging.Handler):
        def emit(self, record):
            if "quotes/" in record.getMessage():
                names.append(threading.get_ident() == threading.main_thread().ident)
    log = logging.getLogger("fxpay")
    log.addHandler(H())
    log.setLevel(logging.DEBUG)
    base, cid, secret = sys.argv[1:4]
    async def main():
        async with fxpay.Client(cid, secret, base_url=base) as c:
            qid = await c.create_quote_async(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
            await asyncio.gather(*(c.get_quote_async(qid) for _ in range(5)))
    asyncio.run(main())
    print(json.dumps(sorted(set(names))))
    """
    # Whether each attempt ran on the loop's (main) thread.
    for value, expected in (("0", [False]), ("1", [True])):
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), sb.base_url, sb.client_id, sb.client_secret],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "FXPAY_AWAIT_ON_LOOP": value},
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected, (value, done.stdout)

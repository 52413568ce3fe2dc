"""What a task awaiting a call waits on (crates/fxpay-python/src/bridge/waiter.rs): an object of
asyncio's future protocol, resolved by the loop's port, which runs the task's wake-up at once.
What that must keep: asyncio's pure-Python task takes it as the C one does, a cancel (with its
message) reaches the call, and an exception a resumed task lets out (Ctrl-C) leaves the loop
without losing the results of the other calls resolved in the same batch."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

import fxpay
from fxpay.testing import Sandbox


@pytest.fixture(scope="module")
def sb() -> Any:
    with Sandbox() as s:
        yield s


def _py_task_loop() -> asyncio.AbstractEventLoop:
    """A loop whose tasks are asyncio's pure-Python ``Task`` (what runs where the C
    accelerator is missing), not the C one."""
    loop = asyncio.new_event_loop()
    py_task: Any = asyncio.tasks._PyTask  # type: ignore[attr-defined]
    loop.set_task_factory(lambda lp, coro, **kw: py_task(coro, loop=lp, **kw))
    return loop


@pytest.mark.parametrize("make", [asyncio.new_event_loop, _py_task_loop], ids=["c_task", "py_task"])
def test_both_task_implementations_await_a_call(sb: Sandbox, make: Any) -> None:
    loop = make()
    try:
        with sb.client() as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="EUR")

            async def main() -> list[str]:
                one = await c.get_quote_async(qid)
                many = await asyncio.gather(*(c.get_quote_async(qid) for _ in range(20)))
                return [one.id, *(q.id for q in many)]

            assert loop.run_until_complete(asyncio.wait_for(main(), 30)) == [qid] * 21
            # An error is raised in the awaiting task, typed.
            with pytest.raises(fxpay.NotFoundError):
                loop.run_until_complete(asyncio.wait_for(c.get_quote_async("no-such-quote"), 30))
    finally:
        loop.close()


@pytest.mark.parametrize("make", [asyncio.new_event_loop, _py_task_loop], ids=["c_task", "py_task"])
def test_a_cancel_with_a_message_reaches_the_call(sb: Sandbox, make: Any) -> None:
    loop = make()
    try:
        with sb.client() as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="EUR")

            async def main() -> None:
                await c.get_quote_async(qid)
                fired = sb.stats()["faults_fired"]
                sb.delay_next(f"/v1/payments/quotes/{qid}", 5)
                task = asyncio.ensure_future(c.get_quote_async(qid))
                while sb.stats()["faults_fired"] == fired:  # the request is at the sandbox
                    await asyncio.sleep(0.01)
                task.cancel("enough")
                # Not `wait_for`: on its timeout it would wait for the cancel it makes.
                done, _ = await asyncio.wait({task}, timeout=2)
                assert done, "the cancel waited for the delayed answer, or never reached the task"
                with pytest.raises(asyncio.CancelledError) as raised:
                    await task
                if sys.version_info >= (3, 11):  # 3.10's tasks drop the message on the way out
                    assert raised.value.args == ("enough",)
                # The client goes on.
                assert (await c.get_quote_async(qid)).id == qid

            loop.run_until_complete(asyncio.wait_for(main(), 30))
    finally:
        loop.close()


INTERRUPTED = textwrap.dedent(
    """
    import asyncio, json
    from fxpay.testing import Sandbox

    with Sandbox() as sb, sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="EUR")
        loop = asyncio.new_event_loop()

        async def warm():  # the connections, the token
            await asyncio.gather(*(c.get_quote_async(qid) for _ in range(21)))

        async def interrupted():
            await c.get_quote_async(qid)
            raise KeyboardInterrupt

        async def quiet():
            return (await c.get_quote_async(qid)).id

        async def start():
            # 21 answers that come close together, most of them resolved in one batch, the
            # interrupted task's anywhere in it.
            return asyncio.ensure_future(interrupted()), [asyncio.ensure_future(quiet()) for _ in range(20)]

        async def results(others):
            return await asyncio.wait_for(asyncio.gather(*others), 10)

        loop.run_until_complete(warm())
        first, others = loop.run_until_complete(start())
        try:
            loop.run_until_complete(results(others))
            left = "nothing"
        except KeyboardInterrupt:
            left = "KeyboardInterrupt"
        out = {"left": left, "first": type(first.exception()).__name__}
        try:
            out["others"] = loop.run_until_complete(results(others)) == [qid] * 20
        except BaseException as e:
            out["others"] = repr(e)
        loop.close()
        print(json.dumps(out))
    """
)


def test_an_interrupt_in_a_resumed_task_leaves_the_loop_and_loses_no_other_result() -> None:
    # In a process of its own: a KeyboardInterrupt that went astray would stop the suite.
    p = subprocess.run([sys.executable, "-c", INTERRUPTED], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # Every other call's result is there, or comes: none was dropped with the batch.
    assert json.loads(p.stdout) == {"left": "KeyboardInterrupt", "first": "KeyboardInterrupt", "others": True}, p.stderr


def test_the_waiter_is_what_the_task_waits_on(sb: Sandbox) -> None:
    """The object the coroutine yields follows the future protocol that ``asyncio.isfuture``
    names, and says where it stands."""

    async def main() -> None:
        async with sb.client() as c:
            qid = await c.create_quote_async(buy_currency="USD", buy_amount="10", sell_currency="EUR")
            coro: Any = c.get_quote_async(qid)
            assert not asyncio.isfuture(coro)
            waiter = coro.send(None)
            assert asyncio.isfuture(waiter)
            assert waiter.get_loop() is asyncio.get_running_loop()
            assert not waiter.done()
            assert not waiter.cancelled()
            with pytest.raises(asyncio.InvalidStateError):
                waiter.result()
            done = asyncio.get_running_loop().create_future()
            waiter.add_done_callback(done.set_result)
            assert await asyncio.wait_for(done, 30) is waiter
            assert waiter.done()
            assert waiter.exception() is None
            with pytest.raises(StopIteration) as stop:
                coro.send(None)
            assert stop.value.value.id == qid
            # A callback added once it is done runs too, soon.
            later = asyncio.get_running_loop().create_future()
            waiter.add_done_callback(later.set_result)
            assert await asyncio.wait_for(later, 5) is waiter
            assert not waiter.cancel()

    asyncio.run(main())


@pytest.mark.parametrize("make", [asyncio.new_event_loop, _py_task_loop], ids=["c_task", "py_task"])
def test_a_loop_that_moves_between_threads_keeps_its_calls(sb: Sandbox, make: Any) -> None:
    """``run_until_complete`` from one thread, then another, then the first again: each run's
    calls end, and a call left in flight by one run ends in the next, on the other thread."""
    loop = make()
    try:
        with sb.client() as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="EUR")
            left: list[asyncio.Future[fxpay.Quote]] = []

            async def calls() -> list[str]:
                got = [q.id for q in await asyncio.gather(*(c.get_quote_async(qid) for _ in range(8)))]
                left.append(asyncio.ensure_future(c.get_quote_async(qid)))  # still in flight
                return got

            async def last() -> str:
                return (await left.pop(0)).id

            def run(where: list[object]) -> None:
                try:
                    where.append(loop.run_until_complete(asyncio.wait_for(calls(), 30)))
                    where.append(loop.run_until_complete(asyncio.wait_for(last(), 30)) if len(left) > 1 else "")
                except BaseException as e:  # the asserts below show it
                    where.append(e)

            runs: list[list[object]] = []
            for _ in range(3):
                for _ in range(2):  # two threads, in turn
                    seen: list[object] = []
                    t = threading.Thread(target=run, args=(seen,))
                    t.start()
                    t.join(60)
                    assert not t.is_alive()
                    runs.append(seen)
            for seen in runs:
                assert seen[0] == [qid] * 8, seen
            # Each run after the first ended the call the run before it left in flight.
            assert [seen[1] for seen in runs[1:]] == [qid] * 5
            assert loop.run_until_complete(asyncio.wait_for(last(), 30)) == qid
    finally:
        loop.close()


def test_closing_a_started_calls_coroutine_abandons_the_call(sb: Sandbox) -> None:
    """A coroutine closed after its first step (a task that let go of it) abandons its call:
    the waiter it yielded is cancelled at once, its task aborted, and a later step raises."""

    async def main() -> None:
        async with sb.client() as c:
            coro: Any = c.get_quote_async("3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f")
            waiter = coro.send(None)
            assert not waiter.done()  # resolved only on this loop's thread, which has not run yet
            assert repr(waiter) == "<fxpay waiter done=false>"
            coro.close()
            assert waiter.done()
            assert waiter.cancelled()
            assert repr(waiter) == "<fxpay waiter done=true>"
            with pytest.raises(RuntimeError, match="cannot reuse"):
                coro.send(None)

    asyncio.run(main())


def test_the_waiter_keeps_asyncios_blocking_flag(sb: Sandbox) -> None:
    """``_asyncio_future_blocking`` as an asyncio future keeps it: set when the coroutine
    yields the waiter, cleared by the task that takes it (a waiter a task finds not set was
    yielded by a bare ``yield``, which the task refuses)."""

    async def main() -> None:
        async with sb.client() as c:
            coro: Any = c.get_quote_async("3f2b6a1e-9c1d-4d7a-8b0e-2f6f1c2d3e4f")
            waiter = coro.send(None)
            assert waiter._asyncio_future_blocking is True
            waiter._asyncio_future_blocking = False
            assert waiter._asyncio_future_blocking is False
            coro.close()

    asyncio.run(main())

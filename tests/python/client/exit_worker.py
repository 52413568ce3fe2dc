"""One interpreter life on a loop without ``add_reader`` (as Windows' proactor loop), ended
with awaitable calls still running: the runtime's threads finish them while the interpreter
exits. Run by test_exit_on_the_fallback_loop.py, which reads the exit status and stderr.

Usage: python exit_worker.py N   (N calls; the first is awaited, the rest are in flight at exit)
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from fxpay.testing import Sandbox


class NoReaderLoop(asyncio.SelectorEventLoop):
    """Windows' ``ProactorEventLoop`` has no ``add_reader``: it raises NotImplementedError."""

    def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:  # type: ignore[override]
        raise NotImplementedError


def main(n: int) -> None:
    sb = Sandbox()
    client = sb.client()
    qid = client.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")

    async def calls() -> None:
        tasks = [asyncio.ensure_future(client.get_quote_async(qid)) for _ in range(n)]
        # The first answer arrives; the rest are on their way when the loop and then the
        # interpreter end.
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    loop = NoReaderLoop()
    loop.run_until_complete(calls())
    print("ok", flush=True)
    # No close of the loop, the client or the sandbox: the interpreter exits with calls running.


if __name__ == "__main__":
    main(int(sys.argv[1]))

"""asyncio's own floor per awaited call in the async-64 shape, as CPU µs per call.

64 tasks each await a future that is made, queued, and resolved in batches from a reader
callback on a socket pair: the shape of fxpay's drain (crates/fxpay-python/src/bridge/port.rs),
with no I/O, no Rust and no HTTP. What is left is asyncio's part of an awaited call (the
task step, the future and its callback, the client's coroutine layer).

Usage: python bench/asyncio_floor.py [calls, default 200000]
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000


async def main() -> None:
    loop = asyncio.get_running_loop()
    r, w = socket.socketpair()
    r.setblocking(False)
    pending: list[asyncio.Future[int]] = []

    def drain() -> None:
        r.recv(4096)
        batch = pending[:]
        pending.clear()
        for f in batch:
            f.set_result(1)

    loop.add_reader(r.fileno(), drain)

    def call() -> asyncio.Future[int]:
        f: asyncio.Future[int] = loop.create_future()
        pending.append(f)
        if len(pending) == 1:
            w.send(b"x")  # one wake-up per batch
        return f

    async def aget() -> int:  # the client's own coroutine layer
        return await call()

    async def work(k: int) -> None:
        for _ in range(k):
            await aget()

    for timed in (False, True):  # a warm-up pass, then the timed one
        t0 = time.process_time()
        await asyncio.gather(*(work(N // 64) for _ in range(64)))
        if timed:
            print(f"asyncio floor: {(time.process_time() - t0) / N * 1e6:.2f} µs CPU per awaited call (Python {sys.version.split()[0]})")
    loop.remove_reader(r.fileno())
    r.close()
    w.close()


if __name__ == "__main__":
    asyncio.run(main())

"""A TCP proxy on 127.0.0.1 between the chaos clients and the sandbox, that the nemesis can turn
against them: close every connection idle for a moment (a pooled connection the server is
closing, seen from the client), stall every byte for a while (a network that stops: the requests held die with their
connections), or hold the answers only (the service acts; the answer comes too late).

It runs an asyncio loop on a thread of the harness's process; the nemesis calls its methods
from its own thread."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Link:
    """One client connection and its connection to the sandbox."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    last_byte: float = field(default_factory=time.monotonic)
    # True while a request went up and its answer has not come down in full; the proxy cannot
    # parse HTTP, so it takes "the last bytes went up" as "a request is out".
    busy: bool = False


class ChaosProxy:
    """Forwards ``127.0.0.1:port`` to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._links: set[_Link] = set()
        self._stall_until = 0.0
        self._hold_answers_until = 0.0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)
        self.closed_idle = 0
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the proxy did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.run_forever()

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        try:
            await asyncio.gather(self._pipe(reader, up_writer, link, up=True), self._pipe(up_reader, writer, link, up=False))
        finally:
            self._links.discard(link)
            for w in (writer, up_writer):
                w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link, *, up: bool) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                while (wait := (self._stall_until if up else max(self._stall_until, self._hold_answers_until)) - time.monotonic()) > 0:
                    await asyncio.sleep(min(wait, 0.1))
                link.last_byte = time.monotonic()
                link.busy = up
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            # One side ended: end the other, as a proxy that knows nothing of HTTP must.
            link.client.close()
            link.upstream.close()

    def close_idle(self, idle_for: float = 0.0) -> int:
        """Closes every client connection with no request out that has been quiet for
        ``idle_for`` seconds; the client sees its pooled connection closed under it."""

        async def close() -> int:
            now = time.monotonic()
            n = 0
            for link in list(self._links):
                if not link.busy and now - link.last_byte >= idle_for:
                    link.client.close()
                    link.upstream.close()
                    n += 1
            return n

        n: int = asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
        self.closed_idle += n
        return n

    def stall(self, seconds: float) -> None:
        """Holds every byte, both ways, for ``seconds`` from now."""
        self._stall_until = time.monotonic() + seconds

    def hold_answers(self, seconds: float) -> None:
        """Lets requests through but holds every answer for ``seconds`` from now: the service
        acts, and the client's answer is lost past its timeout (a true unknown)."""
        self._hold_answers_until = time.monotonic() + seconds

    def connections(self) -> int:
        return len(self._links)

    def stop(self) -> None:
        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self._links):
                link.client.close()
                link.upstream.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

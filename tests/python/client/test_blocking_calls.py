"""Blocking calls: the calling thread polls the call inside the shared runtime, whose workers
drive the sockets (crates/fxpay-python/src/bridge/block.rs). What that must not break:
connections a server closed while the thread was in Python, calls made from inside a call (a
logging handler, an ``on_token`` callback), and threads that come and go."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import fxpay

from conftest import all_at_once, login, need
from recorder_support import Recorder, serve


class IdleCloser(Recorder):
    """HTTP/1.1 with keep-alive whose connections stay open until the test closes them all at
    once (`close_idle`, between calls: as a load balancer's idle timeout does). Records
    (method, path, client port) per request.

    The server closes when the test says, not after an idle time of its own: with a timeout,
    "two calls made back to back share a connection" held only if the client's second request
    came within it (0.3 s), which a loaded CI host once missed."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, str, int]]] = []  # type: ignore[assignment]
    open_sockets: ClassVar[list[socket.socket]] = []
    guard = threading.Lock()

    def setup(self) -> None:
        super().setup()
        with type(self).guard:
            type(self).open_sockets.append(self.connection)

    @classmethod
    def close_idle(cls) -> None:
        """Closes every connection the server has open (the client is idle: all of them are)."""
        with cls.guard:
            sockets, cls.open_sockets = cls.open_sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(("POST", self.path, self.client_address[1]))
        if self.path.endswith("/oauth/token"):
            self._send({"access_token": "tok", "token_type": "Bearer", "expires_in": 3599})
        else:
            self._send({"id": f"q-{len(type(self).seen)}"})

    def do_GET(self) -> None:
        type(self).seen.append(("GET", self.path, self.client_address[1]))
        self._send(
            {
                "id": "q-1",
                "buyCurrency": "USD",
                "buyAmount": 1,
                "sellCurrency": "EUR",
                "sellAmount": 0.9,
                "customerRate": 0.9,
                "inverseCustomerRate": 1.111111,
                "fee": 0,
                "feeCurrency": "USD",
                "freebies": {"total": 0, "claimed": 0, "remaining": 0},
            }
        )


@pytest.fixture
def idle_closer() -> Iterator[str]:
    IdleCloser.seen = []
    IdleCloser.open_sockets = []
    yield from serve(IdleCloser)


def close_idle_connections() -> None:
    """The server closes its idle connections; the client, idle, gets their FIN (its runtime
    reads it at once; the wait leaves it a second)."""
    IdleCloser.close_idle()
    time.sleep(1.0)


def ports(method: str, suffix: str) -> list[int]:
    return [port for m, path, port in IdleCloser.seen if m == method and path.endswith(suffix)]


def test_a_read_after_the_server_closed_the_idle_connection(idle_closer: str) -> None:
    # No retries: a read sent on the closed connection would fail outright.
    with fxpay.Client("id", "secret", base_url=idle_closer, max_retries=0) as c:
        c.get_quote("q-1")
        # hyper-util's pool takes an HTTP/1.1 connection back from a task of the runtime's
        # workers once its answer is read; a call made at once can start a connection of its
        # own first (a clean-clone CI run on 3.13, the other xdist worker busy: ports 51134
        # and 51146). Once the pool has it back, the next call uses it.
        time.sleep(0.05)
        c.get_quote("q-1")
        for _ in range(3):
            close_idle_connections()  # while the client is idle
            assert c.get_quote("q-1").id == "q-1"
    gets = ports("GET", "/payments/quotes/q-1")
    assert len(gets) == 5
    assert gets[0] == gets[1], "kept alive between two calls"
    assert len(set(gets[1:])) == 4, f"each call after idling used a new connection: {gets}"


def test_a_create_after_the_server_closed_the_idle_connection(idle_closer: str) -> None:
    with fxpay.Client("id", "secret", base_url=idle_closer, max_retries=0) as c:
        ids = []
        for _ in range(3):
            ids.append(c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR"))
            close_idle_connections()
    assert len(ids) == 3
    assert len(ports("POST", "/payments/quotes")) == 3, "each quote was sent once"


class CallsBack(logging.Handler):
    """On its first DEBUG line, makes a blocking call (from whatever thread logs it)."""

    def __init__(self, call: Any) -> None:
        super().__init__()
        self.call, self.started, self.results = call, False, []  # type: list[Any]

    def emit(self, record: logging.LogRecord) -> None:
        if not self.started:
            self.started = True
            self.results.append(self.call())


@pytest.fixture
def debug_handler() -> Iterator[Any]:
    log = logging.getLogger("fxpay")
    added: list[logging.Handler] = []
    level = log.level
    log.setLevel(logging.DEBUG)

    def add(handler: logging.Handler) -> logging.Handler:
        log.addHandler(handler)
        added.append(handler)
        return handler

    yield add
    for h in added:
        log.removeHandler(h)
    log.setLevel(level)


def test_a_blocking_call_from_a_log_handler_inside_a_call(
    fxpay_client: fxpay.Client, debug_handler: Any, caplog: pytest.LogCaptureFixture
) -> None:
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    # The DEBUG line is written on the caller's thread, inside its call, and the handler
    # holds its lock meanwhile: the inner call's own line must not wait for that lock.
    handler = debug_handler(CallsBack(lambda: fxpay_client.get_quote(qid)))
    caplog.clear()
    outer = fxpay_client.get_quote(qid)
    assert [q.id for q in handler.results] == [qid]
    assert outer.id == qid
    gets = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"GET /v1/payments/quotes/{qid}")]
    assert len(gets) == 2, gets  # the outer call's line and the inner call's, none lost


async def test_a_blocking_call_from_a_log_handler_inside_an_awaitable_call(fxpay_client: fxpay.Client, debug_handler: Any) -> None:
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    # Here the DEBUG line is written on a runtime thread: the blocking call made there must
    # neither deadlock the runtime nor fail.
    handler = debug_handler(CallsBack(lambda: fxpay_client.get_quote(qid)))
    outer = await asyncio.wait_for(fxpay_client.get_quote_async(qid), 10)
    assert [q.id for q in handler.results] == [qid]
    assert outer.id == qid
    assert (await fxpay_client.get_quote_async(qid)).id == qid


def test_a_blocking_call_from_on_token(fxpay_sandbox: Any, fxpay_client: fxpay.Client) -> None:
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    token = fxpay_client.exchange_code(*login(fxpay_sandbox, fxpay_client))
    stale = fxpay.Token.from_dict({**token.to_dict(), "expires_at": 0})
    read_inside: list[str] = []
    session = fxpay_client.user_session(stale, on_token=lambda t: read_inside.append(fxpay_client.get_quote(qid).id))
    assert session.list_virtual_accounts()
    assert read_inside == [qid]


def open_fds(sandbox_port: int | None = None) -> int:
    """This process's descriptors; with ``sandbox_port``, less the sockets that are not
    connected to the sandbox (another test's background work, such as a journal undo retrying
    against a Redis that is gone, opens and closes sockets of its own meanwhile)."""
    fds = set(os.listdir("/proc/self/fd"))
    if sandbox_port is None:
        return len(fds)
    psutil = need("psutil")

    def port(addr: Any) -> int | None:
        return getattr(addr, "port", None) if addr else None

    others = {
        str(c.fd) for c in psutil.Process().net_connections(kind="all") if c.fd >= 0 and sandbox_port not in (port(c.laddr), port(c.raddr))
    }
    return len(fds - others)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_threads_that_come_and_go_leave_nothing_behind(fxpay_client: fxpay.Client) -> None:
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    fxpay_client.get_quote(qid)
    sandbox_port = int(fxpay_client.base_url.rsplit(":", 1)[1].split("/", 1)[0])
    before = open_fds(sandbox_port)
    for _ in range(6):
        all_at_once(8, lambda: fxpay_client.get_quote(qid))
    gc.collect()
    # 48 threads came and went, at most 8 calls at a time: the pool keeps at most the 8
    # connections they used at once, each two descriptors here (the embedded sandbox serves
    # in this process), and no thread left anything of its own (one descriptor per thread
    # would be 48 more).
    grown = open_fds(sandbox_port) - before
    assert grown <= 16, f"{grown} descriptors more after 48 threads came and went"
    assert fxpay_client.get_quote(qid).id == qid


async def test_an_awaitable_create_after_a_blocking_one_on_the_same_client(fxpay_sandbox: Any) -> None:
    """Blocking and awaitable calls of one client share its connections: a connection that a
    blocking create used is picked up by the awaitable create after it (here the thread is
    running the event loop), and must be driven by the runtime's workers, not by the thread
    that made the blocking call, or the awaitable would wait until its timeout."""
    with fxpay_sandbox.client(timeout=5.0, max_retries=0) as c:
        c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        started = time.monotonic()
        for _ in range(3):
            await asyncio.wait_for(c.create_quote_async(buy_currency="USD", buy_amount=10, sell_currency="EUR"), 20)
            c.get_quote(c.create_quote(buy_currency="USD", buy_amount=11, sell_currency="EUR"))
        # Each call is milliseconds on loopback; a stuck connection costs the 5 s timeout.
        assert time.monotonic() - started < 4.0

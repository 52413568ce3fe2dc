"""Issue 52: a creating call under an idempotency key never goes out on a pooled keep-alive
connection the server may be closing (its idle timeout), so none ends ``unknown`` although the
server read nothing of it.

``IdleCloser`` is a TCP proxy on 127.0.0.1 in front of the sandbox that plays a server whose
idle timeout fires exactly as the next request arrives: on a connection idle for longer than
``idle`` seconds, the first bytes of a new request are dropped and the connection is reset.
That is the race at its worst: the client has written its request, the server read none of it."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

import fxpay
from fxpay.testing import Sandbox


class IdleCloser:
    """A byte-for-byte proxy to ``upstream`` that resets a client connection which sends
    after having been idle (no byte either way) for longer than ``idle`` seconds."""

    def __init__(self, upstream: tuple[str, int], idle: float) -> None:
        self.upstream = upstream
        self.idle = idle
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port: int = self.sock.getsockname()[1]
        self.connections = 0
        self.resets = 0
        self.stopped = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.pipe, args=(conn,), daemon=True).start()

    def pipe(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.upstream) as up:
            last = time.monotonic()
            answered = False  # a fresh connection is never "idle", however slow its first request
            peers = {conn: up, up: conn}
            while not self.stopped:
                ready, _, _ = select.select(list(peers), [], [], 30)
                if not ready:
                    return
                for s in ready:
                    try:
                        data = s.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    now = time.monotonic()
                    if s is conn and answered and now - last > self.idle:
                        # The server's idle timeout: nothing of the request is read, and the
                        # connection goes (a reset, as a server that closes with unread data).
                        self.resets += 1
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        return
                    last = now
                    answered = answered or s is up
                    try:
                        peers[s].sendall(data)
                    except OSError:
                        return

    def close(self) -> None:
        self.stopped = True
        self.sock.close()


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


def test_no_keyed_create_ends_unknown_on_a_connection_the_server_is_closing(sandbox: Sandbox) -> None:
    # 300 ms idle is a "server idle timeout" above the client's 250 ms of reuse for creating
    # calls (http_client.rs's FRESH), and below the 400 ms pause between the creates below.
    host, port = sandbox.base_url.removeprefix("http://").rsplit(":", 1)
    proxy = IdleCloser((host, int(port)), idle=0.3)
    journal = fxpay.MemoryJournal()
    client = fxpay.Client(
        sandbox.client_id,
        sandbox.client_secret,
        base_url=f"http://127.0.0.1:{proxy.port}",
        journal=journal,
        max_retries=0,
    )
    outcomes: dict[str, int] = {"done": 0, "unknown": 0, "released": 0, "other": 0}
    try:
        for i in range(15):
            time.sleep(0.4)
            key = f"stale-{i}"
            with contextlib.suppress(fxpay.FxPayError):  # the journal's entry tells the outcome
                client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key=key)
            entry = journal.get(key)
            state = entry.state if entry is not None else "other"
            outcomes[state if state in outcomes else "other"] += 1
    finally:
        client.close()
        proxy.close()
    # The proxy did reset connections: the race was there to lose.
    assert proxy.resets > 0 or proxy.connections >= 15, (proxy.resets, proxy.connections)
    assert outcomes == {"done": 15, "unknown": 0, "released": 0, "other": 0}, (outcomes, proxy.resets)


def test_creates_made_within_the_reuse_window_share_a_connection(sandbox: Sandbox) -> None:
    """Creates 100 ms apart (a batch a group commit lets go, a loop that waits on its disk)
    reuse the connection the last one answered on: one connection for 12 creates. Keyed
    creates at async 64 over TLS opened a new connection for 0.4 of their calls while the
    window was 5 ms (bench/README.md)."""
    host, port = sandbox.base_url.removeprefix("http://").rsplit(":", 1)
    proxy = IdleCloser((host, int(port)), idle=30.0)  # a server that closes nothing here
    journal = fxpay.MemoryJournal()
    client = fxpay.Client(
        sandbox.client_id, sandbox.client_secret, base_url=f"http://127.0.0.1:{proxy.port}", journal=journal, max_retries=0
    )
    try:
        client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="warm")
        before = proxy.connections
        for i in range(12):
            time.sleep(0.1)
            client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key=f"near-{i}")
        assert proxy.connections - before <= 1, proxy.connections - before
        # Past the window, a create takes a new connection.
        time.sleep(0.6)
        before = proxy.connections
        client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="after-pause")
        assert proxy.connections - before == 1
    finally:
        client.close()
        proxy.close()

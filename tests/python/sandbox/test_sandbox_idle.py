"""Idle connections are closed after the sandbox's idle timeout (issue 23, item 6).

Raw sockets over loopback: some open and stay silent, some send one keep-alive request, read
its answer and then stay silent. Every one of them is closed by the sandbox once the idle
timeout has passed, and none before. A request in progress (a delayed answer) is never cut.
"""

from __future__ import annotations

import inspect
import json
import os
import selectors
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest

import fxpay
from fxpay.testing import Sandbox

IDLE = 1.5
SILENT = 100
KEPT_ALIVE = 100


def _host_port(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _answer(s: socket.socket) -> bytes:
    """One whole answer (head and Content-Length body) read from a kept-alive connection."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(65536)
        assert chunk, f"closed before the answer: {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = s.recv(65536)
        assert chunk, f"closed in the middle of the answer: {answer!r}"
        body += chunk
    assert len(body) == length, "more bytes than the answer"
    return head


def _kept_alive(addr: tuple[str, int]) -> socket.socket:
    """A connection that has had one answer (HTTP/1.1, kept alive) and sends nothing more."""
    s = socket.create_connection(addr, timeout=30)
    s.sendall(b"GET /v1/no-such-path HTTP/1.1\r\nHost: sandbox\r\n\r\n")
    head = _answer(s)
    assert head.startswith(b"HTTP/1.1 404"), head
    assert b"connection: close" not in head.lower()
    return s


def _closed_at(socks: list[socket.socket], timeout: float) -> dict[socket.socket, float | None]:
    """When each socket was closed by the server (monotonic time), or None if still open."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    closed: dict[socket.socket, float | None] = dict.fromkeys(socks)
    deadline = time.monotonic() + timeout
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            assert data == b"", data
            closed[s] = time.monotonic()
            sel.unregister(s)
    sel.close()
    return closed


def test_idle_sockets_are_closed_after_the_idle_timeout() -> None:
    with Sandbox(idle_timeout=IDLE) as sb:
        addr = _host_port(sb.base_url)
        started = time.monotonic()
        socks = [socket.create_connection(addr, timeout=30) for _ in range(SILENT)]
        socks += [_kept_alive(addr) for _ in range(KEPT_ALIVE)]
        ready = time.monotonic()
        try:
            closed = _closed_at(socks, timeout=IDLE * 10)
        finally:
            for s in socks:
                s.close()
        still_open = [s for s, t in closed.items() if t is None]
        assert not still_open, f"{len(still_open)} of {len(socks)} idle sockets are still open after {IDLE * 10} s"
        times = [t for t in closed.values() if t is not None]
        # None was closed before the idle timeout had passed since its last activity (the
        # first socket opened at `started`, the last kept-alive answer came before `ready`),
        # and all were closed soon after it.
        assert min(times) - started >= IDLE * 0.9, min(times) - started
        assert max(times) - ready <= IDLE + 3.0, max(times) - ready
        # The sandbox still serves new connections.
        c = sb.client()
        c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")


def test_a_connection_in_use_is_not_closed() -> None:
    # A client that keeps sending requests more often than the idle timeout keeps its
    # connection, and a request whose answer takes longer than the idle timeout is not cut.
    with Sandbox(idle_timeout=IDLE) as sb:
        c = sb.client()
        quote_id = c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")
        s = socket.create_connection(_host_port(sb.base_url), timeout=30)
        bearer = c._payments_token().access_token
        sb.delay_next(f"/v1/payments/quotes/{quote_id}", IDLE * 2)
        t0 = time.monotonic()
        s.sendall(f"GET /v1/payments/quotes/{quote_id} HTTP/1.1\r\nHost: sandbox\r\nAuthorization: Bearer {bearer}\r\n\r\n".encode())
        head = _answer(s)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert time.monotonic() - t0 >= IDLE * 2 * 0.9
        for _ in range(4):
            time.sleep(IDLE / 2)
            s.sendall(b"GET /v1/no-such-path HTTP/1.1\r\nHost: sandbox\r\n\r\n")
            assert _answer(s).startswith(b"HTTP/1.1 404")
        s.close()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 1e9])
def test_the_idle_timeout_must_be_a_positive_number_of_seconds(bad: float) -> None:
    with pytest.raises(fxpay.ConfigurationError, match="idle_timeout"):
        Sandbox(idle_timeout=bad)


def test_the_idle_timeout_must_be_a_number() -> None:
    with pytest.raises(TypeError, match=r"^idle_timeout must be a number of seconds"):
        Sandbox(idle_timeout="1")  # type: ignore[arg-type]


def test_the_default_idle_timeout_is_60_seconds() -> None:
    assert inspect.signature(Sandbox).parameters["idle_timeout"].default == 60.0
    # The served rules (the docs' "Sandbox rules" page) carry the default the sandbox runs with.
    with Sandbox() as sb:
        rules = [r for t in _rules(sb) for r in t["rules"] if r.get("key") == "idle_timeout"]
        assert [(r["value"], r["unit"]) for r in rules] == [(60, "s")]


def _rules(sb: Sandbox) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{sb.base_url}/openapi.json", timeout=10) as r:
        return list(json.load(r)["x-fxpay-rules"])


def test_the_command_line_takes_idle_timeout() -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [sys.executable, "-m", "fxpay.sandbox", "--port", "0", "--idle-timeout", str(IDLE)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert p.stdout is not None
        base_url = p.stdout.readline().strip().removeprefix("FXPAY_BASE_URL=")
        assert base_url.startswith("http://127.0.0.1:"), base_url
        addr = _host_port(base_url)
        socks = [socket.create_connection(addr, timeout=30) for _ in range(5)] + [_kept_alive(addr)]
        started = time.monotonic()
        try:
            closed = _closed_at(socks, timeout=IDLE * 10)
        finally:
            for s in socks:
                s.close()
        assert all(t is not None for t in closed.values()), closed
        assert max(t for t in closed.values() if t is not None) - started <= IDLE + 3.0
    finally:
        p.terminate()
        p.wait(timeout=30)


@pytest.mark.parametrize("alpn", ["http/1.1", "h2"])
def test_idle_tls_connections_are_closed_too(alpn: str) -> None:
    # Over https the same rule holds after the TLS handshake, for HTTP/1.1 and HTTP/2 alike.
    import ssl

    with Sandbox(tls=True, idle_timeout=IDLE) as sb:
        assert sb.ca_bundle is not None
        ctx = ssl.create_default_context(cafile=sb.ca_bundle)
        ctx.set_alpn_protocols([alpn])
        host, port = sb.base_url.removeprefix("https://").rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=30)
        tls = ctx.wrap_socket(raw, server_hostname=host)
        assert tls.selected_alpn_protocol() == alpn
        if alpn == "h2":
            tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        started = time.monotonic()
        tls.settimeout(IDLE * 10)
        try:
            while tls.recv(65536):  # the server's SETTINGS (h2), then the close
                pass
        except (ConnectionResetError, ssl.SSLError):
            pass
        elapsed = time.monotonic() - started
        tls.close()
        assert IDLE * 0.9 <= elapsed <= IDLE + 3.0, elapsed

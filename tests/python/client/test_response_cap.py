"""Issue 54 item 1: ``Client(max_response_bytes=...)`` caps every answer's body. A larger
``Content-Length`` fails before any of the body is read; a body without one (chunked, endless)
fails as soon as it passes the cap. Either is a ``TransportError`` (``OutcomeUnknownError`` under
an idempotency key) naming the cap and how to raise it, and the client's memory stays within a
few MB of the cap (measured as the peak RSS of a child process: the memory is Rust's).

``HugeServer`` is a raw HTTP/1.1 server on 127.0.0.1: it issues tokens, and answers every
other request with a huge body; it sends at most ``SENT_AT_MOST`` bytes of it, then holds the
connection, so a client without a cap would wait (and hold that much) rather than eat the
machine."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

import fxpay

SENT_AT_MOST = 64 * 1024 * 1024
CHUNK = b"x" * 65536
TOKEN = json.dumps({"access_token": "t0k3n", "token_type": "Bearer", "expires_in": 3600}).encode()


class HugeServer:
    """``mode``: "length" (a 1 GB Content-Length) or "chunked" (an endless chunked body)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        threading.Thread(target=self.accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                length = next((int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length:")), 0)
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                if "/oauth/token" in lines[0]:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(TOKEN) + TOKEN)
                    continue
                self.huge(conn)
                return

    def huge(self, conn: socket.socket) -> None:
        if self.mode == "length":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
            piece = CHUNK
        else:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            piece = b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
        try:
            conn.sendall(head)
            sent = 0
            while sent < SENT_AT_MOST and not self.stopped.is_set():
                conn.sendall(piece)
                sent += len(CHUNK)
            # Held open: a client without a cap waits here for its timeout.
            self.stopped.wait(60)
        except OSError:
            return

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture(params=["length", "chunked"])
def huge(request: pytest.FixtureRequest) -> Iterator[HugeServer]:
    server = HugeServer(request.param)
    yield server
    server.close()


CHILD = """
import resource, sys, time
import fxpay
client = fxpay.Client("id", "secret", base_url=sys.argv[1], timeout=20.0, max_retries=0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
try:
    client.get_quote("q-1")
    outcome = "answered"
except fxpay.FxPayError as e:
    outcome = type(e).__name__ + ": " + str(e)
took = time.monotonic() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(repr((outcome, took, (after - before) * 1024)))
"""


def test_a_huge_answer_fails_fast_within_the_cap(huge: HugeServer) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, huge.base_url], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    outcome, took, grown = eval(done.stdout.strip().splitlines()[-1])
    cap = 8 * 1024 * 1024
    assert outcome.startswith("TransportError: "), outcome
    assert "max_response_bytes of 8388608 bytes" in outcome, outcome
    assert "Client(max_response_bytes=...)" in outcome, outcome
    if huge.mode == "length":
        assert "1000000000 bytes (its Content-Length)" in outcome, outcome
    # Fast: not the 20 s timeout (generous for a loaded host).
    assert took < 10.0, took
    # Within a few MB of the cap (the peak RSS grew by at most cap + 8 MB).
    assert grown < cap + 8 * 1024 * 1024, grown


def test_a_keyed_create_with_a_huge_answer_is_outcome_unknown(huge: HugeServer) -> None:
    journal = fxpay.MemoryJournal()
    with (
        fxpay.Client("id", "secret", base_url=huge.base_url, journal=journal, max_response_bytes=1024) as client,
        pytest.raises(fxpay.OutcomeUnknownError) as caught,
    ):
        client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="big-1")
    cause = caught.value.__cause__
    assert isinstance(cause, fxpay.TransportError), repr(cause)
    assert "max_response_bytes of 1024 bytes" in str(cause)
    entry = journal.get("big-1")
    assert entry is not None
    assert entry.state == "unknown"


def test_a_small_cap_still_takes_answers_within_it() -> None:
    from fxpay.testing import Sandbox

    with Sandbox() as sb, sb.client(max_response_bytes=4096) as client:
        qid = client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD")
        assert client.get_quote(qid).id == qid
    with (
        Sandbox() as sb,
        sb.client(max_response_bytes=64) as client,
        pytest.raises(fxpay.TransportError, match="max_response_bytes of 64 bytes"),
    ):
        client.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD")


@pytest.mark.parametrize("bad", ["8MB", 1.5, None, True, Decimal(10)])
def test_max_response_bytes_of_a_wrong_type_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="max_response_bytes must be an int"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", max_response_bytes=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, -(2**70)])
def test_max_response_bytes_of_zero_or_less_is_a_configuration_error(bad: int) -> None:
    with pytest.raises(fxpay.ConfigurationError, match="max_response_bytes"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", max_response_bytes=bad)


def test_time_to_fail_is_not_the_body_size() -> None:
    # A sanity check of the server itself: it does stream (so the tests above measure the client).
    server = HugeServer("chunked")
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n")
            got = 0
            deadline = time.monotonic() + 30
            while got < 1024 * 1024 and time.monotonic() < deadline:
                got += len(s.recv(65536))
        assert got >= 1024 * 1024
    finally:
        server.close()

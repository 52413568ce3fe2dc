"""Issue 52: a keyed create that an HTTP/2 server proves it did not process
(``RST_STREAM(REFUSED_STREAM)``, or a ``GOAWAY`` whose last stream is below it) is not left
``unknown``: with no retry left its journal entry is ``released`` (the key may be used again),
and with retries it is sent again. A TLS server on 127.0.0.1 (ALPN ``h2``, the Python ``h2``
package) that issues tokens and treats the first create as ``mode`` says.
crates/fxpay-core/tests/transport_h2_refused.rs covers the transport's side."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest

import fxpay

TOKEN = json.dumps({"access_token": "t0k3n", "token_type": "Bearer", "expires_in": 3600}).encode()


class H2Server:
    """``mode``: "refuse" (RST_STREAM REFUSED_STREAM) or "goaway" (GOAWAY naming the last
    stream the connection answered, below the create's) for the first create; later creates
    get a 500 (so a retry shows as a second create)."""

    def __init__(self, cert: tuple[Path, Path], mode: str) -> None:
        self.mode = mode
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert[0]), str(cert[1]))
        self.context.set_alpn_protocols(["h2"])
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.creates = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(raw,), daemon=True).start()

    def serve(self, raw: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            return
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        paths: dict[int, str] = {}
        answered = 0
        with tls:
            try:
                tls.sendall(conn.data_to_send())
                while True:
                    data = tls.recv(65536)
                    if not data:
                        return
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.RequestReceived):
                            paths[event.stream_id] = dict(event.headers).get(b":path", b"").decode()
                        elif isinstance(event, h2.events.DataReceived):
                            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        elif isinstance(event, h2.events.StreamEnded):
                            answered = self.answer(conn, event.stream_id, paths.get(event.stream_id, ""), answered)
                    tls.sendall(conn.data_to_send())
            except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
                return

    def answer(self, conn: h2.connection.H2Connection, stream_id: int, path: str, answered: int) -> int:
        if path.endswith("/oauth/token"):
            conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/json")])
            conn.send_data(stream_id, TOKEN, end_stream=True)
            return stream_id
        with self.lock:
            self.creates += 1
            first = self.creates == 1
        if first and self.mode == "refuse":
            conn.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
            return answered
        if first and self.mode == "goaway":
            conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=answered)
            return answered
        conn.send_headers(stream_id, [(":status", "500"), ("content-type", "application/json")])
        conn.send_data(stream_id, b'{"errors":[]}', end_stream=True)
        return stream_id

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("h2-cert")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(params=["refuse", "goaway"])
def server(request: pytest.FixtureRequest, cert: tuple[Path, Path]) -> Iterator[H2Server]:
    s = H2Server(cert, request.param)
    yield s
    s.close()


def client(server: H2Server, cert: tuple[Path, Path], journal: fxpay.Journal, retries: int) -> fxpay.Client:
    return fxpay.Client(
        "id", "secret", base_url=f"https://127.0.0.1:{server.port}", ca_bundle=str(cert[0]), journal=journal, max_retries=retries
    )


def test_an_unprocessed_keyed_create_is_released_not_unknown(server: H2Server, cert: tuple[Path, Path]) -> None:
    journal = fxpay.MemoryJournal()
    with client(server, cert, journal, 0) as c, pytest.raises(fxpay.TransportError) as caught:
        c.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="h2-1")
    assert not isinstance(caught.value, fxpay.OutcomeUnknownError), repr(caught.value)
    entry = journal.get("h2-1")
    assert entry is None or entry.state == "released", entry
    assert server.creates == 1


def test_an_unprocessed_keyed_create_is_sent_again(server: H2Server, cert: tuple[Path, Path]) -> None:
    journal = fxpay.MemoryJournal()
    # The second create gets a 500 (unknown under a key: it was processed): what matters is
    # that it was sent, after the first was proved unprocessed.
    with client(server, cert, journal, 2) as c, pytest.raises(fxpay.OutcomeUnknownError, match=r"HTTP 500"):
        c.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key="h2-2")
    assert server.creates == 2

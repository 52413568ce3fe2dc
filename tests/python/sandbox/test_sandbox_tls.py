"""The sandbox over https: a CA and a certificate made at start, trusted by `sb.client()`,
refused by a client without that CA, and the https-only rule end to end with a name that is
not loopback."""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import fxpay

from served_support import remote, served

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def sb() -> Iterator[fxpay.testing.Sandbox]:
    with fxpay.testing.Sandbox(tls=True) as s:
        yield s


def test_serves_https_with_a_ca_file(sb: fxpay.testing.Sandbox) -> None:
    assert sb.base_url.startswith("https://127.0.0.1:")
    assert sb.ca_bundle is not None
    pem = Path(sb.ca_bundle).read_text()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    # The CA verifies the served chain with Python's own TLS stack, for the loopback names.
    ctx = ssl.create_default_context(cafile=sb.ca_bundle)
    port = int(sb.base_url.rsplit(":", 1)[1])
    for name in ("localhost", "127.0.0.1"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=name) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        assert c.get_quote(qid).buy_amount == 10
    # The embedded sandbox's approve trusts its CA too.
    with sb.client() as c:
        redirect = sb.approve(c.authorization_url(sb.redirect_uri).url)
        assert redirect.startswith(sb.redirect_uri)


def test_plain_sandbox_has_no_ca() -> None:
    with fxpay.testing.Sandbox() as s:
        assert s.base_url.startswith("http://")
        assert s.ca_bundle is None


def test_a_client_without_the_ca_gets_a_transport_error(sb: fxpay.testing.Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with (
        fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, max_retries=0) as c,
        pytest.raises(fxpay.TransportError, match="certificate"),
    ):
        c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    assert sb.stats()["requests"] == 0
    with pytest.raises(TypeError, match="tls"):
        fxpay.testing.Sandbox(tls="yes")  # type: ignore[arg-type]


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback that sends every tunnel to one port of 127.0.0.1 and
    records the targets it was asked for: it stands in for the name resolution of a name
    that is not loopback, without touching the machine's resolver."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.targets: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.tunnel, args=(conn,), daemon=True).start()

    def tunnel(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            line = head.split(b"\r\n", 1)[0].decode()
            method, target, _ = line.split(" ", 2)
            if method != "CONNECT":
                conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            self.targets.append(target)
            with socket.create_connection(("127.0.0.1", self.port)) as up:
                conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                socks = [conn, up]
                while True:
                    ready, _, _ = select.select(socks, [], [], 30)
                    if not ready:
                        return
                    for s in ready:
                        data = s.recv(65536)
                        if not data:
                            return
                        (up if s is conn else conn).sendall(data)

    def close(self) -> None:
        self.sock.close()


def test_https_to_a_name_that_is_not_loopback(sb: fxpay.testing.Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    port = int(sb.base_url.rsplit(":", 1)[1])
    proxy = ConnectProxy(port)
    try:
        for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        url = f"https://fxpay-sandbox.test:{port}"
        # Plain http to that name is refused before any connection: the https-only rule.
        with pytest.raises(fxpay.ConfigurationError, match="https"):
            fxpay.Client(sb.client_id, sb.client_secret, base_url=f"http://fxpay-sandbox.test:{port}")
        assert sb.ca_bundle is not None
        with fxpay.Client(sb.client_id, sb.client_secret, base_url=url, ca_bundle=sb.ca_bundle) as c:
            qid = c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
            assert c.get_quote(qid).id == qid
        assert proxy.targets
        assert set(proxy.targets) == {f"fxpay-sandbox.test:{port}"}
        # The certificate is checked against the name: one it does not cover is refused.
        with (
            fxpay.Client(sb.client_id, sb.client_secret, base_url=f"https://other.test:{port}", ca_bundle=sb.ca_bundle, max_retries=0) as c,
            pytest.raises(fxpay.TransportError, match="certificate"),
        ):
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        assert f"other.test:{port}" in proxy.targets
        # ...and so is the right name without the CA.
        with (
            fxpay.Client(sb.client_id, sb.client_secret, base_url=url, max_retries=0) as c,
            pytest.raises(fxpay.TransportError, match="certificate"),
        ):
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    finally:
        proxy.close()


def test_served_with_tls_and_driven_remotely() -> None:
    with served("--tls") as env:
        assert env["FXPAY_BASE_URL"].startswith("https://127.0.0.1:")
        ca = env["FXPAY_CA_BUNDLE"]
        assert os.path.isfile(ca)
        r = remote(env)
        assert r.ca_bundle == ca
        with r.client(max_retries=0) as c:
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
            r.fail_next("/v1/payments/quotes", 503)
            with pytest.raises(fxpay.ServerError):
                c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
            redirect = r.approve(c.authorization_url(r.redirect_uri).url)
            assert redirect.startswith(r.redirect_uri)
        assert r.stats()["paths"]["POST /v1/payments/quotes"] == 2
        # The admin API over https needs the CA as well.
        no_ca = fxpay.testing.RemoteSandbox(
            env["FXPAY_BASE_URL"],
            client_id=env["FXPAY_CLIENT_ID"],
            client_secret=env["FXPAY_CLIENT_SECRET"],
            admin_token=env["FXPAY_ADMIN_TOKEN"],
        )
        with pytest.raises(fxpay.TransportError):
            no_ca.now()
    # The CA file goes away with the server.
    assert not os.path.exists(ca)


def test_the_cli_subcommand_serves_https_too() -> None:
    with served("--tls", command=("fxpay", "sandbox")) as env:
        assert env["FXPAY_BASE_URL"].startswith("https://")
        r = remote(env)
        with r.client() as c:
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        assert r.stats()["paths"]["POST /v1/payments/quotes"] == 1

"""Issue 30 item 5 (proxy): ``Client(proxy=...)`` sends that client's requests through the
proxy, whatever ``HTTPS_PROXY``/``NO_PROXY`` say. A CONNECT proxy on loopback in front of an
https sandbox; ``HTTPS_PROXY`` names a dead port."""

from __future__ import annotations

import base64
import select
import socket
import threading
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox


class ConnectProxy:
    """A proxy on 127.0.0.1 that records each tunnel's target and each request's
    ``Proxy-Authorization``: CONNECT opens a tunnel; a request in absolute form (plain http)
    is sent on to its server in origin form, without that header, one per connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.tunnels: list[str] = []
        # (method, target, Proxy-Authorization or None) of every head the proxy read.
        self.heads: list[tuple[str, str, str | None]] = []
        self.stopped = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while not self.stopped:
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
            first, rest = head.split(b"\r\n", 1)
            method, target, version = first.decode().split(" ", 2)
            fields, body = rest.split(b"\r\n\r\n", 1)
            lines = [line for line in fields.decode().split("\r\n") if line]
            auth = next((line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("proxy-authorization:")), None)
            self.heads.append((method, target, auth))
            if method != "CONNECT":
                if not target.startswith("http://"):
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    return
                # Absolute form: on to the server in origin form, one request per connection.
                authority, _, path = target.removeprefix("http://").partition("/")
                host, port = authority.rsplit(":", 1)
                kept = [line for line in lines if line.split(":", 1)[0].lower() not in ("proxy-authorization", "connection")]
                out = "\r\n".join([f"{method} /{path} {version}", *kept, "Connection: close"]).encode() + b"\r\n\r\n" + body
                with socket.create_connection((host, int(port))) as upstream:
                    upstream.sendall(out)
                    self.pipe(conn, upstream)
                return
            self.tunnels.append(target)
            host, port = target.rsplit(":", 1)
            with socket.create_connection((host.strip("[]"), int(port))) as upstream:
                conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                self.pipe(conn, upstream)

    @staticmethod
    def pipe(conn: socket.socket, upstream: socket.socket) -> None:
        """Copies bytes both ways until either side closes or 5 s pass with none."""
        peers = {conn: upstream, upstream: conn}
        while True:
            ready, _, _ = select.select(list(peers), [], [], 5)
            if not ready:
                return
            for s in ready:
                try:
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
                except OSError:  # a peer closed its side: the tunnel is over
                    return

    def close(self) -> None:
        self.stopped = True
        self.sock.close()


def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    p = ConnectProxy()
    yield p
    p.close()


def test_the_clients_proxy_is_used_whatever_the_environment_says(proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{dead_port()}"
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with Sandbox(tls=True) as sb:
        host_port = sb.base_url.removeprefix("https://")
        # The environment's proxy is dead: a client that reads it cannot connect.
        with sb.client(max_retries=0) as c, pytest.raises(fxpay.TransportError):
            c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert proxy.tunnels == []
        with sb.client(proxy=f"http://127.0.0.1:{proxy.port}") as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
            assert c.get_quote(qid).id == qid
        assert proxy.tunnels
        assert set(proxy.tunnels) == {host_port}
        # NO_PROXY does not turn it off either.
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        before = len(proxy.tunnels)
        with sb.client(proxy=f"http://127.0.0.1:{proxy.port}") as c:
            c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert len(proxy.tunnels) > before


def test_bad_proxies_are_configuration_errors() -> None:
    for bad in ["ftp://127.0.0.1:21", "not a url", "http://", "http://127.0.0.1:3128/path"]:
        with pytest.raises(fxpay.ConfigurationError, match="proxy"):
            fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", proxy=bad)
    with pytest.raises(TypeError, match="proxy"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", proxy=3128)  # type: ignore[arg-type]


def test_a_proxys_credentials_are_sent_to_it_and_no_further(proxy: ConnectProxy) -> None:
    """``http://user:password@host:port``: percent-escapes decoded, sent as ``Basic`` in each
    CONNECT (https) and with each request in absolute form (plain http); the proxy passes
    plain-http requests on without it."""
    expected = "Basic " + base64.b64encode(b"alice:s:cret p").decode()
    url = f"http://alice:s%3Acret%20p@127.0.0.1:{proxy.port}"
    with Sandbox(tls=True) as sb, sb.client(proxy=url) as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert c.get_quote(qid).id == qid
    assert proxy.heads, "the https client did not use the proxy"
    assert {(m, a) for m, _, a in proxy.heads} == {("CONNECT", expected)}, proxy.heads
    proxy.heads.clear()
    with Sandbox() as sb:
        with sb.client(proxy=url) as c:
            qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
            assert c.get_quote(qid).id == qid
        requests = sb.stats()["requests"]
    # Every request of the plain-http client (the token, the quote, its read) went to the
    # proxy in absolute form, each with the credentials, and reached the sandbox.
    assert [(m, t.split("/v1/", 1)[1], a) for m, t, a in proxy.heads] == [
        ("POST", "oauth/token", expected),
        ("POST", "payments/quotes", expected),
        ("GET", f"payments/quotes/{qid}", expected),
    ], proxy.heads
    assert requests == 3
    assert all(t.startswith(sb.base_url + "/v1/") for _, t, _ in proxy.heads), proxy.heads

"""Issue 54 items 2 and 3 (proxies): a proxy's credentials never leave for anywhere but the
proxy (no error text or repr shows its password; a raw ``@`` in it is refused, not cut short;
an unusable ``HTTPS_PROXY`` is an error, not a direct connection); an ``https://`` proxy is
offered ``http/1.1`` alone by ALPN; ``NO_PROXY`` takes ``host:port``; a 407 is not retried; a
CONNECT carries the client's ``User-Agent``. Proxies on 127.0.0.1 in front of the sandbox."""

from __future__ import annotations

import select
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

import fxpay
from fxpay.testing import Sandbox

SECRET = "s3cr3t-PW"
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


def refused(**kwargs: object) -> fxpay.ConfigurationError:
    with pytest.raises(fxpay.ConfigurationError) as caught:
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", **kwargs)  # type: ignore[arg-type]
    return caught.value


@pytest.mark.parametrize("stray", [" ", "\t", "\n"])
def test_a_proxy_url_with_a_stray_space_is_refused_without_its_password(stray: str) -> None:
    for url in (f"http://alice:{SECRET}{stray}@127.0.0.1:3128", f"http://alice:{SECRET}@127.0.0.1:3128{stray}x"):
        err = refused(proxy=url)
        assert SECRET not in str(err), str(err)
        assert SECRET not in repr(err), repr(err)
        assert "alice:****@127.0.0.1" in str(err), str(err)


def test_a_raw_at_sign_in_a_proxy_password_is_refused_not_cut_short() -> None:
    err = refused(proxy="http://alice:p@ss-" + SECRET + "@127.0.0.1:3128")
    assert "percent-encode it as %40" in str(err), str(err)
    assert SECRET not in str(err), str(err)
    assert "p@ss" not in str(err), str(err)
    assert "alice:****@127.0.0.1:3128" in str(err), str(err)


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "HTTP_PROXY"])
def test_an_unusable_proxy_in_the_environment_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    for value in (f"http://alice:{SECRET} @127.0.0.1:3128", f"http://alice:a@{SECRET}@127.0.0.1:3128", "http://[::1"):
        monkeypatch.setenv(name, value)
        err = refused()
        assert name in str(err), str(err)
        assert SECRET not in str(err), str(err)
        assert SECRET not in repr(err), repr(err)


def test_a_proxy_without_a_scheme_in_the_environment_is_still_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # curl's and hyper-util's reading: a bare host:port is an http:// proxy.
    monkeypatch.setenv("HTTPS_PROXY", "127.0.0.1:3128")
    fxpay.Client("id", "secret", base_url="http://127.0.0.1:9").close()


class Proxy:
    """A CONNECT proxy on 127.0.0.1, plain or (with ``cert``) over TLS offering ``h2`` first
    by ALPN; with ``status=407`` it answers every CONNECT so. Records each CONNECT's head
    lines and each TLS connection's chosen ALPN protocol."""

    def __init__(self, cert: tuple[Path, Path] | None = None, status: int = 200) -> None:
        self.status = status
        self.context: ssl.SSLContext | None = None
        if cert is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(str(cert[0]), str(cert[1]))
            self.context.set_alpn_protocols(["h2", "http/1.1"])
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.heads: list[list[str]] = []
        self.alpn: list[str | None] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, raw: socket.socket) -> None:
        conn: socket.socket = raw
        try:
            if self.context is not None:
                tls = self.context.wrap_socket(raw, server_side=True)
                self.alpn.append(tls.selected_alpn_protocol())
                conn = tls
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
            self.heads.append(lines)
            if self.status != 200:
                conn.sendall(b"HTTP/1.1 %d Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n" % self.status)
                return
            host, port = lines[0].split(" ")[1].rsplit(":", 1)
            with socket.create_connection((host, int(port))) as up:
                conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                self.pipe(conn, up)
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()

    @staticmethod
    def pipe(conn: socket.socket, up: socket.socket) -> None:
        peers = {conn: up, up: conn}
        while True:
            pending = [s for s in peers if isinstance(s, ssl.SSLSocket) and s.pending()]
            ready = pending or select.select(list(peers), [], [], 5)[0]
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                peers[s].sendall(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def proxy_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("proxy-cert")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_an_https_proxy_is_offered_http_1_1_alone(proxy_cert: tuple[Path, Path], tmp_path: Path) -> None:
    proxy = Proxy(cert=proxy_cert)
    try:
        with Sandbox(tls=True) as sb:
            assert sb.ca_bundle is not None
            bundle = tmp_path / "roots.pem"
            bundle.write_text(Path(sb.ca_bundle).read_text() + proxy_cert[0].read_text())
            with sb.client(proxy=f"https://127.0.0.1:{proxy.port}", ca_bundle=str(bundle)) as c:
                qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
                assert c.get_quote(qid).id == qid
    finally:
        proxy.close()
    assert proxy.alpn, "the client did not use the proxy"
    assert set(proxy.alpn) == {"http/1.1"}, proxy.alpn


def test_a_connect_carries_the_user_agent_and_a_407_is_not_retried() -> None:
    proxy = Proxy(status=407)
    try:
        with (
            Sandbox(tls=True) as sb,
            sb.client(proxy=f"http://alice:{SECRET}@127.0.0.1:{proxy.port}", max_retries=2, user_agent="acme/7") as c,
            pytest.raises(fxpay.TransportError) as caught,
        ):
            c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    finally:
        proxy.close()
    assert "407 Proxy Authentication Required" in str(caught.value), str(caught.value)
    assert SECRET not in str(caught.value)
    # One CONNECT: the token request (retried on connection errors) took no second try.
    assert len(proxy.heads) == 1, proxy.heads
    agents = [line.split(":", 1)[1].strip() for line in proxy.heads[0] if line.lower().startswith("user-agent:")]
    assert len(agents) == 1, proxy.heads
    assert agents[0].startswith("fxpay/"), agents
    assert agents[0].endswith(" acme/7"), agents


def test_no_proxy_takes_host_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = Proxy(status=407)
    try:
        with Sandbox(tls=True) as sb:
            monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
            port = int(sb.base_url.rsplit(":", 1)[1])
            # Another port of the same host: the proxy is used (and refuses).
            monkeypatch.setenv("NO_PROXY", f"127.0.0.1:{port + 1 if port < 65535 else port - 1}")
            with sb.client(max_retries=0) as c, pytest.raises(fxpay.TransportError, match="407"):
                c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
            assert len(proxy.heads) == 1
            # This very host and port: direct.
            monkeypatch.setenv("NO_PROXY", f"example.invalid, 127.0.0.1:{port}")
            with sb.client(max_retries=0) as c:
                qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
                assert c.get_quote(qid).id == qid
            assert len(proxy.heads) == 1
    finally:
        proxy.close()

"""Configuration users expect: proxies, a custom CA bundle, a User-Agent suffix, and
blocking calls inside a running event loop (Jupyter)."""

from __future__ import annotations

import asyncio
import http.server
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import fxpay

from conftest import need_program
from recorder_support import Recorder, serve


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.seen = []
    yield from serve(Recorder)


class ForwardProxy(http.server.BaseHTTPRequestHandler):
    """A plain-HTTP forward proxy: requests arrive with absolute URIs."""

    hits: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        type(self).hits.append(f"{self.command} {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))) if self.command == "POST" else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "connection", "host")}
        req = urllib.request.Request(self.path, data=body, headers=headers, method=self.command)
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req) as resp:
            data = resp.read()
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    do_GET = do_POST = _forward


def test_http_proxy_is_honoured(recorder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ForwardProxy.hits = []
    proxy = serve(ForwardProxy)
    proxy_url = next(proxy)
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("http_proxy", proxy_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        c = fxpay.Client("id", "secret", base_url=recorder)
        assert str(c.get_quote("q1").sell_amount) == "0.9"
        assert any("/v1/payments/quotes/q1" in h for h in ForwardProxy.hits), ForwardProxy.hits
        # NO_PROXY sends it direct.
        ForwardProxy.hits = []
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        c2 = fxpay.Client("id", "secret", base_url=recorder)
        c2.get_quote("q2")
        assert ForwardProxy.hits == []
    finally:
        next(proxy, None)


def test_user_agent_suffix(recorder: str) -> None:
    fxpay.Client("id", "secret", base_url=recorder, user_agent="myapp/1.2").get_quote("q1")
    agents = {h.get("user-agent") for _, _, h in Recorder.seen}
    assert agents == {f"fxpay/{fxpay.__version__} myapp/1.2"}


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = need_program("openssl")
    d = tmp_path_factory.mktemp("tls")
    ca_key, ca, key, csr, cert = d / "ca.key", d / "ca.pem", d / "key.pem", d / "req.csr", d / "cert.pem"
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run = lambda *a: subprocess.run([openssl, *a], check=True, capture_output=True)  # noqa: E731
    run(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fxpay test CA", "-keyout", str(ca_key), "-out", str(ca)
    )
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(csr))
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ext),
        "-out",
        str(cert),
    )
    (d / "chain.pem").write_text(cert.read_text())
    return cert, key


def test_custom_ca_bundle(tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = tls_files
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    cert = cert.with_name("ca.pem")  # the client trusts the CA that signed the server's certificate
    Recorder.seen = []
    server = serve(Recorder, ctx)
    url = next(server)
    try:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(fxpay.TransportError):
            fxpay.Client("id", "secret", base_url=url, max_retries=0).get_quote("q1")
        assert fxpay.Client("id", "secret", base_url=url, ca_bundle=cert).get_quote("q1").id == "q1"
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert fxpay.Client("id", "secret", base_url=url).get_quote("q2").id == "q2"
    finally:
        next(server, None)


def test_bad_ca_bundle_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "none.pem"
    with pytest.raises(fxpay.ConfigurationError, match="ca_bundle"):
        fxpay.Client("id", "secret", base_url="https://api.example.com", ca_bundle=missing)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(fxpay.ConfigurationError, match="ca_bundle"):
        fxpay.Client("id", "secret", base_url="https://api.example.com", ca_bundle=junk)


async def test_blocking_calls_inside_a_running_loop(fxpay_client: fxpay.Client) -> None:
    # As in a Jupyter cell: a blocking call while the event loop runs in this thread.
    assert asyncio.get_running_loop().is_running()
    qid = fxpay_client.create_quote(buy_currency="USD", buy_amount=3, sell_currency="EUR")
    assert (await fxpay_client.get_quote_async(qid)).id == qid


def test_top_level_await_in_the_asyncio_repl(fxpay_sandbox: Any) -> None:
    code = (
        "import fxpay\n"
        f"c = fxpay.Client({fxpay_sandbox.client_id!r}, {fxpay_sandbox.client_secret!r}, base_url={fxpay_sandbox.base_url!r})\n"
        "qid = await c.create_quote_async(buy_currency='USD', buy_amount=7, sell_currency='EUR')\n"
        "print('AMOUNT', (await c.get_quote_async(qid)).buy_amount)\n"
    )
    import sys

    r = subprocess.run([sys.executable, "-m", "asyncio"], input=code, capture_output=True, text=True, timeout=60)
    assert "AMOUNT 7" in r.stdout + r.stderr, r.stdout + r.stderr


def test_from_env_uses_every_variable(fxpay_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FXPAY_CLIENT_ID", fxpay_sandbox.client_id)
    monkeypatch.setenv("FXPAY_CLIENT_SECRET", fxpay_sandbox.client_secret)
    monkeypatch.setenv("FXPAY_BASE_URL", fxpay_sandbox.base_url)
    c = fxpay.Client.from_env()
    assert c.base_url == fxpay_sandbox.base_url
    assert c.client_id == fxpay_sandbox.client_id
    # The secret came from the environment too: the sandbox issues a token for it.
    assert c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert fxpay_sandbox.stats()["tokens_issued"]["client_credentials"] == 1
    monkeypatch.setenv("FXPAY_BASE_URL", "https://fxpay-from-env.example.com/prefix")
    assert fxpay.Client.from_env().base_url == "https://fxpay-from-env.example.com/prefix"
    monkeypatch.delenv("FXPAY_BASE_URL")
    with pytest.raises(fxpay.ConfigurationError, match="FXPAY_BASE_URL"):
        fxpay.Client.from_env()


def test_close_refuses_later_calls_without_sending(fxpay_sandbox: Any) -> None:
    c = fxpay_sandbox.client()
    qid = c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    c.close()
    before = fxpay_sandbox.stats()["requests"]
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        c.get_quote(qid)
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    with fxpay_sandbox.client() as d:
        d.get_quote(qid)
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        d.get_quote(qid)
    assert fxpay_sandbox.stats()["requests"] - before == 2  # d's token and its one read


async def test_aclose_refuses_later_calls(fxpay_sandbox: Any) -> None:
    async with fxpay_sandbox.client() as c:
        qid = await c.create_quote_async(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    before = fxpay_sandbox.stats()["requests"]
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        await c.get_quote_async(qid)
    e = fxpay_sandbox.client()
    await e.aclose()
    with pytest.raises(fxpay.ConfigurationError, match="closed"):
        await e.create_quote_async(buy_currency="USD", buy_amount=1, sell_currency="EUR")
    assert fxpay_sandbox.stats()["requests"] == before


@pytest.mark.parametrize(
    ("value", "shown"),
    [(100_000, "got 100000"), (1e300, "got 1e300"), (float("nan"), "got NaN"), (-1, "got -1"), (0, "got 0")],
)
@pytest.mark.parametrize("name", ["timeout", "deadline"])
def test_a_number_of_seconds_out_of_range_is_named_with_its_range(name: str, value: float, shown: str) -> None:
    # The message says both bounds (a day at most, not only "greater than 0", which 100000
    # is), and the number as written, not three hundred digits of 1e300.
    for make in (
        lambda: fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", **{name: value}),
        lambda: fxpay.Client("id", "secret", base_url="http://127.0.0.1:9").with_options(**{name: value}),
    ):
        with pytest.raises(fxpay.ConfigurationError) as e:
            make()
        message = str(e.value)
        assert message.startswith(f"{name} must be a number of seconds greater than 0 and at most 86400")
        assert message.endswith(shown)

"""`RemoteSandbox` has the methods and properties of `Sandbox` (except `close`), with the same
signatures; here it drives an embedded sandbox over its admin API."""

from __future__ import annotations

import http.server
import inspect
import json
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import fxpay
from fxpay.testing import RemoteSandbox, Sandbox, UnfiredFaultWarning


def public(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_")}


def test_same_methods_and_properties_as_sandbox() -> None:
    local, remote = public(Sandbox), public(RemoteSandbox)
    assert set(local) - {"close"} == set(remote)
    for name, member in local.items():
        if name == "close":
            continue
        other = remote[name]
        assert isinstance(other, property) == isinstance(member, property), name
        if callable(member):
            assert inspect.signature(member) == inspect.signature(other), name  # type: ignore[arg-type]
    assert "__enter__" in vars(RemoteSandbox)
    assert "__exit__" in vars(RemoteSandbox)


def test_drives_an_embedded_sandbox_over_http() -> None:
    with Sandbox() as sb:
        r = RemoteSandbox(sb.base_url, client_id=sb.client_id, client_secret=sb.client_secret, admin_token=sb.admin_token)
        assert (r.username, r.password, r.redirect_uri) == (sb.username, sb.password, sb.redirect_uri)
        with r.client() as c:
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        # The same counters either way (`open_connections` is a gauge the closing client moves).
        gauge = "open_connections"
        assert {k: v for k, v in r.stats().items() if k != gauge} == {k: v for k, v in sb.stats().items() if k != gauge}
        # token + quote; the admin calls and their connections are not counted
        assert sb.stats()["requests"] == 2
        assert sb.stats()["connections"] in (1, 2)
        r.fail_next("/v1/payments/quotes", 500, times=2)
        assert sb.stats()["faults_pending"] == 1
        with pytest.warns(UnfiredFaultWarning, match=r'fail_next\("/v1/payments/quotes", 500\): 2 use\(s\) left'):
            sb.reset()
        assert r.stats()["faults_pending"] == 0
        assert r.stats()["requests"] == 0
        before = sb.now()
        r.advance(3600)
        assert 3600 <= sb.now() - before < 3660
        with pytest.raises(fxpay.InvalidRequestError):
            r.deal_status("nope")
        with pytest.raises(fxpay.InvalidRequestError):
            sb.deal_status("nope")


def test_reset_warns_of_the_faults_that_never_fired() -> None:
    with Sandbox() as sb:
        r = RemoteSandbox(sb.base_url, client_id=sb.client_id, client_secret=sb.client_secret, admin_token=sb.admin_token)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r.reset()  # nothing pending: no warning
            r.fail_next("/v1/payments/quotes", 500)
            r.drop_next("/v1/payments/deals", after_processing=False)
            r.reset()
        assert [(w.category, str(w.message)) for w in caught] == [
            (UnfiredFaultWarning, "2 fault(s) set with fail_next, drop_next or delay_next never fired before reset()")
        ]
        assert r.stats()["faults_pending"] == 0


def test_admin_token_is_per_sandbox() -> None:
    with Sandbox() as a, Sandbox() as b:
        assert a.admin_token != b.admin_token
        assert len(a.admin_token) >= 43
        wrong = RemoteSandbox(a.base_url, client_id=a.client_id, client_secret=a.client_secret, admin_token=b.admin_token)
        with pytest.raises(fxpay.ConfigurationError):
            wrong.reset()


def test_constructor_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="base_url"):
        RemoteSandbox(1, client_id="a", client_secret="b", admin_token="t")  # type: ignore[arg-type]
    with pytest.raises(fxpay.InvalidRequestError, match="admin_token"):
        RemoteSandbox("http://127.0.0.1:1", client_id="a", client_secret="b", admin_token="")
    with pytest.raises(fxpay.InvalidRequestError, match="base_url"):
        RemoteSandbox("ftp://127.0.0.1:1", client_id="a", client_secret="b", admin_token="t")
    with pytest.raises(TypeError, match="ca_bundle"):
        RemoteSandbox("https://127.0.0.1:1", client_id="a", client_secret="b", admin_token="t", ca_bundle=3)  # type: ignore[arg-type]
    with pytest.raises(fxpay.ConfigurationError, match="ca_bundle"):
        RemoteSandbox("https://127.0.0.1:1", client_id="a", client_secret="b", admin_token="t", ca_bundle="/nonexistent.pem")


def test_fxpay_testing_is_a_declared_attribute() -> None:
    import fxpay as fresh

    assert fresh.testing.Sandbox is Sandbox
    assert fresh.testing.RemoteSandbox is RemoteSandbox


USES_TESTING = """
import fxpay


def make() -> fxpay.testing.Sandbox:
    return fxpay.testing.Sandbox(tls=True)


remote: type[fxpay.testing.RemoteSandbox] = fxpay.testing.RemoteSandbox
"""


@pytest.mark.timeout(300)
def test_fxpay_testing_type_checks(tmp_path: Path) -> None:
    """`import fxpay; fxpay.testing.Sandbox` passes mypy --strict and pyright."""
    src = tmp_path / "uses_testing.py"
    src.write_text(USES_TESTING)
    bin_dir = Path(sys.executable).parent
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(src)], capture_output=True, text=True)
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
    pyright = shutil.which("pyright", path=str(bin_dir))
    if pyright is None:
        pytest.skip("pyright is not installed")
    out = subprocess.run([pyright, "--pythonpath", sys.executable, str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


class Canned(http.server.ThreadingHTTPServer):
    """An admin API that answers canned (status, body) pairs and records each request."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        super().__init__(("127.0.0.1", 0), CannedHandler)
        self.answers = answers
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class CannedHandler(http.server.BaseHTTPRequestHandler):
    server: Canned

    def do_GET(self) -> None:
        self.answer()

    def do_POST(self) -> None:
        self.answer()

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        status, out = self.server.answers.pop(0)
        self.send_response(status)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def canned(*answers: tuple[int, bytes]) -> Iterator[Canned]:
    server = Canned(list(answers))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_admin_requests_carry_the_token_and_their_arguments() -> None:
    with canned((200, b'{"requests": 3}'), (200, b""), (200, b'{"status": "Paid"}')) as api:
        r = RemoteSandbox(api.url + "/", client_id="a", client_secret="b", admin_token="tok")
        assert (r.base_url, repr(r)) == (api.url, f"RemoteSandbox(base_url={api.url!r})")
        assert r.stats() == {"requests": 3}
        r.fail_next("/v1/payments/quotes", 503, times=2)
        assert r.deal_status("a/b c") == "Paid"
        with pytest.raises(fxpay.InvalidRequestError, match="times must be >= 0"):
            r.fail_next("/v1/payments/quotes", 503, times=-1)
    (m1, p1, h1, b1), (m2, p2, h2, b2), (m3, p3, _, _) = api.requests  # the refused fail_next sent nothing
    assert (m1, p1, h1["authorization"], h1["accept"], "content-type" in h1, b1) == (
        "GET",
        "/_sandbox/stats",
        "Bearer tok",
        "application/json",
        False,
        b"",
    )
    assert (m2, p2, h2["authorization"], h2["content-type"]) == ("POST", "/_sandbox/fail_next", "Bearer tok", "application/json")
    assert json.loads(b2) == {"path": "/v1/payments/quotes", "status": 503, "times": 2, "retry_after": None}
    assert (m3, p3) == ("GET", "/_sandbox/deal_status/a%2Fb%20c")


def test_the_identity_of_the_default_user_is_asked_of_the_server_once() -> None:
    info = {"redirect_uri": "https://app.example.test/callback", "username": "ada", "password": "pw"}
    with canned((200, json.dumps(info).encode())) as api:
        r = RemoteSandbox(api.url, client_id="a", client_secret="b", admin_token="tok")
        assert (r.redirect_uri, r.username, r.password, r.username) == ("https://app.example.test/callback", "ada", "pw", "ada")
    assert [(m, path) for m, path, _, _ in api.requests] == [("GET", "/_sandbox/info")]


def test_each_control_sends_its_arguments() -> None:
    answers = [
        (200, b"null"),
        (200, b'{"redirect_url": "https://app.example.test/callback?code=c"}'),
        (200, b"null"),
        (200, b'{"now": 1700000000.5}'),
        (200, b"[]"),
        (200, b'[{"kind": "sent"}]'),
        (200, b"null"),
        (200, b'{"kind": "redelivery"}'),
        (200, b'{"kind": "sent"}'),
        (200, b"null"),
        (200, b"null"),
    ]
    with canned(*answers) as api:
        r = RemoteSandbox(api.url, client_id="a", client_secret="b", admin_token="tok")
        assert r.register_client("c2", "s2") is None
        assert r.approve("https://x/authorize?a=1", allow=False) == "https://app.example.test/callback?code=c"
        r.advance(60)
        assert r.now() == 1700000000.5
        assert r.deals() == []
        assert r.deliveries() == [{"kind": "sent"}]
        r.set_virtual_accounts(5)
        assert r.redeliver("p1") == {"kind": "redelivery"}
        assert r.send_deal_created("http://127.0.0.1:9/hook", status="fail", process_id="p2", errors=[{"errorCode": "a:b:1"}]) == {
            "kind": "sent"
        }
        r.drop_next("/v1/payments/deals", after_processing=True)
        r.delay_next("/v1/payments/quotes", 1.5)
    sent = [(m, path, json.loads(body) if body else None) for m, path, _, body in api.requests]
    event = (
        '{"eventType":"DealCreated","status":"fail","eventBody":'
        '{"processId":"p2","errors":[{"errorCode":"a:b:1","fieldName":"","message":""}]}}'
    )
    assert sent == [
        ("POST", "/_sandbox/register_client", {"client_id": "c2", "client_secret": "s2", "redirect_uris": []}),
        ("POST", "/_sandbox/approve", {"auth_url": "https://x/authorize?a=1", "allow": False}),
        ("POST", "/_sandbox/advance", {"seconds": 60.0}),
        ("GET", "/_sandbox/now", None),
        ("GET", "/_sandbox/deals", None),
        ("GET", "/_sandbox/deliveries", None),
        ("POST", "/_sandbox/set_virtual_accounts", {"count": 5, "page_size": None}),
        ("POST", "/_sandbox/redeliver", {"process_id": "p1"}),
        ("POST", "/_sandbox/send_event", {"url": "http://127.0.0.1:9/hook", "body": event, "nonce": None}),
        ("POST", "/_sandbox/drop_next", {"path": "/v1/payments/deals", "after_processing": True}),
        ("POST", "/_sandbox/delay_next", {"path": "/v1/payments/quotes", "seconds": 1.5}),
    ]


def test_each_control_checks_its_arguments_before_sending() -> None:
    with canned() as api:
        r = RemoteSandbox(api.url, client_id="a", client_secret="b", admin_token="tok")
        refusals: list[tuple[Callable[[], object], type[Exception], str]] = [
            (lambda: r.register_client(1, "s"), TypeError, "client_id must be a str, got int"),  # type: ignore[arg-type]
            (lambda: r.register_client("c", b"s"), TypeError, "client_secret must be a str, got bytes"),  # type: ignore[arg-type]
            (lambda: r.register_client("c", "s", ["https://a", 3]), TypeError, "redirect_uris must be a list of str, got int"),  # type: ignore[list-item]
            (lambda: r.approve(b"https://x"), TypeError, "auth_url must be a str, got bytes"),  # type: ignore[arg-type]
            (lambda: r.approve("https://x", allow=1), TypeError, "allow must be a bool, got int"),  # type: ignore[arg-type]
            (lambda: r.advance("60"), TypeError, "seconds must be a number of seconds, not str"),  # type: ignore[arg-type]
            (lambda: r.advance(-1), fxpay.InvalidRequestError, "seconds must be a finite number >= 0"),
            (lambda: r.deal_status(7), TypeError, "deal_id must be a str, got int"),  # type: ignore[arg-type]
            (lambda: r.set_virtual_accounts(2.0), TypeError, "count must be an int, got float"),  # type: ignore[arg-type]
            (lambda: r.set_virtual_accounts(2, page_size="5"), TypeError, "page_size must be an int or None, got str"),  # type: ignore[arg-type]
            (lambda: r.redeliver(1), TypeError, "process_id must be a str, got int"),  # type: ignore[arg-type]
            (lambda: r.send_deal_created(b"http://h"), TypeError, "url must be a str, got bytes"),  # type: ignore[arg-type]
            (
                lambda: r.send_deal_created("http://h", status="ok"),
                fxpay.InvalidRequestError,
                "status must be 'success' or 'fail', got 'ok'",
            ),
            (lambda: r.fail_next(1, 500), TypeError, "path must be a str, got int"),  # type: ignore[arg-type]
            (lambda: r.fail_next("/x", "500"), TypeError, "status must be an int, got str"),  # type: ignore[arg-type]
            (lambda: r.fail_next("/x", 500, times=True), TypeError, "times must be an int, got bool"),
            (lambda: r.fail_next("/x", 500, retry_after=1.5), TypeError, "retry_after must be an int or None, got float"),  # type: ignore[arg-type]
            (lambda: r.drop_next(1, after_processing=True), TypeError, "path must be a str, got int"),  # type: ignore[arg-type]
            (lambda: r.drop_next("/x", after_processing=0), TypeError, "after_processing must be a bool, got int"),  # type: ignore[arg-type]
            (lambda: r.delay_next(1, 1.0), TypeError, "path must be a str, got int"),  # type: ignore[arg-type]
            (lambda: r.delay_next("/x", "1"), TypeError, "seconds must be a number of seconds, not str"),  # type: ignore[arg-type]
        ]
        for call, kind, message in refusals:
            with pytest.raises(kind) as info:
                call()
            assert str(info.value) == message
    assert api.requests == []


def test_admin_api_refusals_are_named_by_their_status() -> None:
    errors = json.dumps({"errors": [{"message": "down"}, {"message": "again"}]}).encode()
    with canned(
        (503, errors),
        (500, b"plain text"),
        (403, b'{"errors": [{"message": "nope"}]}'),
        (401, b"{}"),
        (404, b'{"errors": "not a list"}'),
        (400, b'{"errors": [{"message": "bad"}]}'),
    ) as api:
        r = RemoteSandbox(api.url, client_id="a", client_secret="b", admin_token="tok")
        refusals: list[tuple[type[Exception], str]] = [
            (fxpay.FxPayError, "sandbox admin API GET /_sandbox/stats answered HTTP 503: down; again"),
            (fxpay.FxPayError, "sandbox admin API GET /_sandbox/stats answered HTTP 500: plain text"),
            (fxpay.ConfigurationError, f"the sandbox at {api.url} refused the admin token (HTTP 403): nope"),
            (fxpay.ConfigurationError, f"the sandbox at {api.url} refused the admin token (HTTP 401): {{}}"),
            (fxpay.InvalidRequestError, '{"errors": "not a list"}'),
            (fxpay.InvalidRequestError, "bad"),
        ]
        for kind, message in refusals:
            with pytest.raises(fxpay.FxPayError) as info:
                r.stats()
            assert (type(info.value), str(info.value)) == (kind, message)


def test_constructor_checks_the_rest_of_its_arguments(tmp_path: Path) -> None:
    def make(base_url: str = "http://127.0.0.1:1", **kw: Any) -> RemoteSandbox:
        return RemoteSandbox(base_url, client_id=kw.pop("client_id", "a"), client_secret="b", admin_token="t", **kw)

    refusals: list[tuple[Callable[[], object], type[Exception], str]] = [
        (lambda: make(""), fxpay.InvalidRequestError, "base_url must not be empty"),
        (lambda: make("http://"), fxpay.InvalidRequestError, "base_url must be an http:// or https:// URL, got 'http://'"),
        (lambda: make(client_id=7), TypeError, "client_id must be a str, got int"),
        (lambda: make(client_key="k.pem"), fxpay.ConfigurationError, "client_key needs client_cert (the certificate it is the key of)"),
        (lambda: make(client_cert=b"c.pem"), TypeError, "client_cert must be a path or None, got bytes"),
        (lambda: make(timeout=0), fxpay.InvalidRequestError, "timeout must be > 0"),
        (lambda: make(timeout=-1), fxpay.InvalidRequestError, "timeout must be a finite number >= 0"),
    ]
    for call, kind, message in refusals:
        with pytest.raises(kind) as info:
            call()
        assert str(info.value) == message
    with pytest.raises(fxpay.ConfigurationError) as info:
        make("https://127.0.0.1:1", client_cert="/nonexistent/c.pem")
    assert str(info.value).startswith("cannot read client_cert '/nonexistent/c.pem': ")
    # Paths may be os.PathLike; they are kept as str, and only https reads them.
    r = make(ca_bundle=tmp_path / "ca.pem", client_cert=tmp_path / "c.pem", client_key=tmp_path / "k.pem")
    assert (r.ca_bundle, r.client_cert, r.client_key) == (str(tmp_path / "ca.pem"), str(tmp_path / "c.pem"), str(tmp_path / "k.pem"))
    assert (make().ca_bundle, make().client_cert, make().client_key) == (None, None, None)
    # A with block hands back the handle and lets an exception through.
    handle = make()
    assert handle.__enter__() is handle
    assert handle.__exit__(KeyError, KeyError("through"), None) is None

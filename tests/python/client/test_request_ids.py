"""Issue 30 item 1: request ids. The sandbox answers every request with a fresh
``x-request-id``; ``fxpay.ApiError`` has ``.request_id`` and ``.headers`` (read-only,
case-insensitive); the DEBUG line of each attempt carries the id; a cassette keeps it, so a
replay shows the same id. Real HTTP over loopback."""

from __future__ import annotations

import json
import logging
import pickle
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import fxpay
from fxpay.testing import Cassette, Sandbox


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


def test_every_sandbox_answer_has_a_fresh_request_id(sb: Sandbox) -> None:
    with httpx.Client(base_url=sb.base_url, trust_env=False) as http:
        answers = [
            http.get("/openapi.json"),
            http.get("/v1/payments/quotes/nope"),  # 401: no token
            http.post("/v1/oauth/token", data={"grant_type": "client_credentials"}),
            http.get("/no/such/path"),
            http.get("/_sandbox/stats", headers={"Authorization": f"Bearer {sb.admin_token}"}),
        ]
    ids = [r.headers.get("x-request-id") for r in answers]
    assert all(ids), [(r.status_code, dict(r.headers)) for r in answers]
    assert len(set(ids)) == len(ids)
    for i in ids:
        uuid.UUID(str(i))


def test_a_not_found_carries_the_id_the_sandbox_sent_and_the_debug_line_has_it(
    sb: Sandbox, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cassette.json"
    with (
        caplog.at_level(logging.DEBUG, logger="fxpay"),
        fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, cassette=Cassette(path, mode="record")) as c,
        pytest.raises(fxpay.NotFoundError) as e,
    ):
        c.get_quote("no-such-quote")
    err = e.value
    # The id is the header the sandbox sent: the cassette holds the answer's headers as received.
    recorded = json.loads(path.read_text())
    (miss,) = [x for x in recorded["interactions"] if x["response"] and x["response"]["status"] == 404]
    assert err.request_id == miss["response"]["headers"]["x-request-id"]
    uuid.UUID(err.request_id)
    # Read-only, case-insensitive headers.
    assert err.headers["X-Request-ID"] == err.headers["x-request-id"] == err.request_id
    assert "X-REQUEST-ID" in err.headers
    assert err.headers["content-type"].startswith("application/json")
    with pytest.raises(TypeError):
        err.headers["x-request-id"] = "forged"  # type: ignore[index]
    with pytest.raises(AttributeError):
        err.request_id = "forged"  # type: ignore[misc]
    # The DEBUG line of that attempt carries it.
    lines = [r.getMessage() for r in caplog.records if r.name == "fxpay" and "quotes/no-such-quote" in r.getMessage()]
    assert len(lines) == 1, lines
    assert err.request_id in lines[0], lines
    # It survives pickling.
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.request_id, again.headers) == (fxpay.NotFoundError, err.request_id, err.headers)
    # A replay shows the same id, with nothing listening.
    sb.close()
    with (
        fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, cassette=Cassette(path, mode="replay")) as c,
        pytest.raises(fxpay.NotFoundError) as replayed,
    ):
        c.get_quote("no-such-quote")
    assert replayed.value.request_id == err.request_id


class _RequestIdOnly(BaseHTTPRequestHandler):
    """A service that names its request ids ``Request-Id`` (Stripe's spelling)."""

    def do_POST(self) -> None:
        body = json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}).encode()
        self._answer(200, body)

    def do_GET(self) -> None:
        body = json.dumps({"errors": [{"errorCode": "x:y:1", "fieldName": None, "message": "gone"}]}).encode()
        self._answer(404, body, {"Request-Id": "req_abc123"})

    def _answer(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_request_id_falls_back_to_the_request_id_header() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RequestIdOnly)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        with (
            fxpay.Client("id", "secret", base_url=f"http://127.0.0.1:{httpd.server_address[1]}") as c,
            pytest.raises(fxpay.NotFoundError) as e,
        ):
            c.get_quote("q")
        assert e.value.request_id == "req_abc123"
        assert e.value.headers["request-id"] == "req_abc123"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_error_made_by_hand_has_empty_headers() -> None:
    e = fxpay.ApiError("m", 500)
    assert e.request_id is None
    assert dict(e.headers) == {}
    e2 = fxpay.ServerError("m", 503, [], "", None, {"X-Request-Id": "r1"})
    assert e2.request_id == "r1"
    assert e2.headers == {"x-request-id": "r1"}


def test_headers_is_a_read_only_mapping_that_ignores_case() -> None:
    """``ApiError.headers`` and ``RawResponse.headers``: what a user reads, compares, logs and
    pickles (Celery sends errors between processes)."""
    from fxpay.errors import Headers

    h = Headers([("X-Request-Id", "r1"), ("Set-Cookie", "a=1"), ("set-cookie", "b=2")])
    assert h["x-request-id"] == h["X-REQUEST-ID"] == "r1"
    assert h["Set-Cookie"] == "a=1, b=2"  # a header sent twice keeps both values, joined
    assert len(h) == 2
    assert sorted(h) == ["set-cookie", "x-request-id"]
    assert "X-Request-Id" in h
    assert "x-absent" not in h
    assert 1 not in h  # type: ignore[comparison-overlap]
    assert h.get(1) is None  # type: ignore[call-overload]
    with pytest.raises(KeyError):
        h[1]  # type: ignore[index]
    assert h == {"X-REQUEST-ID": "r1", "set-cookie": "a=1, b=2"}
    assert h != {"x-request-id": "r1"}
    assert (h == 5) is False
    assert h != 5
    assert repr(Headers({"A": "1"})) == "Headers({'a': '1'})"
    back = pickle.loads(pickle.dumps(h))
    assert type(back) is Headers
    assert back == h
    with pytest.raises(TypeError):
        h["x-request-id"] = "forged"  # type: ignore[index]

"""A session refresh whose call is cancelled still keeps the rotated token: the service may
have rotated the refresh token already, and losing its answer would end the session.

The embedded sandbox drops a request whose client went away before it acts on it, so this
test runs a small token service of its own (real HTTP on loopback) that rotates first and
answers when the test lets it, as a real service may.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import fxpay


class TokenService(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.generation = 0
        self.refresh = "r0"
        self.access = "a0"
        self.rotated = threading.Event()  # a refresh was acted on
        self.answer = threading.Event()  # the test lets the refresh answer go out
        self.refresh_requests = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: TokenService

    def log_message(self, *_: Any) -> None:
        pass

    def reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client went away

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        s = self.server
        with s.lock:
            s.refresh_requests += 1
            if form.get("refresh_token") != [s.refresh]:
                self.reply(400, {"error": "invalid_grant", "error_description": "unknown refresh token"})
                return
            s.generation += 1
            s.refresh, s.access = f"r{s.generation}", f"a{s.generation}"
            body = {"access_token": s.access, "token_type": "Bearer", "expires_in": 3599, "refresh_token": s.refresh, "scope": "gca-aisp"}
        s.rotated.set()
        s.answer.wait(30)
        self.reply(200, body)

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.server.access}":
            self.reply(401, {"errors": [{"errorCode": "auth:token:4002", "message": "expired"}]})
        else:
            self.reply(200, [{"currency": "USD", "balance": 1}])


@pytest.fixture
def service() -> Iterator[TokenService]:
    s = TokenService()
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield s
    s.answer.set()
    s.shutdown()
    s.server_close()


async def test_a_cancelled_refresh_keeps_the_rotated_token(service: TokenService) -> None:
    expired = fxpay.Token.from_dict(
        {
            "access_token": "a0",
            "token_type": "Bearer",
            "expires_in": 3599,
            "expires_at": time.time() - 10,
            "refresh_token": "r0",
            "scope": "gca-aisp",
        }
    )
    seen: list[fxpay.Token] = []
    async with fxpay.Client("id", "secret", base_url=service.base_url) as c:
        session = c.user_session(expired, on_token=seen.append)
        call = asyncio.ensure_future(session.list_virtual_accounts_async())
        assert await asyncio.to_thread(service.rotated.wait, 10)
        call.cancel()  # the service rotated; its answer has not come yet
        with pytest.raises(asyncio.CancelledError):
            await call
        service.answer.set()
        accounts = await asyncio.wait_for(session.list_virtual_accounts_async(), 10)
        assert [a["currency"] for a in accounts] == ["USD"]
        assert service.refresh_requests == 1
        assert [t.access_token for t in seen] == ["a1"]
        assert session.token.refresh_token == "r1"

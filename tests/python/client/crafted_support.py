"""A loopback HTTP server of a test's own (http.server in a thread on 127.0.0.1) that answers
each path with the JSON text set for it: the answers a real service might send and the
sandbox never does, reached by fxpay over real HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN_PATH = "/v1/oauth/token"


class Crafted:
    """A loopback server answering each path with the JSON text set for it."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, str]] = {
            TOKEN_PATH: (200, json.dumps({"access_token": "AT", "token_type": "Bearer", "expires_in": 3600})),
        }
        self.requests: list[tuple[str, str]] = []
        #: Each request's method, path and headers (names in lower case), in order.
        self.received: list[tuple[str, str, dict[str, str]]] = []
        crafted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                crafted.requests.append((self.command, self.path))
                crafted.received.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, text = crafted.answers.get(self.path, (404, '{"errors": []}'))
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = answer
            do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def set(self, path: str, body: Any, status: int = 200) -> None:
        self.answers[path] = (status, body if isinstance(body, str) else json.dumps(body))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

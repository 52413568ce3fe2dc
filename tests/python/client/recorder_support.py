"""A loopback HTTP server of the test's own that answers the token endpoint and a quote and
records every request (test_config.py, test_blocking_calls.py, test_tracing.py)."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from typing import Any, ClassVar


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers the token endpoint and a quote; records every request line and header."""

    seen: ClassVar[list[tuple[str, str, dict[str, str]]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}))
        self._send({"access_token": "tok", "token_type": "Bearer", "expires_in": 3599})

    def do_GET(self) -> None:
        type(self).seen.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
        self._send(
            {
                "buyCurrency": "USD",
                "buyAmount": 1,
                "sellCurrency": "EUR",
                "sellAmount": 0.9,
                "customerRate": 0.9,
                "inverseCustomerRate": 1.111111,
                "fee": 0,
                "feeCurrency": "USD",
                "freebies": {"total": 0, "claimed": 0, "remaining": 0},
            }
        )


def serve(handler: type[http.server.BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls else "http"
    yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()

"""The chaos run's notification receiver: a small HTTP server on 127.0.0.1, written by hand around
``fxpay.settle_deal_created(body, headers, journal=...)``, one route per store
(``POST /hook/<store>``). The nemesis may SIGKILL it, and may tell it to drop deliveries
(``POST /_drop?n=N``: the next N notifications are cut off unanswered).

argv: a JSON file (the stores, the log file), then the port (0 for a free one). Prints
``port N`` once it serves. Each notification it handles is a line of the log."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import fxpay

from client_worker import open_journal

_lock = threading.Lock()
_drop = 0
_journals: dict[str, Any] = {}


def journal(store: str, stores: dict[str, Any]) -> Any:
    with _lock:
        if store not in _journals:
            _journals[store] = open_journal(store, stores)
        return _journals[store]


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    port = int(sys.argv[2])
    log = open(cfg["receiver_log"], "a", buffering=1)  # noqa: SIM115 - the process's life

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:
            pass

        def answer(self, code: int, text: str = "") -> None:
            body = text.encode()
            self.send_response(code)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            global _drop
            url = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if url.path == "/_drop":
                with _lock:
                    _drop += int(parse_qs(url.query).get("n", ["1"])[0])
                self.answer(200)
                return
            store = url.path.rpartition("/")[2]
            with _lock:
                dropping = _drop > 0
                if dropping:
                    _drop -= 1
            try:
                event = json.loads(body)
            except ValueError:
                event = {}
            if not isinstance(event, dict):
                event = {}
            line: dict[str, Any] = {
                "t": time.time(),
                "store": store,
                "status": event.get("status"),
                "process_id": (event.get("eventBody") or {}).get("processId"),
                "deal_id": (event.get("eventBody") or {}).get("dealId"),
            }
            if dropping:
                line["code"] = "dropped"
                log.write(json.dumps(line) + "\n")
                self.close_connection = True
                self.connection.close()
                return
            headers = {k: v for k, v in self.headers.items()}
            try:
                fxpay.settle_deal_created(body, headers, journal=journal(store, cfg["stores"]))
                code, err = 200, ""
            except fxpay.WebhookVerificationError as e:
                code, err = 401, str(e)
            except fxpay.WebhookPayloadError as e:
                code, err = 400, str(e)
            except fxpay.JournalError as e:
                code, err = 503, str(e)
            except Exception as e:
                code, err = 500, f"{type(e).__name__}: {e}"
            line["code"], line["error"] = code, err[:300]
            log.write(json.dumps(line) + "\n")
            self.answer(code, err)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

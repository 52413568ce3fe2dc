"""The webhook tests' events and receivers: DealCreated bodies, and the FastAPI and Django
receivers of fxpay.contrib served over real HTTP on loopback (test_webhooks.py,
test_webhooks_e2e.py, test_receivers_once.py and test_tracing.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import httpx

from fxpay import DealCreated

PID = "5b0c3a0e-1f2d-4c39-9d55-8a5f8d1e7a10"
DID = "c0ffee00-1234-4abc-8def-0123456789ab"
OTHER_PID = "0e4f8f5a-7a55-4b1e-a0d4-3f4b1c9f2e77"
NONCE = "n0nce-S3cret-9f8e7d6c5b4a"


def success(pid: str = PID, **extra_body: Any) -> dict[str, Any]:
    return {
        "status": "success",
        "eventType": "DealCreated",
        "eventBody": {"processId": pid, "dealId": DID, **extra_body},
    }


def fail(pid: str = PID, n: int = 1) -> dict[str, Any]:
    return {
        "status": "fail",
        "eventType": "DealCreated",
        "eventBody": {
            "processId": pid,
            "errors": [
                {
                    "errorCode": f"validation:beneficiary:{1004 + i}",
                    "fieldName": "PaymentReason",
                    "message": "Payment reason must not be empty",
                }
                for i in range(n)
            ],
        },
    }


def dumps(ev: Any) -> bytes:
    return json.dumps(ev).encode()


class Recorder:
    """What the receivers saw, shared with the server threads."""

    def __init__(self) -> None:
        self.events: list[DealCreated] = []
        self.lock = threading.Lock()
        self.nonces = {PID: NONCE, OTHER_PID: "other-" + NONCE}
        self.lookups: list[str] = []

    def record(self, ev: DealCreated) -> None:
        with self.lock:
            self.events.append(ev)

    async def record_async(self, ev: DealCreated) -> None:
        await asyncio.sleep(0)
        self.record(ev)

    def explode(self, ev: DealCreated) -> None:
        raise RuntimeError("database is down")

    def nonce_for(self, process_id: str) -> str | None:
        with self.lock:
            self.lookups.append(process_id)
        return self.nonces.get(process_id)

    async def nonce_for_async(self, process_id: str) -> str | None:
        await asyncio.sleep(0)
        return self.nonce_for(process_id)

    def nonce_for_explodes(self, process_id: str) -> str | None:
        raise RuntimeError("lookup failed")


# The routes each framework serves, as (path, keyword arguments of the receiver).
def routes(rec: Recorder) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/fixed", {"nonce": NONCE, "on_event": rec.record}),
        ("/boom", {"nonce": NONCE, "on_event": rec.explode}),
        ("/async", {"nonce": NONCE, "on_event": rec.record_async}),
        ("/lookup", {"nonce_for": rec.nonce_for, "on_event": rec.record}),
        ("/lookup-async", {"nonce_for": rec.nonce_for_async, "on_event": rec.record_async}),
        ("/lookup-boom", {"nonce_for": rec.nonce_for_explodes, "on_event": rec.record}),
    ]


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def serve_fastapi(rec: Recorder) -> Iterator[str]:
    import uvicorn
    from fastapi import FastAPI

    from fxpay.contrib.fastapi import deal_created_router

    app = FastAPI()
    for path, kw in routes(rec):
        app.include_router(deal_created_router(path=path, **kw))
    sock = free_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        threading.Event().wait(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def serve_django(rec: Recorder) -> Iterator[str]:
    import django
    from django.conf import settings
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application
    from django.urls import clear_url_caches
    from django.urls import path as url

    from fxpay.contrib.django import deal_created_view

    urls = types.ModuleType(f"fxpay_webhook_test_urls_{id(rec)}")
    urls.urlpatterns = [url(p.lstrip("/"), deal_created_view(**kw)) for p, kw in routes(rec)]  # type: ignore[attr-defined]
    sys.modules[urls.__name__] = urls
    if not settings.configured:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="test-only",
            ALLOWED_HOSTS=["127.0.0.1"],
            ROOT_URLCONF=urls.__name__,
            # The CSRF middleware is on, so a POST gets through only because the view is exempt.
            MIDDLEWARE=[
                "django.middleware.common.CommonMiddleware",
                "django.middleware.csrf.CsrfViewMiddleware",
            ],
            INSTALLED_APPS=[],
            APPEND_SLASH=False,
            LOGGING_CONFIG=None,
        )
        django.setup()
    else:
        settings.ROOT_URLCONF = urls.__name__
    clear_url_caches()
    httpd = ThreadedWSGIServer(("127.0.0.1", 0), WSGIRequestHandler, ipv6=False)
    httpd.set_app(get_wsgi_application())
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
        sys.modules.pop(urls.__name__, None)


def post(http: httpx.Client, path: str, body: Any, nonce: str | None = NONCE, name: str = "callback-nonce") -> httpx.Response:
    content = body if isinstance(body, bytes) else dumps(body)
    headers = {"content-type": "application/json"}
    if nonce is not None:
        headers[name] = nonce
    return http.post(path, content=content, headers=headers)

"""A FastAPI receiver of the ``DealCreated`` notification.

.. code-block:: python

    app.include_router(deal_created_router(nonce_for=lookup_nonce, on_event=handle))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ..errors import WebhookPayloadError, WebhookVerificationError
from ..models import DealCreated
from . import _receive

__all__ = ["deal_created_router"]


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Awaits a coroutine function; runs a plain function in the thread pool (awaiting what
    it returns if that is awaitable)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await run_in_threadpool(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _read_body(request: Request) -> bytes:
    """The raw body, read no further than one byte past the limit (the parser refuses it)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > _receive.MAX_BODY_BYTES:
            break
    return b"".join(chunks)


def deal_created_router(
    *,
    nonce: str | None = None,
    nonce_for: Callable[[str], Any] | None = None,
    on_event: Callable[[DealCreated], Any],
    path: str = "/fxpay/deal-created",
) -> APIRouter:
    """An ``APIRouter`` with one ``POST path`` route that receives ``DealCreated``.

    Give exactly one of ``nonce`` (one nonce for every notification) and ``nonce_for``
    (called with the event's ``processId``, returns the ``callback_nonce`` stored with that
    ``SpotDeal``, or ``None`` when the process is unknown; sync or async). ``on_event``
    (sync, run in the thread pool, or async) receives each verified event.

    Answers: 200 ``{"ok": true}`` after ``on_event`` returned; 401 when the nonce is missing,
    wrong or unknown; 400 when the body is not a valid event; 500 when ``nonce_for`` or
    ``on_event`` raised (logged on the ``fxpay.webhooks`` logger), so the sender retries.
    """
    _receive.check_nonce_settings(nonce, nonce_for)
    router = APIRouter()

    @router.post(path, name="fxpay_deal_created")
    async def receive_deal_created(request: Request) -> JSONResponse:
        # Continues the sender's trace when a traceparent came (and tracing is on).
        with _receive.traced(request.headers):
            return await receive(request)

    async def receive(request: Request) -> JSONResponse:
        body = await _read_body(request)
        try:
            if nonce_for is None:
                event = _receive.verify(body, request.headers, nonce)
            else:
                process_id = _receive.parse_unverified(body).process_id
                try:
                    expected = await _call(nonce_for, process_id)
                except Exception:
                    _receive.logger.exception("nonce_for failed for a DealCreated notification")
                    return JSONResponse({"ok": False, "error": "nonce lookup failed"}, status_code=500)
                event = _receive.verify(body, request.headers, expected)
        except WebhookVerificationError as e:
            return JSONResponse({"ok": False, "error": str(e)}, status_code=401)
        except WebhookPayloadError as e:
            return JSONResponse({"ok": False, "error": str(e)}, status_code=400)
        try:
            await _call(on_event, event)
        except Exception:
            _receive.logger.exception("on_event failed for DealCreated %s", event.process_id)
            return JSONResponse({"ok": False, "error": "the event handler failed"}, status_code=500)
        return JSONResponse({"ok": True})

    return router

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

from ..journals import Journal
from ..seen import SeenSet
from . import receiver

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
        if size > receiver.MAX_BODY_BYTES:
            break
    return b"".join(chunks)


def deal_created_router(
    *,
    nonce: str | None = None,
    nonce_for: Callable[[str], Any] | None = None,
    nonce_for_ref: Callable[[str], Any] | None = None,
    on_event: Callable[..., Any],
    path: str = "/fxpay/deal-created",
    ref_param: str = "ref",
    seen: SeenSet | None = None,
    journal: Journal | None = None,
) -> APIRouter:
    """An ``APIRouter`` with one ``POST path`` route that receives ``DealCreated``.

    Give ``journal`` alone (below), or exactly one of ``nonce`` (one nonce for every notification), ``nonce_for``
    (called with the event's ``processId``, returns the ``callback_nonce`` stored with that
    ``SpotDeal``, or ``None`` when the process is unknown) and ``nonce_for_ref`` (called
    with the ``ref_param`` query parameter of the callback URL, a reference the application
    chose and stored with its nonce *before* ``create_spot_deal``: the race-free pattern).
    Lookups may be sync or async. ``on_event`` (sync, run in the thread pool, or async)
    receives each verified event, and with ``nonce_for_ref`` the reference too:
    ``on_event(event, ref)``.

    With ``journal`` (the client's :class:`fxpay.Journal`) and none of ``nonce``,
    ``nonce_for`` and ``nonce_for_ref``, each notification is verified against the callback
    nonces the journal issued to keyed spot deals (a nonce it never issued is a 401), and
    settles its spot deal's key, whatever state it is in: ``done`` (``result`` the
    ``processId``, ``deal_id`` set) on success, ``released`` on failure. A spot deal whose
    answer was lost (``OutcomeUnknownError``) so settles itself, and a later call with its key
    returns the ``SpotDeal`` without sending. The journal failing answers 503 with
    ``Retry-After``, so the sender delivers again. With ``journal`` and a nonce setting, each
    verified successful event's ``dealId`` is recorded on its spot deal's entry
    (``journal.get(key).deal_id``).

    ``on_event`` runs at most once per ``processId`` (``seen``: a :class:`fxpay.seen.SeenSet`,
    a :class:`fxpay.seen.MemorySeenSet` of this router by default; give every worker the same
    :class:`fxpay.seen.RedisSeenSet` when there are several).

    Answers: 200 ``{"ok": true}`` after ``on_event`` returned, or without calling it when the
    ``processId`` was handled before (``"duplicate": true``); 409 while another delivery of
    it is being handled; 401 when the nonce is missing, wrong or unknown; 400 when the body
    is not a valid event; 503 with ``Retry-After`` when the seen-set is unavailable (it raised:
    Redis down), so the sender backs off; 500 when a lookup or ``on_event`` raised. Failures
    are logged on the ``fxpay.webhooks`` logger and leave the ``processId`` unseen, so the
    sender retries.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    receiver.check_journal(journal)
    conf = receiver.settings(
        nonce=nonce,
        nonce_for=nonce_for,
        nonce_for_ref=nonce_for_ref,
        ref_param=ref_param,
        seen=seen,
        on_event=on_event,
        journal=journal,
    )
    router = APIRouter()

    async def make(call: receiver.Call) -> Any:
        if call.seen and conf.seen_inline:
            return call.fn(*call.args)
        return await _call(call.fn, *call.args)

    @router.post(path, name="fxpay_deal_created")
    async def receive_deal_created(request: Request) -> JSONResponse:
        # Continues the sender's trace when a traceparent came (and tracing is on).
        with receiver.traced(request.headers):
            body = await _read_body(request)
            steps = receiver.flow(conf, journal, body, request.headers, request.query_params)
            answer = await receiver.drive_async(steps, make)
        return JSONResponse(answer[1], status_code=answer[0], headers=receiver.headers_of(answer))

    return router

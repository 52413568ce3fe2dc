"""A Django receiver of the ``DealCreated`` notification.

.. code-block:: python

    urlpatterns = [path("fxpay/deal-created", deal_created_view(nonce_for=lookup, on_event=handle))]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ..errors import WebhookPayloadError, WebhookVerificationError
from ..models import DealCreated
from . import _receive

__all__ = ["deal_created_view"]


def _sync(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` callable from a sync view, whether it is a plain or a coroutine function."""
    return async_to_sync(fn) if inspect.iscoroutinefunction(fn) else fn


def deal_created_view(
    *,
    nonce: str | None = None,
    nonce_for: Callable[[str], Any] | None = None,
    on_event: Callable[[DealCreated], Any],
) -> Callable[[HttpRequest], JsonResponse]:
    """A view (CSRF-exempt, POST only: anything else gets 405) that receives ``DealCreated``.

    Give exactly one of ``nonce`` (one nonce for every notification) and ``nonce_for``
    (called with the event's ``processId``, returns the ``callback_nonce`` stored with that
    ``SpotDeal``, or ``None`` when the process is unknown). ``on_event`` receives each
    verified event; a coroutine function is run with ``async_to_sync``.

    Answers: 200 ``{"ok": true}`` after ``on_event`` returned; 401 when the nonce is missing,
    wrong or unknown; 400 when the body is not a valid event; 500 when ``nonce_for`` or
    ``on_event`` raised (logged on the ``fxpay.webhooks`` logger), so the sender retries.
    """
    _receive.check_nonce_settings(nonce, nonce_for)
    lookup = _sync(nonce_for) if nonce_for is not None else None
    handle = _sync(on_event)

    @csrf_exempt
    @require_POST
    def receive_deal_created(request: HttpRequest) -> JsonResponse:
        # Continues the sender's trace when a traceparent came (and tracing is on).
        with _receive.traced(request.headers):
            return receive(request)

    def receive(request: HttpRequest) -> JsonResponse:
        # One byte past the limit is enough for the parser to refuse the body.
        body = request.read(_receive.MAX_BODY_BYTES + 1)
        try:
            if lookup is None:
                event = _receive.verify(body, request.headers, nonce)
            else:
                process_id = _receive.parse_unverified(body).process_id
                try:
                    expected = lookup(process_id)
                except Exception:
                    _receive.logger.exception("nonce_for failed for a DealCreated notification")
                    return JsonResponse({"ok": False, "error": "nonce lookup failed"}, status=500)
                event = _receive.verify(body, request.headers, expected)
        except WebhookVerificationError as e:
            return JsonResponse({"ok": False, "error": str(e)}, status=401)
        except WebhookPayloadError as e:
            return JsonResponse({"ok": False, "error": str(e)}, status=400)
        try:
            handle(event)
        except Exception:
            _receive.logger.exception("on_event failed for DealCreated %s", event.process_id)
            return JsonResponse({"ok": False, "error": "the event handler failed"}, status=500)
        return JsonResponse({"ok": True})

    return receive_deal_created

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
from ..journals import Journal
from ..seen import SeenSet
from . import _receive

__all__ = ["deal_created_view"]


def _sync(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` callable from a sync view, whether it is a plain or a coroutine function."""
    return async_to_sync(fn) if inspect.iscoroutinefunction(fn) else fn


def deal_created_view(
    *,
    nonce: str | None = None,
    nonce_for: Callable[[str], Any] | None = None,
    nonce_for_ref: Callable[[str], Any] | None = None,
    on_event: Callable[..., Any],
    ref_param: str = "ref",
    seen: SeenSet | None = None,
    journal: Journal | None = None,
) -> Callable[[HttpRequest], JsonResponse]:
    """A view (CSRF-exempt, POST only: anything else gets 405) that receives ``DealCreated``.

    Give exactly one of ``nonce`` (one nonce for every notification), ``nonce_for``
    (called with the event's ``processId``, returns the ``callback_nonce`` stored with that
    ``SpotDeal``, or ``None`` when the process is unknown) and ``nonce_for_ref`` (called
    with the ``ref_param`` query parameter of the callback URL, a reference the application
    chose and stored with its nonce *before* ``create_spot_deal``: the race-free pattern).
    ``on_event`` receives each verified event, and with ``nonce_for_ref`` the reference too:
    ``on_event(event, ref)``. Coroutine functions are run with ``async_to_sync``.

    With ``journal`` (the client's :class:`fxpay.Journal`), each verified successful event's
    ``dealId`` is recorded on its spot deal's entry (``journal.get(key).deal_id``).

    ``on_event`` runs at most once per ``processId`` (``seen``: a :class:`fxpay.seen.SeenSet`,
    a :class:`fxpay.seen.MemorySeenSet` of this view by default; give every worker the same
    :class:`fxpay.seen.RedisSeenSet` when there are several).

    Answers: 200 ``{"ok": true}`` after ``on_event`` returned, or without calling it when the
    ``processId`` was handled before (``"duplicate": true``); 409 while another delivery of
    it is being handled; 401 when the nonce is missing, wrong or unknown; 400 when the body
    is not a valid event; 503 with ``Retry-After`` when the seen-set is unavailable (it raised:
    Redis down), so the sender backs off; 500 when a lookup or ``on_event`` raised. Failures
    are logged on the ``fxpay.webhooks`` logger and leave the ``processId`` unseen, so the
    sender retries.
    """
    _receive.check_journal(journal)
    conf = _receive.settings(
        nonce=nonce, nonce_for=nonce_for, nonce_for_ref=nonce_for_ref, ref_param=ref_param, seen=seen, on_event=on_event
    )
    by_id = _sync(nonce_for) if nonce_for is not None else None
    by_ref = _sync(nonce_for_ref) if nonce_for_ref is not None else None
    handle = _sync(on_event)
    seen_claim, seen_commit, seen_release = (_sync(conf.seen.claim), _sync(conf.seen.commit), _sync(conf.seen.release))

    @csrf_exempt
    @require_POST
    def receive_deal_created(request: HttpRequest) -> JsonResponse:
        # Continues the sender's trace when a traceparent came (and tracing is on).
        with _receive.traced(request.headers):
            return receive(request)

    def receive(request: HttpRequest) -> JsonResponse:
        # One byte past the limit is enough for the parser to refuse the body.
        body = request.read(_receive.MAX_BODY_BYTES + 1)
        ref: str | None = None
        try:
            lookup: Callable[[str], Any] | None = None
            if by_ref is not None:
                ref = request.GET.get(ref_param)
                if not ref:
                    raise _receive.no_ref(ref_param)
                lookup, by = by_ref, ref
            elif by_id is not None:
                lookup, by = by_id, _receive.parse_unverified(body).process_id
            if lookup is None:
                event = _receive.verify(body, request.headers, nonce)
            else:
                try:
                    expected = lookup(by)
                except Exception:
                    _receive.logger.exception("nonce lookup failed for a DealCreated notification")
                    return _answer(_receive.LOOKUP_FAILED)
                event = _receive.verify(body, request.headers, expected)
        except WebhookVerificationError as e:
            return JsonResponse({"ok": False, "error": str(e)}, status=401)
        except WebhookPayloadError as e:
            return JsonResponse({"ok": False, "error": str(e)}, status=400)

        _receive.complete_spot(journal, event)
        key = _receive.seen_key(event)
        try:
            claim = seen_claim(key)
        except Exception:
            _receive.logger.exception("the seen-set failed to claim DealCreated %s", event.process_id)
            return _answer(_receive.SEEN_UNAVAILABLE)
        if claim != "claimed":
            return _answer(_receive.after_claim(claim, event))
        try:
            if ref is None:
                handle(event)
            else:
                handle(event, ref)
        except Exception:
            _receive.logger.exception("on_event failed for DealCreated %s", event.process_id)
            try:
                seen_release(key)
            except Exception:
                _receive.logger.exception("the seen-set failed to release DealCreated %s", event.process_id)
            return _answer(_receive.HANDLER_FAILED)
        try:
            seen_commit(key)
        except Exception:
            # on_event did run: answer 200, so the service does not send it again.
            _receive.logger.exception("the seen-set failed to commit DealCreated %s", event.process_id)
        return _answer(_receive.OK)

    return receive_deal_created


def _answer(answer: _receive.Answer) -> JsonResponse:
    return JsonResponse(answer[1], status=answer[0], headers=_receive.headers_of(answer))

"""The receiver application that test_receivers_once.py and test_receivers_race.py serve in
processes of their own (uvicorn or gunicorn), sharing one redis-server.

Environment: ``FXPAY_RECV_REDIS`` (the Redis URL) and ``FXPAY_RECV_PREFIX`` (the key prefix
of this test). Keys, all under the prefix:

- ``nonce:<processId or ref>``: the nonce the test (the "application") stored;
- ``handled``: a list, one JSON entry per ``on_event`` call (processId, ref, dealId, pid);
- ``started:<processId>``: set when ``on_event`` starts;
- ``hold:<processId>``: when set, ``on_event`` waits for an item pushed on ``go:<processId>``;
- ``fail:<processId>``: when set, ``on_event`` deletes it and raises.

``fastapi_app`` serves the receivers under uvicorn, ``django_app`` (WSGI) under gunicorn:
``POST /by-id`` looks the nonce up by processId, ``POST /by-ref`` by the ``ref`` query
parameter of the callback URL (the race-free pattern). Both use one ``RedisSeenSet``.
"""

from __future__ import annotations

import json
import os
import sys
import types
from functools import cache
from typing import Any

import redis

import fxpay
from fxpay.seen import RedisSeenSet

PREFIX = os.environ["FXPAY_RECV_PREFIX"]
r = redis.Redis.from_url(os.environ["FXPAY_RECV_REDIS"], decode_responses=True)
seen = RedisSeenSet(r, prefix=PREFIX + "seen:")


def nonce_for(key: str) -> str | None:
    value: str | None = r.get(PREFIX + "nonce:" + key)
    return value


def on_event(event: fxpay.DealCreated, ref: str | None = None) -> None:
    pid = event.process_id
    r.set(PREFIX + "started:" + pid, 1)
    if r.exists(PREFIX + "hold:" + pid) and r.blpop([PREFIX + "go:" + pid], timeout=60) is None:
        raise RuntimeError("the test never released this event")
    if r.delete(PREFIX + "fail:" + pid):
        raise RuntimeError("on_event failed, as the test asked")
    entry = {"processId": pid, "ref": ref, "dealId": event.deal_id, "worker": os.getpid()}
    r.rpush(PREFIX + "handled", json.dumps(entry))


@cache
def _fastapi() -> Any:
    from fastapi import FastAPI

    from fxpay.contrib.fastapi import deal_created_router

    app = FastAPI()
    app.include_router(deal_created_router(nonce_for=nonce_for, on_event=on_event, seen=seen, path="/by-id"))
    app.include_router(deal_created_router(nonce_for_ref=nonce_for, on_event=on_event, seen=seen, path="/by-ref"))
    return app


@cache
def _django() -> Any:
    import django
    from django.conf import settings
    from django.core.wsgi import get_wsgi_application
    from django.urls import path

    from fxpay.contrib.django import deal_created_view

    urls = types.ModuleType("receiver_app_urls")
    urls.urlpatterns = [  # type: ignore[attr-defined]
        path("by-id", deal_created_view(nonce_for=nonce_for, on_event=on_event, seen=seen)),
        path("by-ref", deal_created_view(nonce_for_ref=nonce_for, on_event=on_event, seen=seen)),
    ]
    sys.modules[urls.__name__] = urls
    settings.configure(
        DEBUG=False,
        SECRET_KEY="test-only",
        ALLOWED_HOSTS=["127.0.0.1"],
        ROOT_URLCONF=urls.__name__,
        MIDDLEWARE=["django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware"],
        INSTALLED_APPS=[],
        APPEND_SLASH=False,
    )
    django.setup()
    return get_wsgi_application()


def __getattr__(name: str) -> Any:
    # Each server asks for the one it serves; only that framework is set up.
    if name == "fastapi_app":
        return _fastapi()
    if name == "django_app":
        return _django()
    raise AttributeError(name)

"""A plain WSGI app whose module-level fxpay client books quotes, for
tests/python/deploy/test_deploy_gunicorn.py (run under `gunicorn --preload -w 2`).

With --preload the master imports this module, so the client is made (and used: one quote
is booked at import) before the workers are forked; every worker then uses it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

import fxpay

CLIENT = fxpay.Client.from_env(timeout=30)
BOOKED_AT_IMPORT = CLIENT.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="AUD")
LOADED_BY = os.getpid()


async def _read_async(quote_id: str) -> str:
    return str((await CLIENT.get_quote_async(quote_id)).buy_amount)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") != "/quote":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]
    amount = environ.get("QUERY_STRING", "").removeprefix("amount=") or "1.00"
    try:
        quote_id = CLIENT.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="EUR")
        body = {
            "pid": os.getpid(),
            "loaded_by": LOADED_BY,
            "quote_id": quote_id,
            # Read back blocking, and awaitable on an event loop of this worker.
            "amounts": [str(CLIENT.get_quote(quote_id).buy_amount), asyncio.run(_read_async(quote_id))],
            "import_quote": CLIENT.get_quote(BOOKED_AT_IMPORT).id,
        }
        status = "200 OK"
    except Exception as e:  # shown to the test
        body = {"error": f"{type(e).__name__}: {e}"}
        status = "500 Internal Server Error"
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]

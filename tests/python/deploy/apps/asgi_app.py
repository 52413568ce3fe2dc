"""A FastAPI app whose module-level fxpay client books quotes, for
tests/python/deploy/test_deploy_gunicorn.py (run under `gunicorn --preload -w 2 -k
uvicorn.workers.UvicornWorker`): awaitable calls on each worker's event loop, and blocking
calls on its thread pool, with a client made in the master before the fork.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

import fxpay

CLIENT = fxpay.Client.from_env(timeout=30)
BOOKED_AT_IMPORT = CLIENT.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="AUD")
LOADED_BY = os.getpid()

app = FastAPI()


@app.get("/quote")
async def quote(amount: str = "1.00") -> dict[str, Any]:
    quote_id = await CLIENT.create_quote_async(buy_currency="USD", buy_amount=amount, sell_currency="EUR")
    return {
        "pid": os.getpid(),
        "loaded_by": LOADED_BY,
        "quote_id": quote_id,
        # Read back awaitable, and blocking on the thread pool.
        "amounts": [str((await CLIENT.get_quote_async(quote_id)).buy_amount), await run_in_threadpool(sync_read, quote_id)],
        "import_quote": (await CLIENT.get_quote_async(BOOKED_AT_IMPORT)).id,
    }


def sync_read(quote_id: str) -> str:
    return str(CLIENT.get_quote(quote_id).buy_amount)

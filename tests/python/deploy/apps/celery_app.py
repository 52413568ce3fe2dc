"""A Celery app whose tasks use a module-level fxpay client, for
tests/python/deploy/test_deploy_celery.py (worker: `--pool=prefork -c 2`, broker: redis-server).

The worker's main process imports this module, so the client is made (and used: one quote is
booked at import) before the pool's children are forked.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from celery import Celery  # type: ignore[import-untyped]

import fxpay

app = Celery("celery_app", broker=os.environ["FXPAY_TEST_BROKER"], backend=os.environ["FXPAY_TEST_BROKER"])
app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"], worker_hijack_root_logger=False)

CLIENT = fxpay.Client.from_env(timeout=30)
BOOKED_AT_IMPORT = CLIENT.create_quote(buy_currency="USD", buy_amount="10.00", sell_currency="AUD")
LOADED_BY = os.getpid()


async def _read_async(quote_id: str) -> str:
    return str((await CLIENT.get_quote_async(quote_id)).buy_amount)


@app.task(name="celery_app.book_quote")  # type: ignore[untyped-decorator]
def book_quote(amount: str) -> dict[str, Any]:
    quote_id = CLIENT.create_quote(buy_currency="USD", buy_amount=amount, sell_currency="EUR")
    return {
        "pid": os.getpid(),
        "loaded_by": LOADED_BY,
        "quote_id": quote_id,
        # Read back blocking, and awaitable on an event loop of this pool child.
        "amounts": [str(CLIENT.get_quote(quote_id).buy_amount), asyncio.run(_read_async(quote_id))],
        "import_quote": CLIENT.get_quote(BOOKED_AT_IMPORT).id,
    }

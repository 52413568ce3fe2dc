"""A Celery app whose task books a deal under an idempotency key kept in a RedisJournal (or a
PostgresJournal), as docs/idempotency.md's recipe does (acks_late, task_reject_on_worker_lost)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery  # type: ignore[import-untyped]

import fxpay

app = Celery("journal_celery_app", broker=os.environ["FXPAY_TEST_BROKER"], backend=os.environ["FXPAY_TEST_BROKER"])
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    broker_connection_retry_on_startup=True,
)


def journal_of(spec: str) -> fxpay.Journal:
    """FXPAY_TEST_JOURNAL: a Redis URL, or "postgres:CONNINFO|TABLE"."""
    if spec.startswith("postgres:"):
        conninfo, _, table = spec.removeprefix("postgres:").partition("|")
        return fxpay.PostgresJournal(conninfo, table=table)
    return fxpay.RedisJournal(spec, prefix="celery:")


# Made in the worker's main process, before the pool forks: each child uses it.
client = fxpay.Client.from_env(journal=journal_of(os.environ["FXPAY_TEST_JOURNAL"]))


@app.task(bind=True, acks_late=True, task_reject_on_worker_lost=True, max_retries=200)  # type: ignore[misc]
def pay(self: Any, i: int, quote_id: str, beneficiary_id: str, amount: str) -> dict[str, Any]:
    try:
        deal = client.create_deal(
            quote_id=quote_id,
            funding_source="Own account",
            beneficiaries=[fxpay.DealBeneficiary(beneficiary_id, amount, "invoice", f"PAY-{i}")],
            idempotency_key=f"pay-{i}/deal",
        )
    except fxpay.InProgressError as e:
        # Another worker holds the key, or held it and died: try again once its lease lapses.
        raise self.retry(exc=e, countdown=2) from e
    except fxpay.OutcomeUnknownError as e:
        return {"i": i, "state": "unknown", "error": str(e), "pid": os.getpid()}
    return {"i": i, "state": "done", "deal_id": deal.deal_id, "pid": os.getpid()}

"""A Celery app whose workers pay chunks of a payout table with fxpay.contrib.celery: each
worker process's client is made by the factory registered here, with a RedisJournal every
worker shares. Broker, result backend and journal: one redis-server (FXPAY_TEST_BROKER,
FXPAY_TEST_JOURNAL); the sandbox's address and credentials: FXPAY_BASE_URL and the rest."""

from __future__ import annotations

import os

from celery import Celery  # type: ignore[import-untyped]

import fxpay
import fxpay.contrib.celery

# A worker killed whole leaves its chunks unacknowledged: the broker gives them to another
# worker once they have been invisible this long (and looks every second).
transport = {"visibility_timeout": 8, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
if "FXPAY_TEST_BROKER_WAIT" in os.environ:
    # How long a worker's each wait on the queue (BRPOP) lasts: the lost-chunk test stops a
    # worker inside one and needs it to outlast the stop.
    transport["polling_interval"] = float(os.environ["FXPAY_TEST_BROKER_WAIT"])

app = Celery("payout_celery_app", broker=os.environ["FXPAY_TEST_BROKER"], backend=os.environ["FXPAY_TEST_BROKER"])
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    broker_transport_options=transport,
)


def make_client() -> fxpay.Client:
    return fxpay.Client.from_env(journal=fxpay.RedisJournal(os.environ["FXPAY_TEST_JOURNAL"], prefix="fan:"))


pay_out_chunk = fxpay.contrib.celery.register(app, make_client)


def broken_client() -> fxpay.Client:
    raise fxpay.ConfigurationError("no client today")


# A task whose every chunk fails before paying (its worker cannot make a client).
broken_chunk = fxpay.contrib.celery.register(app, broken_client, name="test.broken_chunk")

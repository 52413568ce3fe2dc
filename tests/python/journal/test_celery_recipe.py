"""docs/idempotency.md's Celery recipe, run as written (only its Redis addresses changed) under
a prefork worker with a real redis-server: the pool child is SIGKILLed in the middle of a deal,
Celery delivers the task again, and the redelivered task ends with the key unknown and the
recipe's alert hook called. The other tasks end done, each deal booked once."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import make_beneficiary, need, need_program

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefork pool needs fork")

DOC = Path(__file__).resolve().parents[3] / "docs" / "idempotency.md"

# The test's own alert hook, defined after the recipe (the task looks the name up when it
# runs): it records each key it is called for.
ALERT_HOOK = """

import os as _os


def notify_operations(entry):
    with open(_os.environ["FXPAY_TEST_ALERTS"], "a") as f:
        f.write(f"{entry.key} {entry.state}\\n")
"""


def recipe() -> str:
    text = DOC.read_text()
    section = text[text.index("## A Celery recipe") :]
    m = re.search(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert m is not None
    return m.group(1)


@pytest.fixture
def redis_port(tmp_path: Path) -> Iterator[int]:
    """A redis-server on a TCP port of loopback, with AOF as the recipe asks."""
    redis = need("redis")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    args = [need_program("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(tmp_path), "--save", ""]
    proc = subprocess.Popen([*args, "--appendonly", "yes", "--appendfsync", "always"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    probe = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            probe.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "redis-server did not start"
            assert proc.poll() is None, "redis-server exited"
            time.sleep(0.02)
    probe.close()
    yield port
    proc.terminate()
    proc.wait(10)


def pool_children(master: int) -> list[int]:
    psutil = need("psutil")
    return [c.pid for c in psutil.Process(master).children()]


@pytest.mark.filterwarnings("ignore::fxpay.testing.UnfiredFaultWarning")
def test_the_celery_recipe_alerts_for_a_deal_whose_worker_was_killed(fxpay_sandbox: Any, redis_port: int, tmp_path: Path) -> None:
    need("celery")
    from celery import Celery  # type: ignore[import-untyped]

    code = recipe()
    assert "reject_on_worker_lost=True" in code
    assert "task_reject_on_worker_lost" not in code.split("@app.task", 1)[1].split("def pay_invoice")[0]
    module = tmp_path / "payments.py"
    module.write_text(code.replace("127.0.0.1:6379", f"127.0.0.1:{redis_port}") + ALERT_HOOK)
    alerts = tmp_path / "alerts.txt"
    alerts.touch()

    c = fxpay_sandbox.client()
    bid = c.create_beneficiary(make_beneficiary())
    jobs = []
    for i in range(3):
        qid = c.create_quote(buy_currency="USD", buy_amount=Decimal(10 + i), sell_currency="AUD")
        jobs.append((f"INV-{i}", qid, bid, str(c.get_quote(qid).sell_amount)))
    log = tmp_path / "celery.log"
    env = dict(
        os.environ,
        FXPAY_BASE_URL=fxpay_sandbox.base_url,
        FXPAY_CLIENT_ID=fxpay_sandbox.client_id,
        FXPAY_CLIENT_SECRET=fxpay_sandbox.client_secret,
        FXPAY_TEST_ALERTS=str(alerts),
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "payments", "worker", "--pool=prefork", "-c", "2", "--loglevel=INFO"),
                *("--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"recipe-{os.getpid()}@127.0.0.1"),
                "--prefetch-multiplier=1",
            ],
            cwd=str(tmp_path),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    broker = f"redis://127.0.0.1:{redis_port}/0"
    sender = Celery("sender", broker=broker)
    journal = fxpay.RedisJournal(f"redis://127.0.0.1:{redis_port}/1")
    journal.create()
    killed_key = "invoice:INV-0:deal"
    try:
        # The first deal's answer is held for 4 s: its worker child is killed while it waits.
        fxpay_sandbox.delay_next("POST /v1/payments/deals", 4.0)
        sender.send_task("payments.pay_invoice", args=jobs[0])
        deadline = time.monotonic() + 60
        while (e := journal.get(killed_key)) is None or e.state != "pending":
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.02)
        time.sleep(0.5)  # the request is on its way (the sandbox holds the answer)
        holder_pid = int(e.holder.rsplit("/", 2)[1])
        assert holder_pid in pool_children(worker.pid)
        os.kill(holder_pid, signal.SIGKILL)
        for job in jobs[1:]:
            sender.send_task("payments.pay_invoice", args=job)
        # Redelivered, retried while the dead holder's lease runs, then unknown and alerted.
        deadline = time.monotonic() + 150
        while killed_key not in alerts.read_text():
            assert time.monotonic() < deadline, f"no alert\n{log.read_text()[-5000:]}"
            time.sleep(0.2)
        deadline = time.monotonic() + 60
        while not all((journal.get(f"invoice:INV-{i}:deal") or e).state == "done" for i in (1, 2)):
            assert time.monotonic() < deadline, log.read_text()[-5000:]
            time.sleep(0.1)
    finally:
        sender.close()
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
    text = log.read_text()
    print(text[-3000:])
    assert alerts.read_text().splitlines() == [f"{killed_key} unknown"]
    entry = journal.get(killed_key)
    assert entry is not None
    assert entry.state == "unknown"
    # The redelivered task ran again (retried while the holder's lease ran), and ended with the
    # alert: it raised OutcomeUnknownError, not InProgressError after its retries ran out.
    assert re.search(r"pay_invoice\[.*\] raised unexpected: OutcomeUnknownError", text), text[-3000:]
    assert "Retry in" in text
    assert not re.search(r"raised unexpected: InProgressError", text)
    refs = collections.Counter(b["payReference"] for d in fxpay_sandbox.deals() for b in d["beneficiaries"])
    assert max(refs.values()) == 1  # nothing booked twice
    assert refs["INV-1"] == refs["INV-2"] == 1

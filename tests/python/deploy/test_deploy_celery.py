"""A Celery worker (`--pool=prefork -c 2`) whose tasks use a module-level client, with a
redis-server broker started by the test on a free port of 127.0.0.1.

The worker's main process imports the app (and books a quote with the client) before it
forks the pool; the tasks book and read quotes in the pool's children.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import need, need_program

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefork pool needs fork")

APPS = Path(__file__).parent / "apps"
RESULT_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM (a warm shutdown), then SIGKILL to the whole process group if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # pool children too, should any be left
    proc.wait(10)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    need("celery")
    redis = need("redis")
    redis_server = need_program("redis-server")
    port = free_port()
    proc = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        # Ping with a client that waits for the server to come up (no fixed sleep).
        probe = redis.Redis.from_url(url, socket_connect_timeout=1)
        deadline = time.monotonic() + 30
        while True:
            try:
                if probe.ping():
                    break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("redis-server did not start")
                time.sleep(0.05)
        probe.close()
        yield url
    finally:
        stop(proc, 5)


@pytest.fixture
def worker(broker: str, fxpay_sandbox: Any, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log = tmp_path / "celery.log"
    env = dict(
        os.environ,
        FXPAY_BASE_URL=fxpay_sandbox.base_url,
        FXPAY_CLIENT_ID=fxpay_sandbox.client_id,
        FXPAY_CLIENT_SECRET=fxpay_sandbox.client_secret,
        FXPAY_TEST_BROKER=broker,
        PYTHONPATH=os.pathsep.join([str(APPS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "celery_app",
                "worker",
                "--pool=prefork",
                "-c",
                "2",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"fork-test-{os.getpid()}@127.0.0.1",
            ],
            cwd=str(APPS),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc, log
    finally:
        stop(proc, 20)


def test_celery_prefork_tasks_use_a_module_level_client(worker: tuple[subprocess.Popen[bytes], Path], broker: str) -> None:
    from celery import Celery  # type: ignore[import-untyped]

    proc, log = worker
    sender = Celery("sender", broker=broker, backend=broker)
    sender.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    amounts = [f"{i + 1}.75" for i in range(8)]
    # Queued at once; the worker takes them as soon as its pool is up.
    pending = [sender.send_task("celery_app.book_quote", args=(a,)) for a in amounts]
    try:
        results = [p.get(timeout=RESULT_TIMEOUT) for p in pending]
    except Exception as e:  # show the worker's log with the failure
        pytest.fail(f"{type(e).__name__}: {e}\nworker exit: {proc.poll()}\n{log.read_text()}")
    finally:
        sender.close()
    master = proc.pid
    for amount, r in zip(amounts, results, strict=True):
        assert r["loaded_by"] == master, r  # the client was made in the worker's main process
        assert r["pid"] != master, r  # and used in a forked pool child
        assert r["amounts"] == [amount, amount], r
        assert r["import_quote"]
    assert 1 <= len({r["pid"] for r in results}) <= 2

"""`gunicorn --preload -w 2` serving an app whose module-level client books quotes: a plain
WSGI app on sync workers, and a FastAPI app on uvicorn workers.

The master imports the app (and books a quote with the client) before it forks the two
workers; every request then books and reads a quote in a worker, blocking and awaitable.
The sandbox runs in the test process; gunicorn listens on a free port of 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import http.client
import json
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

from conftest import need

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="gunicorn needs fork")

APPS = Path(__file__).parent / "apps"
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (a graceful stop), then SIGKILL to the whole process group if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the workers too, should any be left
    proc.wait(10)


@pytest.fixture(params=["sync", "uvicorn"])
def gunicorn(request: pytest.FixtureRequest, fxpay_sandbox: Any, tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    need("gunicorn")
    if request.param == "sync":
        worker = ["wsgi_app:app"]
    else:
        need("fastapi")
        need("uvicorn.workers")
        worker = ["-k", "uvicorn.workers.UvicornWorker", "asgi_app:app"]
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = dict(
        os.environ,
        FXPAY_BASE_URL=fxpay_sandbox.base_url,
        FXPAY_CLIENT_ID=fxpay_sandbox.client_id,
        FXPAY_CLIENT_SECRET=fxpay_sandbox.client_secret,
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--preload",
                "-w",
                "2",
                "--bind",
                f"127.0.0.1:{port}",
                "--chdir",
                str(APPS),
                "--graceful-timeout",
                "10",
                *worker,
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"gunicorn exited with {proc.returncode}:\n{log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not listen within {START_TIMEOUT} s:\n{log.read_text()}")
                time.sleep(0.05)
        yield port, proc.pid, log
    finally:
        stop(proc)


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_gunicorn_preload_workers_book_quotes_with_a_module_level_client(gunicorn: tuple[int, int, Path]) -> None:
    port, master, log = gunicorn
    seen_workers = set()
    for i in range(12):
        amount = f"{i + 1}.50"
        status, body = get(port, f"/quote?amount={amount}")
        assert status == 200, (body, log.read_text())
        assert body["loaded_by"] == master  # the client was made in the master, before the fork
        assert body["pid"] != master  # and used in a forked worker
        assert body["amounts"] == [amount, amount]
        assert body["import_quote"]
        seen_workers.add(body["pid"])
    assert 1 <= len(seen_workers) <= 2

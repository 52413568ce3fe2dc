"""A redis-server and receiver servers (uvicorn, gunicorn) in processes of their own, on
loopback, for test_receivers_once.py and test_receivers_race.py."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).parent
REDIS_SERVER = shutil.which("redis-server")


def wait_for(cond: Callable[[], bool], seconds: float = 20.0, what: str = "the condition") -> None:
    """Polls ``cond`` until it holds; fails after ``seconds`` (far above the expected time)."""
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


@contextmanager
def redis_server() -> Iterator[str]:
    """A throw-away redis-server on a free 127.0.0.1 port; yields its URL."""
    import redis

    if REDIS_SERVER is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (scripts/setup installs it)")
        pytest.skip("redis-server is not installed")
    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        end = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < end:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        if proc.poll() is None:
            break
        # Someone took the port between our probe and redis-server's bind: try another.
    else:
        pytest.fail("redis-server did not start")
    try:
        client.ping()
        yield url
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


@contextmanager
def serve(server: str, redis_url: str, prefix: str, *, workers: int = 1) -> Iterator[str]:
    """Serves receiver_app in a process of its own on a socket bound here (so it is ready
    to take connections at once); ``server`` is ``"uvicorn"`` (the FastAPI app) or
    ``"gunicorn"`` (the Django app, ``workers`` processes with threads). Yields the base URL."""
    sock = listening_socket()
    fd = sock.fileno()
    if server == "uvicorn":
        cmd = [sys.executable, "-m", "uvicorn", "receiver_app:fastapi_app", "--fd", str(fd), "--log-level", "warning", "--lifespan", "off"]
    else:
        cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            "receiver_app:django_app",
            "--bind",
            f"fd://{fd}",
            "-w",
            str(workers),
            "-k",
            "gthread",
            "--threads",
            "8",
            "--log-level",
            "warning",
            "--graceful-timeout",
            "5",
        ]
    env = {
        **os.environ,
        "FXPAY_RECV_REDIS": redis_url,
        "FXPAY_RECV_PREFIX": prefix,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(cmd, cwd=HERE, env=env, pass_fds=[fd])
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        # The socket already listens: this waits in its backlog until the app answers.
        r = httpx.get(f"{base}/by-id", timeout=60)
        assert r.status_code == 405, r.text
        assert proc.poll() is None
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        sock.close()


def new_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}:"

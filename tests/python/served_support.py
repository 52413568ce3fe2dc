"""A served sandbox in its own process (`python -m fxpay.sandbox --port 0`), for the tests of
the admin API, RemoteSandbox, TLS and the pytest plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import fxpay.testing

# The lines `python -m fxpay.sandbox` prints before it serves (FXPAY_CA_BUNDLE with --tls).
LINES = ("BASE_URL", "CLIENT_ID", "CLIENT_SECRET", "REDIRECT_URI", "USERNAME", "PASSWORD", "ADMIN_TOKEN")


@contextmanager
def served(*args: str, command: tuple[str, ...] = ("fxpay.sandbox",)) -> Iterator[dict[str, str]]:
    """Starts a served sandbox; yields its `FXPAY_*` lines as a dict; stops it at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", *command, "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        want = {f"FXPAY_{n}" for n in LINES} | ({"FXPAY_CA_BUNDLE"} if "--tls" in args else set())
        want |= {"FXPAY_CLIENT_CERT", "FXPAY_CLIENT_KEY"} if "--client-auth" in args else set()
        out: dict[str, str] = {}
        while not want <= out.keys():
            line = proc.stdout.readline()
            assert line, f"the sandbox exited early ({proc.poll()}); it printed {out}"
            key, _, value = line.strip().partition("=")
            out[key] = value
        yield out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def remote(env: dict[str, str]) -> fxpay.testing.RemoteSandbox:
    return fxpay.testing.RemoteSandbox(
        env["FXPAY_BASE_URL"],
        client_id=env["FXPAY_CLIENT_ID"],
        client_secret=env["FXPAY_CLIENT_SECRET"],
        admin_token=env["FXPAY_ADMIN_TOKEN"],
        ca_bundle=env.get("FXPAY_CA_BUNDLE"),
    )

"""``python -m fxpay``."""

from __future__ import annotations

import os
import subprocess
import sys


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # pymutants runs these on its copy of the package
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run([sys.executable, "-m", "fxpay", *args], capture_output=True, text=True, timeout=60, env={**base, **(env or {})})


def test_quote_against_the_embedded_sandbox() -> None:
    r = run("quote", "USD", "AUD", "1000", "--sandbox")
    assert r.returncode == 0, r.stderr
    assert "1000 USD" in r.stdout
    assert "AUD" in r.stdout
    assert "customer rate" in r.stdout


def test_quote_against_a_served_sandbox() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "fxpay", "sandbox", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        env = {}
        assert proc.stdout is not None
        while len(env) < 3:
            key, _, value = proc.stdout.readline().strip().partition("=")
            if key.startswith("FXPAY_") and key != "FXPAY_REDIRECT_URI":
                env[key] = value
        r = run("quote", "EUR", "JPY", "250", env=env)
        assert r.returncode == 0, r.stderr
        assert "250 EUR" in r.stdout
    finally:
        proc.terminate()
        proc.wait(10)


def test_errors_are_one_line_and_non_zero() -> None:
    r = run("quote", "usd", "AUD", "1000", "--sandbox")
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0
    assert "InvalidRequestError" in r.stderr
    assert "ISO 4217" in r.stderr
    r = run("quote", "USD", "AUD", "1000")
    assert r.returncode == 1
    assert "FXPAY_CLIENT_ID" in r.stderr

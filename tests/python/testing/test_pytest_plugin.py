"""The pytest plugin runs one user suite against the local sandbox or a remote one."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

pytest_plugins = ["pytester"]

USER_SUITE = """
import fxpay

def test_quote(fxpay_client):
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR"))
    assert q.buy_amount == 10

def test_fault(fxpay_sandbox, fxpay_client):
    fxpay_sandbox.fail_next("POST /v1/payments/quotes", 500)
    try:
        fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    except fxpay.ServerError:
        pass
    else:
        raise AssertionError("no fault")

def test_local_only(fxpay_local_sandbox):
    assert fxpay_local_sandbox.stats()["requests"] == 0
"""


def test_local_by_default(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize("given_by", ["option", "environment"])
def test_remote_skips_faults(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, given_by: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "fxpay.sandbox", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        env: dict[str, Any] = {}
        assert proc.stdout is not None
        while len(env) < 3:
            line = proc.stdout.readline()
            assert line, "the sandbox exited"
            key, _, value = line.strip().partition("=")
            if key in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
                env[key] = value
        monkeypatch.setenv("FXPAY_CLIENT_ID", env["FXPAY_CLIENT_ID"])
        monkeypatch.setenv("FXPAY_CLIENT_SECRET", env["FXPAY_CLIENT_SECRET"])
        pytester.makepyfile(test_user=USER_SUITE)
        if given_by == "option":
            monkeypatch.delenv("FXPAY_BASE_URL", raising=False)
            result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-base-url", env["FXPAY_BASE_URL"])
        else:
            monkeypatch.setenv("FXPAY_BASE_URL", env["FXPAY_BASE_URL"])
            result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        # The quote test ran against the remote sandbox; the fault and local-only tests skipped.
        result.assert_outcomes(passed=1, skipped=2)
    finally:
        proc.terminate()
        proc.wait(10)

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


ASYNC_SUITE = """
import pytest

@pytest.mark.asyncio
async def test_marked(fxpay_client):
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount=100, sell_currency="EUR")
    assert (await fxpay_client.get_quote_async(qid)).buy_amount == 100

async def test_unmarked(fxpay_client):
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount=100, sell_currency="EUR")
    assert qid
"""


def docs_toml(section: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "testing.md").read_text()
    part = text.split("## The pytest plugin", 1)[1].split("\n## ", 1)[0]
    assert section in part
    return part.split("```toml\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("mode", ["strict", "docs"])
def test_async_tests_run_as_docs_testing_md_says(pytester: pytest.Pytester, mode: str) -> None:
    # Issue 23 item 10: awaitable tests with the plugin need pytest-asyncio's mode; the docs
    # now say how, and what they say works.
    pytester.makepyfile(test_user=ASYNC_SUITE)
    if mode == "docs":
        pytester.makefile(".toml", pyproject=docs_toml('asyncio_mode = "auto"'))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        result.assert_outcomes(passed=2)
    else:
        strict = '[tool.pytest.ini_options]\nasyncio_mode = "strict"\nasyncio_default_fixture_loop_scope = "function"\n'
        pytester.makefile(".toml", pyproject=strict)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed") == 1  # the marked one only
        assert outcomes.get("failed", 0) + outcomes.get("skipped", 0) == 1
        result.stdout.fnmatch_lines(["*async def functions are not natively supported*"])

"""One user suite, unchanged, runs three ways: against the embedded Sandbox, against a served
sandbox through RemoteSandbox (admin token), and from cassettes with nothing listening."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from served_support import served

pytest_plugins = ["pytester"]

# Payments traffic through fxpay_client (recorded in the cassettes) and, in the last test, the
# sandbox's controls (a fault and the clock) through fxpay_sandbox, local or served.
USER_SUITE = """
from decimal import Decimal

import fxpay
import pytest

pytestmark = pytest.mark.fxpay_cassette


def test_quote(fxpay_client):
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount="10.50", sell_currency="EUR"))
    assert q.buy_amount == Decimal("10.50")
    assert isinstance(q.sell_amount, Decimal)


async def test_quote_async(fxpay_client):
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount=20, sell_currency="JPY")
    assert (await fxpay_client.get_quote_async(qid)).buy_amount == 20


def test_not_found(fxpay_client):
    with pytest.raises(fxpay.NotFoundError):
        fxpay_client.get_quote("00000000-0000-0000-0000-000000000000")


def test_controls(fxpay_sandbox):
    with fxpay_sandbox.client(max_retries=0) as c:
        fxpay_sandbox.fail_next("POST /v1/payments/quotes", 503)
        with pytest.raises(fxpay.ServerError):
            c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")
        before = fxpay_sandbox.now()
        fxpay_sandbox.advance(60)
        assert fxpay_sandbox.now() >= before + 60
        assert fxpay_sandbox.stats()["requests"] >= 1
"""

ENV = ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_ADMIN_TOKEN", "FXPAY_CA_BUNDLE")


def _nothing_listens(base_url: str) -> bool:
    u = urlsplit(base_url)
    with socket.socket() as s:
        return s.connect_ex((u.hostname or "127.0.0.1", u.port or 80)) != 0


def test_one_suite_runs_against_sandbox_remote_sandbox_and_cassettes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    pytester.makepyfile(test_user=USER_SUITE)
    folder = Path(pytester.path) / "cassettes" / "test_user"
    args = ("-p", "no:cacheprovider", "-p", "no:randomly")

    # 1. The embedded Sandbox, live.
    result = pytester.runpytest_subprocess(*args, "--fxpay-no-cassettes")
    result.assert_outcomes(passed=4)
    assert not folder.exists()

    # 2. A served sandbox in another process, driven through RemoteSandbox; then recorded.
    with served() as env:
        for k, v in env.items():
            if k in ENV:
                monkeypatch.setenv(k, v)
        result = pytester.runpytest_subprocess(*args, "--fxpay-no-cassettes")
        result.assert_outcomes(passed=4)
        result = pytester.runpytest_subprocess(*args, "--fxpay-record")
        result.assert_outcomes(passed=4)
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    base_url = env["FXPAY_BASE_URL"]
    recorded = json.loads((folder / "test_quote.json").read_text())
    assert recorded["base_url"] == base_url
    assert env["FXPAY_CLIENT_SECRET"] not in (folder / "test_quote.json").read_text()
    assert _nothing_listens(base_url)

    # 3. The cassettes, replayed with nothing listening on the recorded base URL.
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=4)

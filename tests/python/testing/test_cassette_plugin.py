"""The pytest plugin's cassettes: one user suite records against the sandbox, then replays."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest_plugins = ["pytester"]

USER_SUITE = """
from decimal import Decimal

import fxpay
import pytest

pytestmark = pytest.mark.fxpay_cassette


def test_quote(fxpay_client):
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount="10.50", sell_currency="EUR"))
    assert q.buy_amount == Decimal("10.50")


@pytest.mark.asyncio
async def test_quote_async(fxpay_client):
    qid = await fxpay_client.create_quote_async(buy_currency="USD", buy_amount=20, sell_currency="JPY")
    assert (await fxpay_client.get_quote_async(qid)).buy_amount == 20


@pytest.mark.fxpay_cassette("shared name")
def test_named(fxpay_client):
    with pytest.raises(fxpay.NotFoundError):
        fxpay_client.get_quote("00000000-0000-0000-0000-000000000000")


def test_fixture(fxpay_cassette, fxpay_client):
    assert fxpay_cassette.mode in ("record", "replay")
    fxpay_client.create_quote(buy_currency="GBP", buy_amount=5, sell_currency="USD")
    assert fxpay_cassette.played >= 1
"""


def nothing_listens(base_url: str) -> bool:
    u = urlsplit(base_url)
    with socket.socket() as s:
        return s.connect_ex((u.hostname or "127.0.0.1", u.port or 80)) != 0


def test_record_then_replay_with_pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_SUITE)
    folder = Path(pytester.path) / "cassettes" / "test_user"

    # Replay is the default: with no cassettes yet, every test errors and says how to record.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines(["*--fxpay-record*"])
    assert "pytest.fail(" not in result.stdout.str()  # the message alone, not the plugin's traceback

    # Against the local sandbox, recording.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-record")
    result.assert_outcomes(passed=4)
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["shared_name.json", "test_fixture.json", "test_quote.json", "test_quote_async.json"]
    recorded = json.loads((folder / "test_quote.json").read_text())
    assert nothing_listens(recorded["base_url"])  # that sandbox went away with its run

    # Replay: the same suite, unchanged, with nothing listening.
    before = {p.name: p.read_text() for p in folder.iterdir()}
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert {p.name: p.read_text() for p in folder.iterdir()} == before

    # Live against the sandbox, the files untouched.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-no-cassettes")
    result.assert_outcomes(passed=4)
    assert {p.name: p.read_text() for p in folder.iterdir()} == before

    # A test whose traffic changed fails in replay, naming the request.
    (Path(pytester.path) / "test_user.py").write_text(USER_SUITE.replace('buy_amount="10.50"', 'buy_amount="11"'))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "test_quote and not async")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CassetteMismatchError*POST /payments/quotes*"])


def test_record_against_a_served_sandbox_with_pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording through --fxpay-base-url, then replaying once that server is gone."""
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_SUITE)
    proc = subprocess.Popen([sys.executable, "-m", "fxpay.sandbox", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        env: dict[str, str] = {}
        assert proc.stdout is not None
        while len(env) < 3:
            key, _, value = proc.stdout.readline().strip().partition("=")
            if key in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
                env[key] = value
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-record")
        result.assert_outcomes(passed=4)
    finally:
        proc.terminate()
        proc.wait(30)
    text = (Path(pytester.path) / "cassettes" / "test_user" / "test_quote.json").read_text()
    assert json.loads(text)["base_url"] == env["FXPAY_BASE_URL"]
    assert env["FXPAY_CLIENT_SECRET"] not in text
    assert nothing_listens(env["FXPAY_BASE_URL"])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


NAMED_SUITE = """
from pathlib import Path

import pytest


@pytest.mark.fxpay_cassette(name="by keyword: one")
def test_by_keyword(fxpay_client):
    fxpay_client.create_quote(buy_currency="USD", buy_amount=1, sell_currency="EUR")


@pytest.mark.fxpay_cassette(3)
def test_not_a_name(fxpay_client):
    pass


def test_asks_for_its_cassette(fxpay_cassette, fxpay_client, request):
    if request.config.getoption("--fxpay-no-cassettes"):
        # Live: a throwaway recording, not the file under cassettes/.
        assert fxpay_cassette.mode == "record"
        kept = Path(str(request.node.path)).parent / "cassettes"
        assert not Path(str(fxpay_cassette.path)).is_relative_to(kept)
    fxpay_client.create_quote(buy_currency="USD", buy_amount=2, sell_currency="EUR")
"""


def test_a_cassettes_name_may_be_a_keyword_and_must_be_a_str(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_named=NAMED_SUITE)
    # The plugin registers its marker: a suite run with --strict-markers may use it.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers", "--fxpay-record")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*UsageError: fxpay_cassette(name) takes a str, got 3*"])
    # The keyword's name, made safe for a file name.
    folder = Path(pytester.path) / "cassettes" / "test_named"
    assert sorted(p.name for p in folder.iterdir()) == ["by_keyword_one.json", "test_asks_for_its_cassette.json"]
    # Live, a test that asks for its cassette gets one that records nowhere it keeps.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-no-cassettes", "-k", "asks_for")
    result.assert_outcomes(passed=1)

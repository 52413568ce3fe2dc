"""The pytest plugin against a served sandbox: one user suite runs unchanged against the
embedded `Sandbox` and, with the admin token, a `RemoteSandbox` in another process; a partial
configuration is a UsageError; remote skips come before any request; pytest-xdist works."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import need
from served_support import remote, served

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(300)

FXPAY_VARS = (
    "FXPAY_BASE_URL",
    "FXPAY_CLIENT_ID",
    "FXPAY_CLIENT_SECRET",
    "FXPAY_ADMIN_TOKEN",
    "FXPAY_CA_BUNDLE",
)

USER_SUITE = """
import fxpay
import pytest
from conftest_user import book


def test_quote(fxpay_client):
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR"))
    assert q.buy_amount == 10


def test_fault(fxpay_sandbox, fxpay_client):
    fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    fxpay_sandbox.fail_next("POST /v1/payments/quotes", 503)
    with pytest.raises(fxpay.ServerError):
        fxpay_sandbox.client(max_retries=0).create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    assert fxpay_sandbox.stats()["faults_fired"] == 1


def test_clock(fxpay_sandbox, fxpay_client):
    fxpay_client.create_quote(buy_currency="USD", buy_amount=11, sell_currency="EUR")
    deal = book(fxpay_client)
    assert fxpay_sandbox.deal_status(deal.deal_id) == "Booked"
    fxpay_sandbox.advance(86400)
    assert fxpay_sandbox.deal_status(deal.deal_id) == "Paid"
    assert [d["dealId"] for d in fxpay_sandbox.deals()] == [deal.deal_id]


def test_fresh_state(fxpay_sandbox, fxpay_client):
    fxpay_client.create_quote(buy_currency="USD", buy_amount=12, sell_currency="EUR")
    assert fxpay_sandbox.stats()["paths"]["POST /v1/payments/quotes"] == 1
    assert fxpay_sandbox.deals() == []
"""

USER_HELPERS = """
import fxpay

ADDRESS = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")


def book(c):
    qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
    q = c.get_quote(qid)
    bid = c.create_beneficiary(fxpay.Beneficiary(
        currency="AUD", name="Acme Pty Ltd", classification="Business", payment_reason="Invoice 42",
        bank_details=fxpay.BankDetails(bank_name="Bank of Sydney", bank_branch_name="George St",
                                       branch_code="062000", account="12345678", bank_address=ADDRESS),
        address=ADDRESS))
    return c.create_deal(quote_id=qid, funding_source="Own account",
                         beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "Invoice 42", "INV-42")])
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in FXPAY_VARS:
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_SUITE, conftest_user=USER_HELPERS)
    return pytester


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    with served() as e:
        yield e


def test_one_suite_runs_unchanged_locally_and_on_a_served_sandbox(
    suite: pytest.Pytester, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=4)
    served_sb = remote(env)
    served_sb.reset()
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_ADMIN_TOKEN"):
        monkeypatch.setenv(name, env[name])
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    # They ran there: the served sandbox saw their requests (reset before each test, so the
    # last test's are left).
    assert served_sb.stats()["requests"] > 0
    # The command-line options work as the variables do.
    monkeypatch.delenv("FXPAY_ADMIN_TOKEN")
    monkeypatch.delenv("FXPAY_BASE_URL")
    result = suite.runpytest_subprocess(
        # `=`: a token may start with "-" (it is random base64url), which argparse would take
        # for an option after a separate `--fxpay-admin-token` (1 run in 64 failed so).
        "-p",
        "no:cacheprovider",
        f"--fxpay-base-url={env['FXPAY_BASE_URL']}",
        f"--fxpay-admin-token={env['FXPAY_ADMIN_TOKEN']}",
    )
    result.assert_outcomes(passed=4)


def test_without_the_admin_token_control_tests_skip_before_any_request(
    suite: pytest.Pytester, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.setenv(name, env[name])
    served_sb = remote(env)
    served_sb.reset()
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*--fxpay-admin-token*"])
    # Only test_quote sent requests: token, quote, get quote. The skipped tests, which begin
    # with a request, sent none.
    st = served_sb.stats()
    assert st["paths"]["POST /v1/payments/quotes"] == 1
    assert st["requests"] == 3


INDIRECT_CONTROLS = """
import pytest


def helper(sandbox):
    return sandbox.stats()


@pytest.fixture
def quoted(fxpay_client):
    return fxpay_client.create_quote(buy_currency="USD", buy_amount=9, sell_currency="EUR")


def test_local_after_a_fixture_that_sends(quoted, fxpay_local_sandbox):
    raise AssertionError("the local sandbox must be refused when a served one is configured")


def test_aliased(fxpay_sandbox, fxpay_client):
    fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
    sb = fxpay_sandbox
    sb.fail_next("/v1/payments/quotes", 500)


def test_through_a_helper(fxpay_sandbox, fxpay_client):
    fxpay_client.create_quote(buy_currency="USD", buy_amount=11, sell_currency="EUR")
    helper(fxpay_sandbox)
    raise AssertionError("a control without the admin token must skip the test")


# A test whose source cannot be read: its controls skip it when they are called.
exec(
    "def test_without_source(fxpay_sandbox, fxpay_client):\\n"
    "    fxpay_client.create_quote(buy_currency='USD', buy_amount=12, sell_currency='EUR')\\n"
    "    fxpay_sandbox.stats()\\n"
    "    raise AssertionError('a control without the admin token must skip the test')\\n"
)


def test_local_asked_for_late(request):
    request.getfixturevalue("fxpay_local_sandbox")
    raise AssertionError("the local sandbox must be refused when a served one is configured")
"""


def test_without_the_admin_token_a_control_under_another_name_or_in_a_helper_skips(
    pytester: pytest.Pytester, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name bound to fxpay_sandbox in the test's code is read as fxpay_sandbox (skipped before
    its first request); a control reached through a helper, or by a test whose source cannot be
    read, skips the test when it is called; the local sandbox asked for inside a test is
    refused too."""
    for name in FXPAY_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.setenv(name, env[name])
    pytester.makepyfile(test_indirect=INDIRECT_CONTROLS)
    served_sb = remote(env)
    served_sb.reset()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-rs")
    result.assert_outcomes(skipped=5)
    # "SKIPPED [count] where: reason", one line per place a skip was raised.
    reasons = sorted(
        reason
        for line in result.stdout.lines
        if line.startswith("SKIPPED [")
        for reason in [line.split(": ", 1)[1]] * int(line.split("[", 1)[1].split("]", 1)[0])
    )
    controls = "needs the local sandbox or a served one with --fxpay-admin-token (faults, clock, inspection)"
    assert reasons == ["needs the local sandbox", "needs the local sandbox", controls, controls, controls]
    # The helper's test and the one without source sent their quotes; the aliased one, and the
    # one that needs the local sandbox, were skipped before their fixtures ran.
    assert served_sb.stats()["paths"]["POST /v1/payments/quotes"] == 2


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"FXPAY_BASE_URL": "http://127.0.0.1:9"}, ["FXPAY_CLIENT_ID and FXPAY_CLIENT_SECRET"]),
        ({"FXPAY_BASE_URL": "http://127.0.0.1:9", "FXPAY_CLIENT_ID": "x"}, ["FXPAY_CLIENT_SECRET"]),
        ({"FXPAY_BASE_URL": "http://127.0.0.1:9", "FXPAY_CLIENT_SECRET": "x"}, ["FXPAY_CLIENT_ID"]),
        ({"FXPAY_ADMIN_TOKEN": "t"}, ["FXPAY_BASE_URL"]),
    ],
)
def test_a_partial_configuration_is_a_usage_error(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, given: dict[str, str], missing: list[str]
) -> None:
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{m}*" for m in missing])
    assert "passed" not in result.stdout.str()


def test_the_option_without_credentials_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-base-url", "http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*FXPAY_CLIENT_ID and FXPAY_CLIENT_SECRET*"])


WORKER_LOG = """
import os
import pytest


@pytest.fixture(autouse=True)
def _record_worker(fxpay_sandbox):
    with open(os.path.join(os.path.dirname(__file__), "workers.log"), "a") as f:
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {os.getpid()} {fxpay_sandbox.base_url}\\n")
"""


def test_xdist_four_workers_each_with_its_own_sandboxes(suite: pytest.Pytester) -> None:
    need("xdist")
    suite.makeconftest(WORKER_LOG)
    many = "\n".join(
        f"def test_many_{i}(fxpay_sandbox, fxpay_client):\n"
        f"    fxpay_client.create_quote(buy_currency='USD', buy_amount={i + 1}, sell_currency='EUR')\n"
        f"    fxpay_sandbox.fail_next('/v1/payments/quotes', 500)\n"
        f"    assert fxpay_sandbox.stats()['paths']['POST /v1/payments/quotes'] == 1\n"
        for i in range(12)
    )
    suite.makepyfile(test_many=many)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "4")
    result.assert_outcomes(passed=16)
    lines = [ln.split() for ln in (suite.path / "workers.log").read_text().splitlines()]
    assert len(lines) == 16
    workers = {w for w, _, _ in lines}
    assert workers <= {"gw0", "gw1", "gw2", "gw3"}
    assert len(workers) >= 2
    # Every sandbox lives in one worker process: none is shared between workers.
    owner: dict[str, str] = {}
    for _worker, pid, url in lines:
        assert owner.setdefault(url, pid) == pid


def test_xdist_with_one_served_sandbox_is_a_usage_error(
    suite: pytest.Pytester, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    need("xdist")
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_ADMIN_TOKEN"):
        monkeypatch.setenv(name, env[name])
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot be shared by several pytest-xdist workers*"])

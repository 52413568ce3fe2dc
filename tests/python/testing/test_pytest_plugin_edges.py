"""Edges of the pytest plugin the other plugin tests leave open (the survivors of its
2026-11-29 pymutants run, tests/MUTANTS.md): a served sandbox over TLS that asks for a client
certificate, given to the plugin by variables or options; a client key without its
certificate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fxpay.testing

from served_support import served

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(300)

FXPAY_VARS = (
    "FXPAY_BASE_URL",
    "FXPAY_CLIENT_ID",
    "FXPAY_CLIENT_SECRET",
    "FXPAY_ADMIN_TOKEN",
    "FXPAY_CA_BUNDLE",
    "FXPAY_CLIENT_CERT",
    "FXPAY_CLIENT_KEY",
)

# One test that sends a request, one that uses a control (skipped without the admin token).
USER_SUITE = """
def test_quote(fxpay_client):
    q = fxpay_client.get_quote(fxpay_client.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR"))
    assert q.buy_amount == 10


def test_control(fxpay_sandbox, fxpay_client):
    assert fxpay_sandbox.stats()["requests"] == 0
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in FXPAY_VARS:
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_SUITE)
    return pytester


@pytest.fixture(scope="module")
def mtls() -> Iterator[dict[str, str]]:
    """A served sandbox over TLS that refuses a client without its certificate."""
    with served("--tls", "--client-auth") as e:
        yield e


@pytest.mark.parametrize("given_by", ["environment", "options"])
def test_a_client_certificate_reaches_a_served_sandbox_with_and_without_the_admin_token(
    suite: pytest.Pytester, mtls: dict[str, str], monkeypatch: pytest.MonkeyPatch, given_by: str
) -> None:
    served_sb = fxpay_remote(mtls)
    for name in ("FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"):
        monkeypatch.setenv(name, mtls[name])
    tls = ("FXPAY_CA_BUNDLE", "FXPAY_CLIENT_CERT", "FXPAY_CLIENT_KEY")
    if given_by == "environment":
        for name in tls:
            monkeypatch.setenv(name, mtls[name])
        extra: list[str] = []
    else:
        extra = [f"--{name.lower().replace('_', '-')}={mtls[name]}" for name in tls]
    # Without the admin token: the request test runs there, the control test is skipped.
    served_sb.reset()
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *extra)
    result.assert_outcomes(passed=1, skipped=1)
    assert served_sb.stats()["paths"]["POST /v1/payments/quotes"] == 1
    # With it: both run there.
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", f"--fxpay-admin-token={mtls['FXPAY_ADMIN_TOKEN']}", *extra
    )
    result.assert_outcomes(passed=2)
    # Without the client identity the served sandbox refuses the connection: the plugin gave it.
    for name in ("FXPAY_CLIENT_CERT", "FXPAY_CLIENT_KEY"):
        monkeypatch.delenv(name, raising=False)
    extra = [a for a in extra if not a.startswith(("--fxpay-client-cert", "--fxpay-client-key"))]
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *extra)
    result.assert_outcomes(failed=1, skipped=1)


@pytest.mark.parametrize("given_by", ["environment", "option"])
def test_a_client_key_without_its_certificate_is_a_usage_error(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, given_by: str
) -> None:
    for name, value in (("FXPAY_BASE_URL", "http://127.0.0.1:9"), ("FXPAY_CLIENT_ID", "x"), ("FXPAY_CLIENT_SECRET", "y")):
        monkeypatch.setenv(name, value)
    if given_by == "environment":
        monkeypatch.setenv("FXPAY_CLIENT_KEY", "key.pem")
        result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    else:
        result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--fxpay-client-key=key.pem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*a client key was given without its certificate*FXPAY_CLIENT_CERT*"])
    assert "passed" not in result.stdout.str()


def fxpay_remote(env: dict[str, str]) -> fxpay.testing.RemoteSandbox:
    """The served sandbox's admin handle, with the client identity it asks every caller for."""
    return fxpay.testing.RemoteSandbox(
        env["FXPAY_BASE_URL"],
        client_id=env["FXPAY_CLIENT_ID"],
        client_secret=env["FXPAY_CLIENT_SECRET"],
        admin_token=env["FXPAY_ADMIN_TOKEN"],
        ca_bundle=env["FXPAY_CA_BUNDLE"],
        client_cert=env["FXPAY_CLIENT_CERT"],
        client_key=env["FXPAY_CLIENT_KEY"],
    )

"""`RemoteSandbox` has the methods and properties of `Sandbox` (except `close`), with the same
signatures; here it drives an embedded sandbox over its admin API."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fxpay
from fxpay.testing import RemoteSandbox, Sandbox


def public(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_")}


def test_same_methods_and_properties_as_sandbox() -> None:
    local, remote = public(Sandbox), public(RemoteSandbox)
    assert set(local) - {"close"} == set(remote)
    for name, member in local.items():
        if name == "close":
            continue
        other = remote[name]
        assert isinstance(other, property) == isinstance(member, property), name
        if callable(member):
            assert inspect.signature(member) == inspect.signature(other), name  # type: ignore[arg-type]
    assert "__enter__" in vars(RemoteSandbox)
    assert "__exit__" in vars(RemoteSandbox)


def test_drives_an_embedded_sandbox_over_http() -> None:
    with Sandbox() as sb:
        r = RemoteSandbox(sb.base_url, client_id=sb.client_id, client_secret=sb.client_secret, admin_token=sb.admin_token)
        assert (r.username, r.password, r.redirect_uri) == (sb.username, sb.password, sb.redirect_uri)
        with r.client() as c:
            c.create_quote(buy_currency="USD", buy_amount=10, sell_currency="EUR")
        # The same counters either way (`open_connections` is a gauge the closing client moves).
        gauge = "open_connections"
        assert {k: v for k, v in r.stats().items() if k != gauge} == {k: v for k, v in sb.stats().items() if k != gauge}
        # token + quote; the admin calls and their connections are not counted
        assert sb.stats()["requests"] == 2
        assert sb.stats()["connections"] in (1, 2)
        r.fail_next("/v1/payments/quotes", 500, times=2)
        assert sb.stats()["faults_pending"] == 1
        sb.reset()
        assert r.stats()["faults_pending"] == 0
        assert r.stats()["requests"] == 0
        before = sb.now()
        r.advance(3600)
        assert 3600 <= sb.now() - before < 3660
        with pytest.raises(fxpay.InvalidRequestError):
            r.deal_status("nope")
        with pytest.raises(fxpay.InvalidRequestError):
            sb.deal_status("nope")


def test_admin_token_is_per_sandbox() -> None:
    with Sandbox() as a, Sandbox() as b:
        assert a.admin_token != b.admin_token
        assert len(a.admin_token) >= 43
        wrong = RemoteSandbox(a.base_url, client_id=a.client_id, client_secret=a.client_secret, admin_token=b.admin_token)
        with pytest.raises(fxpay.ConfigurationError):
            wrong.reset()


def test_constructor_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="base_url"):
        RemoteSandbox(1, client_id="a", client_secret="b", admin_token="t")  # type: ignore[arg-type]
    with pytest.raises(fxpay.InvalidRequestError, match="admin_token"):
        RemoteSandbox("http://127.0.0.1:1", client_id="a", client_secret="b", admin_token="")
    with pytest.raises(fxpay.InvalidRequestError, match="base_url"):
        RemoteSandbox("ftp://127.0.0.1:1", client_id="a", client_secret="b", admin_token="t")
    with pytest.raises(TypeError, match="ca_bundle"):
        RemoteSandbox("https://127.0.0.1:1", client_id="a", client_secret="b", admin_token="t", ca_bundle=3)  # type: ignore[arg-type]
    with pytest.raises(fxpay.ConfigurationError, match="ca_bundle"):
        RemoteSandbox("https://127.0.0.1:1", client_id="a", client_secret="b", admin_token="t", ca_bundle="/nonexistent.pem")


def test_fxpay_testing_is_a_declared_attribute() -> None:
    import fxpay as fresh

    assert fresh.testing.Sandbox is Sandbox
    assert fresh.testing.RemoteSandbox is RemoteSandbox


USES_TESTING = """
import fxpay


def make() -> fxpay.testing.Sandbox:
    return fxpay.testing.Sandbox(tls=True)


remote: type[fxpay.testing.RemoteSandbox] = fxpay.testing.RemoteSandbox
"""


@pytest.mark.timeout(300)
def test_fxpay_testing_type_checks(tmp_path: Path) -> None:
    """`import fxpay; fxpay.testing.Sandbox` passes mypy --strict and pyright."""
    src = tmp_path / "uses_testing.py"
    src.write_text(USES_TESTING)
    bin_dir = Path(sys.executable).parent
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(src)], capture_output=True, text=True)
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
    pyright = shutil.which("pyright", path=str(bin_dir))
    if pyright is None:
        pytest.skip("pyright is not installed")
    out = subprocess.run([pyright, "--pythonpath", sys.executable, str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr

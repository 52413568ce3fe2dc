"""Which roots a client trusts: with ``ca_bundle`` (or ``SSL_CERT_FILE``) the bundle's alone,
and the system's store is never read; without one, the system's store, so a company CA
installed there is trusted. Each case runs in a fresh process whose "system store" is a
folder of this test's (``SSL_CERT_DIR``), against two TLS sandboxes with CAs of their own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fxpay.testing import Sandbox

CALL = """
import sys, fxpay
base, cid, secret, bundle = sys.argv[1:5]
kw = {"ca_bundle": bundle} if bundle else {}
try:
    with fxpay.Client(cid, secret, base_url=base, **kw) as c:
        c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")
    print("ok")
except fxpay.TransportError as e:
    print("refused", e)
"""


@pytest.fixture(scope="module")
def sandboxes() -> object:
    a, b = Sandbox(tls=True), Sandbox(tls=True)
    yield a, b
    a.close()
    b.close()


def call(sb: Sandbox, bundle: str | None, *, system: Path, cert_file: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR", "NIX_SSL_CERT_FILE")}
    env["SSL_CERT_DIR"] = str(system)
    if cert_file is not None:
        env["SSL_CERT_FILE"] = cert_file
    r = subprocess.run(
        [sys.executable, "-c", CALL, sb.base_url, sb.client_id, sb.client_secret, bundle or ""],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_ca_bundle_is_trusted_alone_the_system_store_is_never_read(sandboxes: tuple[Sandbox, Sandbox], tmp_path: Path) -> None:
    a, b = sandboxes
    assert a.ca_bundle is not None
    assert b.ca_bundle is not None
    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(a.ca_bundle, system / "company-ca.pem")  # A's CA is in the "system store"
    # B's bundle given: A's certificate is refused, though the system store trusts its CA.
    assert call(a, b.ca_bundle, system=system).startswith("refused")
    # A's own bundle: trusted.
    assert call(a, a.ca_bundle, system=system) == "ok"


def test_without_a_bundle_the_system_store_is_trusted(sandboxes: tuple[Sandbox, Sandbox], tmp_path: Path) -> None:
    """A company CA installed in the system's store works with no setting at all."""
    a, b = sandboxes
    assert a.ca_bundle is not None
    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(a.ca_bundle, system / "company-ca.pem")
    assert call(a, None, system=system) == "ok"
    assert call(b, None, system=system).startswith("refused")


def test_ssl_cert_file_is_the_bundle_when_none_is_given(sandboxes: tuple[Sandbox, Sandbox], tmp_path: Path) -> None:
    a, b = sandboxes
    assert a.ca_bundle is not None
    assert b.ca_bundle is not None
    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(a.ca_bundle, system / "company-ca.pem")
    assert call(b, None, system=system, cert_file=b.ca_bundle) == "ok"
    # SSL_CERT_FILE replaces the store, as for OpenSSL: A's CA in the folder is not read.
    assert call(a, None, system=system, cert_file=b.ca_bundle).startswith("refused")

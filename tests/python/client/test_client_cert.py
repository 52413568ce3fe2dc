"""Issue 30 item 5 (client identity): ``Sandbox(tls=True, client_auth=True)`` requires a client
certificate issued by its CA; ``Client(client_cert=, client_key=)`` presents one. Real TLS over
loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import make_beneficiary


def book(c: fxpay.Client) -> fxpay.Deal:
    qid = c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    q = c.get_quote(qid)
    bid = c.create_beneficiary(make_beneficiary())
    return c.create_deal(quote_id=qid, funding_source="Own account", beneficiaries=[fxpay.DealBeneficiary(bid, q.sell_amount, "r", "ref")])


def test_mutual_tls(tmp_path: Path) -> None:
    with Sandbox(tls=True, client_auth=True) as sb:
        assert sb.client_cert is not None
        assert sb.client_key is not None
        assert Path(sb.client_cert).read_text().startswith("-----BEGIN CERTIFICATE-----")
        # Without a certificate: a TransportError that says what the server wanted.
        with sb.client(client_cert=None, client_key=None, max_retries=0) as bare, pytest.raises(fxpay.TransportError) as e:
            bare.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        assert "client certificate" in str(e.value)
        # sb.client() presents the sandbox's; so does an explicit pair, or one PEM with both.
        with sb.client() as c:
            assert book(c).deal_id
        with fxpay.Client(
            sb.client_id,
            sb.client_secret,
            base_url=sb.base_url,
            ca_bundle=sb.ca_bundle,
            client_cert=sb.client_cert,
            client_key=sb.client_key,
        ) as c:
            assert book(c).deal_id
        both = tmp_path / "both.pem"
        both.write_text(Path(sb.client_cert).read_text() + Path(sb.client_key).read_text())
        with fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url, ca_bundle=sb.ca_bundle, client_cert=both) as c:
            assert book(c).deal_id


def test_a_sandbox_without_client_auth_has_no_client_identity() -> None:
    with fxpay.testing.Sandbox() as sb:
        assert (sb.client_cert, sb.client_key, sb.ca_bundle) == (None, None, None)
    with fxpay.testing.Sandbox(tls=True) as sb:
        assert (sb.client_cert, sb.client_key) == (None, None)
        assert sb.ca_bundle is not None


def test_unusable_identities_are_configuration_errors(tmp_path: Path) -> None:
    base = {"base_url": "http://127.0.0.1:9"}
    with pytest.raises(fxpay.ConfigurationError, match="client_cert"):
        fxpay.Client("id", "secret", client_cert=tmp_path / "missing.pem", **base)
    empty = tmp_path / "empty.pem"
    empty.write_text("nothing here\n")
    with pytest.raises(fxpay.ConfigurationError, match="no certificate"):
        fxpay.Client("id", "secret", client_cert=empty, **base)
    with Sandbox(tls=True, client_auth=True) as sb:
        assert sb.client_cert is not None
        with pytest.raises(fxpay.ConfigurationError, match="no private key"):
            fxpay.Client("id", "secret", client_cert=sb.client_cert, **base)  # the key is elsewhere
        with pytest.raises(fxpay.ConfigurationError, match="client_key"):
            fxpay.Client("id", "secret", client_cert=sb.client_cert, client_key=tmp_path / "nokey.pem", **base)
    with pytest.raises(TypeError, match="client_cert"):
        fxpay.Client("id", "secret", client_cert=1, **base)  # type: ignore[arg-type]
    with pytest.raises(fxpay.ConfigurationError, match="tls"):
        Sandbox(client_auth=True)


def test_the_command_line_serves_client_auth() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fxpay.sandbox", "--port", "0", "--tls", "--client-auth"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        values: dict[str, str] = {}
        assert proc.stdout is not None
        while "FXPAY_CLIENT_KEY" not in values:
            line = proc.stdout.readline()
            assert line, "the sandbox ended early"
            k, _, v = line.strip().partition("=")
            values[k] = v
        args = {"base_url": values["FXPAY_BASE_URL"], "ca_bundle": values["FXPAY_CA_BUNDLE"]}
        with (
            fxpay.Client(values["FXPAY_CLIENT_ID"], values["FXPAY_CLIENT_SECRET"], max_retries=0, **args) as bare,
            pytest.raises(fxpay.TransportError, match="client certificate"),
        ):
            bare.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
        with fxpay.Client(
            values["FXPAY_CLIENT_ID"],
            values["FXPAY_CLIENT_SECRET"],
            client_cert=values["FXPAY_CLIENT_CERT"],
            client_key=values["FXPAY_CLIENT_KEY"],
            **args,
        ) as c:
            assert c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
    finally:
        proc.terminate()
        proc.wait(10)


def test_remote_sandbox_presents_a_client_certificate() -> None:
    from fxpay.testing import RemoteSandbox

    with Sandbox(tls=True, client_auth=True) as served:
        args = {"client_id": served.client_id, "client_secret": served.client_secret, "admin_token": served.admin_token}
        bare = RemoteSandbox(served.base_url, ca_bundle=served.ca_bundle, **args)
        with pytest.raises(fxpay.TransportError):
            bare.stats()
        identity = {"client_cert": served.client_cert, "client_key": served.client_key}
        sb = RemoteSandbox(served.base_url, ca_bundle=served.ca_bundle, **identity, **args)
        assert sb.client_cert == served.client_cert
        with sb.client() as c:
            assert book(c).deal_id
        assert sb.stats()["deals"] == 1
        # A client may be given another identity, or none: the one given is used.
        with sb.client(client_cert=None, client_key=None, max_retries=0) as c, pytest.raises(fxpay.TransportError):
            c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD")
        # A client of the handle without an identity may be given one: it is used as given.
        with bare.client(**identity, max_retries=0) as c:
            assert book(c).deal_id

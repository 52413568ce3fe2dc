"""Issue 54 item 11: one sandbox command line. ``python -m fxpay sandbox`` takes every flag of
``python -m fxpay.sandbox``, with the same help, and serves the same sandbox with them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import served_support


def help_of(*command: str) -> str:
    r = subprocess.run([sys.executable, "-m", *command, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def options(help_text: str) -> dict[str, str]:
    """Each ``--flag`` of a help text, with the words of its help (whitespace folded)."""
    body = help_text.split("options:", 1)[1]
    out: dict[str, str] = {}
    for m in re.finditer(r"^  (-[^\n]*?)(?:\s{2,}|\n\s+)(.*?)(?=^  -|\Z)", body, re.S | re.M):
        for flag in re.findall(r"--[a-z][a-z-]*", m.group(1)):
            out[flag] = " ".join(m.group(2).split())
    return out


def test_both_command_lines_take_the_same_flags_with_the_same_help() -> None:
    served, sub = options(help_of("fxpay.sandbox")), options(help_of("fxpay", "sandbox"))
    for flag in ("--host", "--port", "--tls", "--client-auth", "--body-timeout", "--idle-timeout", "--rate-limit"):
        assert flag in served, flag
    assert sub == served


@pytest.mark.parametrize("command", [("fxpay", "sandbox"), ("fxpay.sandbox",)])
def test_either_command_serves_with_every_flag(command: tuple[str, ...]) -> None:
    args = ("--tls", "--client-auth", "--rate-limit", "50", "--idle-timeout", "30", "--body-timeout", "5")
    with served_support.served(*args, command=command) as env:
        assert {"FXPAY_CA_BUNDLE", "FXPAY_CLIENT_CERT", "FXPAY_CLIENT_KEY"} <= env.keys()
        from fxpay.testing import RemoteSandbox

        sb = RemoteSandbox(
            env["FXPAY_BASE_URL"],
            client_id=env["FXPAY_CLIENT_ID"],
            client_secret=env["FXPAY_CLIENT_SECRET"],
            admin_token=env["FXPAY_ADMIN_TOKEN"],
            ca_bundle=env["FXPAY_CA_BUNDLE"],
            client_cert=env["FXPAY_CLIENT_CERT"],
            client_key=env["FXPAY_CLIENT_KEY"],
        )
        assert sb.stats()["rate_limit"] == 50
        with sb.client() as c:
            assert c.create_quote(buy_currency="USD", buy_amount="10", sell_currency="AUD")


def test_client_auth_without_tls_is_refused_by_either() -> None:
    for command in (("fxpay", "sandbox"), ("fxpay.sandbox",)):
        r = subprocess.run([sys.executable, "-m", *command, "--port", "0", "--client-auth"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert "--client-auth needs --tls" in r.stderr, r.stderr

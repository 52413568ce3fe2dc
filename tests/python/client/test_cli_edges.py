"""Edges of ``python -m fxpay`` that ``test_cli.py`` leaves open (the survivors of its
2026-11-29 pymutants run, tests/MUTANTS.md): what the quote table prints for a fee or
freebies the service did not give, ``main``'s exit status for each command, an amount that
is not a number, no command at all, and Ctrl-C during a call."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from decimal import Decimal

import pytest

import fxpay
from fxpay.__main__ import _quote_table, main
from fxpay.testing import Sandbox

pytestmark = pytest.mark.timeout(120)


def quote(**extra: object) -> fxpay.Quote:
    return fxpay.Quote("q-1", "USD", Decimal("1000"), "AUD", Decimal("1519.08"), Decimal("1.519084"), Decimal("0.658291"), **extra)


def test_the_quote_table_says_what_the_service_did_not_give() -> None:
    assert _quote_table(quote()).splitlines() == [
        "quote id       q-1",
        "buy            1000 USD",
        "sell           1519.08 AUD",
        "customer rate  1.519084",
        "inverse rate   0.658291",
        "fee            not given",
        "freebies       not given",
    ]
    given = quote(fee=Decimal("2.50"), fee_currency="USD", freebies=fxpay.Freebies(3, 1, 2))
    assert _quote_table(given).splitlines()[-2:] == ["fee            2.50 USD", "freebies       2 of 3 left"]
    # A fee without its currency: the amount alone, no trailing space.
    assert _quote_table(quote(fee=Decimal("2.50"))).splitlines()[-2] == "fee            2.50"


def test_main_returns_each_commands_exit_status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quote", "USD", "AUD", "1000", "--sandbox"]) == 0
    out = capsys.readouterr().out
    assert "1000 USD" in out
    assert out.rstrip().endswith("(embedded sandbox)")
    # Without --sandbox: the served one FXPAY_* names, not an embedded one.
    for name in ("FXPAY_CA_BUNDLE", "FXPAY_CLIENT_CERT", "FXPAY_CLIENT_KEY"):
        monkeypatch.delenv(name, raising=False)
    with Sandbox() as sb:
        monkeypatch.setenv("FXPAY_BASE_URL", sb.base_url)
        monkeypatch.setenv("FXPAY_CLIENT_ID", sb.client_id)
        monkeypatch.setenv("FXPAY_CLIENT_SECRET", sb.client_secret)
        assert main(["quote", "EUR", "JPY", "250"]) == 0
        assert sb.stats()["paths"]["POST /v1/payments/quotes"] == 1
    out = capsys.readouterr().out
    assert "250 EUR" in out
    assert "embedded" not in out
    # A refused request: 1, one line.
    assert main(["quote", "usd", "AUD", "1000", "--sandbox"]) == 1
    assert "InvalidRequestError" in capsys.readouterr().err
    # `journal create` with a URL of no journal: its own status, 2.
    assert main(["journal", "create", "ftp://x"]) == 2
    assert "redis://" in capsys.readouterr().err


def test_an_amount_that_is_not_a_number_is_the_services_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quote", "USD", "AUD", "abc", "--sandbox"]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert err.startswith("fxpay: error: InvalidRequestError: ")
    assert "decimal number" in err


@pytest.mark.parametrize(("typed", "bought"), [("1e3", "1000 USD"), (" 1000.10 ", "1000.10 USD"), ("1500.25", "1500.25 USD")])
def test_an_amount_is_read_as_the_client_reads_amounts_given_as_text(typed: str, bought: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quote", "USD", "AUD", typed, "--sandbox"]) == 0
    assert bought in capsys.readouterr().out


def test_an_amount_only_pythons_decimal_reads_is_refused_as_the_client_refuses_it(capsys: pytest.CaptureFixture[str]) -> None:
    # `Decimal("1_000")` is 1000, but the client takes amounts as decimal text only: the
    # command line says what the library says, one parser for both.
    with Sandbox() as sb, sb.client() as c, pytest.raises(fxpay.InvalidRequestError) as lib:
        c.create_quote(buy_currency="USD", buy_amount="1_000", sell_currency="AUD")
    assert main(["quote", "USD", "AUD", "1_000", "--sandbox"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"fxpay: error: InvalidRequestError: {lib.value}"


def test_without_a_command_it_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    assert "required" in capsys.readouterr().err


def test_ctrl_c_during_a_call_exits_130_without_a_traceback() -> None:
    # A server that accepts and never answers: the quote's first request waits on it.
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        port = server.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
        env |= {"FXPAY_BASE_URL": f"http://127.0.0.1:{port}", "FXPAY_CLIENT_ID": "id", "FXPAY_CLIENT_SECRET": "secret"}
        p = subprocess.Popen(
            [sys.executable, "-m", "fxpay", "quote", "USD", "AUD", "1000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            conn, _ = server.accept()  # the request is in flight
            with conn:
                p.send_signal(signal.SIGINT)
                out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert out == ""

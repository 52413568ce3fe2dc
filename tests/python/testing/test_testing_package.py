"""The ``fxpay.testing`` package: its names, imported on first use only, and its pytest plugin
registered under its new module name."""

from __future__ import annotations

import importlib.metadata
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import fxpay
import fxpay.errors
import fxpay.testing
import fxpay.testing.pytest_plugin


def run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_import_fxpay_imports_neither_testing_nor_pytest() -> None:
    out = run(
        "import sys, fxpay\n"
        "print(sorted(m for m in sys.modules if m.startswith('fxpay.testing') or m in ('pytest', 'fxpay.contrib')))\n"
        "fxpay.testing.Sandbox\n"
        "print('fxpay.testing' in sys.modules, 'pytest' in sys.modules)"
    )
    assert out.splitlines() == ["[]", "True False"]


def test_the_names_of_fxpay_testing() -> None:
    assert sorted(fxpay.testing.__all__) == [
        "Cassette",
        "CassetteMismatchError",
        "RemoteSandbox",
        "Sandbox",
        "UnfiredFaultWarning",
        "deal_created_request",
    ]
    assert fxpay.testing.CassetteMismatchError is fxpay.errors.CassetteMismatchError
    assert issubclass(fxpay.testing.CassetteMismatchError, fxpay.FxPayError)
    for name in fxpay.testing.__all__:
        obj = getattr(fxpay.testing, name)
        assert obj.__doc__, name
    from fxpay.testing import Cassette, RemoteSandbox, Sandbox

    assert (Sandbox, RemoteSandbox, Cassette) == (fxpay.testing.Sandbox, fxpay.testing.RemoteSandbox, fxpay.testing.Cassette)


def test_the_plugin_is_registered_as_fxpay_testing_pytest_plugin() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "fxpay"]
    assert entry.value == "fxpay.testing.pytest_plugin"
    assert entry.load() is fxpay.testing.pytest_plugin
    assert callable(fxpay.testing.pytest_plugin.fxpay_sandbox)


def test_python_m_fxpay_sandbox_still_serves() -> None:
    r = subprocess.run([sys.executable, "-m", "fxpay.sandbox", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "--tls" in r.stdout


def test_a_fault_that_never_fired_is_a_warning_naming_it() -> None:
    # Issue 23 item 10: an unfired fault was silent; a typo in its path went unnoticed.
    with warnings.catch_warnings(record=True) as caught, fxpay.testing.Sandbox() as sb:
        warnings.simplefilter("always")
        sb.fail_next("POST /v1/payments/quotes/", 503, times=2)  # a trailing slash: no match
        sb.fail_next("post /v1/payments/quotes", 502)  # fires: method any case, exact path
        sb.delay_next("/v1/payments/quotes/*", 0.1)  # a prefix: not the collection itself
        with sb.client(max_retries=0) as c, pytest.raises(fxpay.ServerError):
            c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD")
        sb.reset()
        sb.drop_next("/v1/payments/deals", after_processing=False)
    assert {w.category for w in caught} == {fxpay.testing.UnfiredFaultWarning}
    assert [str(w.message) for w in caught] == [
        'fail_next("POST /v1/payments/quotes/", 503): 2 use(s) left never fired before reset()',
        'delay_next("/v1/payments/quotes/*", 0.1): 1 use(s) left never fired before reset()',
        'drop_next("/v1/payments/deals", after_processing=False): 1 use(s) left never fired before close()',
    ]


def test_closing_twice_reports_an_unfired_fault_once() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fxpay.testing.Sandbox() as sb:
            assert repr(sb) == f"Sandbox(base_url={sb.base_url!r})"
            sb.fail_next("/v1/payments/quotes", 500)
            sb.close()
        sb.close()
    assert [str(w.message) for w in caught] == ['fail_next("/v1/payments/quotes", 500): 1 use(s) left never fired before close()']


def test_faults_that_fired_warn_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fxpay.testing.Sandbox() as sb:
            with sb.client() as c:
                qid = c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD")
                sb.fail_next("GET /v1/payments/quotes/*", 503, retry_after=0)
                c.get_quote(qid)  # fails once, retried
            sb.reset()


def test_a_sandboxs_arguments_are_checked_by_name() -> None:
    """A wrong type is a TypeError that names the parameter and says what it must be, before
    anything reaches the Rust sandbox (whose own messages name neither)."""
    made: list[tuple[dict[str, Any], str]] = [
        ({"tls": 1}, "tls must be a bool, not int"),
        ({"client_auth": "yes"}, "client_auth must be a bool, not str"),
        ({"body_timeout": "10"}, "body_timeout must be a number of seconds, not str"),
        ({"idle_timeout": None}, "idle_timeout must be a number of seconds, not NoneType"),
    ]
    for kw, message in made:
        with pytest.raises(TypeError) as info:
            fxpay.testing.Sandbox(**kw)
        assert str(info.value) == message
    with fxpay.testing.Sandbox() as sb:
        calls = [
            (lambda: sb.approve("https://x", allow=1), "allow must be a bool, not int"),  # type: ignore[arg-type]
            (lambda: sb.drop_next("/v1/payments/quotes", after_processing=0), "after_processing must be a bool, not int"),  # type: ignore[arg-type]
            (lambda: sb.advance("60"), "seconds must be a number of seconds, not str"),  # type: ignore[arg-type]
            (lambda: sb.delay_next("/v1/payments/quotes", True), "seconds must be a number of seconds, not bool"),
            (lambda: sb.send_deal_created(b"http://127.0.0.1:9/x"), "url must be a str, got bytes"),  # type: ignore[arg-type]
            (lambda: sb.redeliver(1), "process_id must be a str, got int"),  # type: ignore[arg-type]
        ]
        for call, message in calls:
            with pytest.raises(TypeError) as info:
                call()
            assert str(info.value) == message
        assert sb.deliveries() == []
        assert sb.stats()["faults_pending"] == 0


def test_register_client_approve_and_advance_act_on_the_sandbox() -> None:
    with fxpay.testing.Sandbox() as sb:
        sb.register_client("other-app", "other-secret", [sb.redirect_uri])
        sb.register_client("machine-only", "machine-secret")  # no redirect URI
        with fxpay.Client("other-app", "other-secret", base_url=sb.base_url) as c:
            request = c.authorization_url(sb.redirect_uri)
            assert sb.approve(request.url).startswith(sb.redirect_uri + "?code=")
            assert sb.approve(request.url, allow=False).startswith(sb.redirect_uri + "?error=access_denied&")
        with fxpay.Client("machine-only", "machine-secret", base_url=sb.base_url) as m:
            m.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD")  # it is registered
            with pytest.raises(fxpay.FxPayError, match="redirect_uri is not registered for this client"):
                sb.approve(m.authorization_url(sb.redirect_uri).url)
        before = sb.now()
        sb.advance(3600)
        assert 3600 <= sb.now() - before < 3660


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=10).close()
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # A connection that reached the listener's backlog as it closed is reset: the listener
        # is going, not gone yet (seen once under `-n 2`); ask again.
        return False
    return False


def test_a_sandbox_stops_answering_when_its_with_block_ends() -> None:
    with fxpay.testing.Sandbox() as sb:
        url = urlsplit(sb.base_url)
        host, port = url.hostname or "", url.port or 0
        with sb.client() as c:
            c.create_quote(buy_currency="USD", buy_amount=1, sell_currency="AUD")
        assert not refused(host, port)
    # The listener closes on the sandbox's runtime, soon after close() returns: poll for the
    # refusal (20 s is far above the time it takes; a sandbox left open never gets there).
    deadline = time.monotonic() + 20
    while not refused(host, port):
        assert time.monotonic() < deadline, f"the sandbox still answers on port {port} after its with block"
        time.sleep(0.01)


def test_the_docs_give_the_fault_path_rules() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "testing.md").read_text()
    section = text.split("### Faults", 1)[1].split("\n#", 1)[0]
    for rule in ("exactly that path", "a trailing `*`", "limits the rule to that", "UnfiredFaultWarning"):
        assert rule in section

"""The ``fxpay.testing`` package: its names, imported on first use only, and its pytest plugin
registered under its new module name."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

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
    assert sorted(fxpay.testing.__all__) == ["Cassette", "CassetteMismatchError", "RemoteSandbox", "Sandbox"]
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

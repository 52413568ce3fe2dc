"""Issue 28 item 3: a cold start. ``import fxpay`` loads the compiled core and nothing written
in Python (PEP 562: the errors, journals, stores, raw responses and payouts are imported on
first use), and a first call imports neither ``logging`` nor ``typing``. Every public name
still resolves, to the same object as in the module that defines it. Fresh interpreters, real
HTTP over loopback."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

import fxpay
from fxpay.testing import Sandbox

# What `import fxpay` may add to a fresh interpreter's modules.
CORE = {"fxpay", "fxpay._fxpay", "atexit"}


def run(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox() as s:
        yield s


def test_import_fxpay_loads_only_the_compiled_core() -> None:
    code = "import sys, json; before = set(sys.modules); import fxpay; print(json.dumps(sorted(set(sys.modules) - before)))"
    added = set(json.loads(run(code)))
    assert "fxpay._fxpay" in added
    assert added <= CORE, sorted(added - CORE)


def test_every_public_name_resolves_to_its_defining_modules_object() -> None:
    code = """
    import json, fxpay
    print(json.dumps({name: [type(getattr(fxpay, name)).__name__, getattr(fxpay, name).__module__] for name in fxpay.__all__}))
    """
    seen = json.loads(run(code))
    assert sorted(seen) == sorted(fxpay.__all__)
    for name in fxpay.__all__:
        value = getattr(fxpay, name)
        assert getattr(importlib.import_module(value.__module__), name) is value, name
    assert set(fxpay.__all__) <= set(dir(fxpay))
    assert {"testing", "errors", "journals", "contrib"} <= set(dir(fxpay))
    assert fxpay.ApiError is fxpay.errors.ApiError
    assert fxpay.testing is importlib.import_module("fxpay.testing")


def test_a_lazy_name_is_looked_up_once_then_is_a_plain_attribute() -> None:
    # The first use imports the defining module and keeps the name in the namespace, so
    # later uses cost a dictionary look-up, not a call of the module's __getattr__.
    code = """
    import fxpay
    before = "SqliteJournal" in vars(fxpay)
    first = fxpay.SqliteJournal
    print(before, "SqliteJournal" in vars(fxpay), vars(fxpay).get("SqliteJournal") is first)
    """
    assert run(code) == "False True True"


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="module 'fxpay' has no attribute 'Cleint'"):
        fxpay.Cleint  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(fxpay, "_LAZY_NOT_THERE")


def test_a_first_call_imports_no_logging_and_debug_logging_turned_on_later_still_logs(sb: Sandbox) -> None:
    with sb.client() as c:
        qid = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
    code = """
    import io, json, sys
    import fxpay
    base, cid, secret, qid = sys.argv[1:5]
    with fxpay.Client(cid, secret, base_url=base) as c:
        c.get_quote(qid)
        after_first = sorted({"logging", "typing"} & set(sys.modules))
        import logging
        stream = io.StringIO()
        logging.basicConfig(level=logging.DEBUG, stream=stream)
        c.get_quote(qid)
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("DEBUG:fxpay:")]
    print(json.dumps({"after_first": after_first, "lines": lines}))
    """
    out = json.loads(run(code, sb.base_url, sb.client_id, sb.client_secret, qid))
    assert out["after_first"] == []
    assert any(f"GET /v1/payments/quotes/{qid} -> 200" in line for line in out["lines"]), out["lines"]


def test_public_submodules_are_attributes_without_importing_them_first() -> None:
    code = """
    import json, fxpay
    print(json.dumps([fxpay.errors.ApiError.__name__, fxpay.journals.SqliteJournal.__name__, fxpay.stores.TokenStore.__name__,
                      fxpay.seen.__name__, fxpay.contrib.__name__, fxpay.models.to_records.__name__]))
    """
    assert json.loads(run(code)) == ["ApiError", "SqliteJournal", "TokenStore", "fxpay.seen", "fxpay.contrib", "to_records"]

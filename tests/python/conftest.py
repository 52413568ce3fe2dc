from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import shutil
import signal
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

import fxpay

if TYPE_CHECKING:
    from fxpay.testing import RemoteSandbox, Sandbox

T = TypeVar("T")


#: The models the public contract lists, each a class of the compiled module (``fxpay._fxpay``).
MODEL_NAMES = [
    "Quote",
    "Freebies",
    "Deal",
    "SpotDeal",
    "Beneficiary",
    "BankDetails",
    "Address",
    "DealBeneficiary",
    "Token",
    "AuthorizationRequest",
    "VirtualAccount",
    "DealCreated",
    "FieldError",
]


def in_ci() -> bool:
    """True when the suite runs in CI (``CI`` set, as `.ci/run` runs it), where nothing may skip for want of a tool."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing(what: str) -> NoReturn:
    message = f"{what} is not installed (scripts/setup installs it)"
    if in_ci():
        pytest.fail(message + "; in CI a missing test dependency is a failure, not a skip", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def load_script(path: Path) -> ModuleType:
    """A script of the repository (not a package module) imported from its file, as a module named after it."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def need(module: str) -> ModuleType:
    """Imports an optional test dependency: a skip on a developer's machine, a failure in CI.

    Use it instead of ``pytest.importorskip``, which skips silently everywhere. At module
    level it fails (or skips) the whole module; inside a test or fixture, that test.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        _missing(f"the Python package {module!r}")


def need_program(*names: str) -> str:
    """The path of the first of ``names`` found on PATH; a skip when none is, a failure in CI."""
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    _missing(f"the program {' or '.join(repr(n) for n in names)}")


def fork_quietly() -> int:
    """``os.fork()`` without the DeprecationWarning 3.12+ gives for a fork with threads
    running (the tests fork with threads on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def wait_child(pid: int, seconds: float = 20.0) -> int | None:
    """A forked child's exit code, or None if it hung (killed after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)


def all_at_once(n: int, call: Callable[[], T], timeout: float = 120.0) -> list[T]:
    """Runs ``call`` on ``n`` threads released together; returns the results, raises the first error."""
    barrier = threading.Barrier(n)
    results: list[T] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(call())
        except BaseException as e:  # re-raised below
            errors.append(e)

    # Daemon threads with a bounded join: a call that never returns (a lock never released)
    # fails the test instead of hanging the session at exit.
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            raise AssertionError(f"a call on one of {n} threads did not return within {timeout} s")
    if errors:
        raise errors[0]
    return results


def make_beneficiary(currency: str = "AUD", **overrides: object) -> fxpay.Beneficiary:
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    fields = dict(
        currency=currency,
        name="Acme Pty Ltd",
        classification="Business",
        payment_reason="Invoice 42",
        bank_details=fxpay.BankDetails(
            bank_name="Bank of Sydney",
            bank_branch_name="George St",
            branch_code="062000",
            account="12345678",
            bank_address=address,
        ),
        address=address,
    )
    fields.update(overrides)
    return fxpay.Beneficiary(**fields)  # type: ignore[arg-type]


def login(sb: Sandbox | RemoteSandbox, c: fxpay.Client) -> tuple[fxpay.AuthorizationRequest, str]:
    """Starts the authorization-code flow and consents as the sandbox's user: the request and the callback URL."""
    auth = c.authorization_url(sb.redirect_uri)
    callback = sb.approve(auth.url)
    return auth, callback


@pytest.fixture
def beneficiary() -> fxpay.Beneficiary:
    return make_beneficiary()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Prints the fault matrix from the cells of test_fault_matrix.py that ran in this session.

    Each cell reports its outcome as a test property, so this works under any order, a
    subset (-k) and xdist (properties travel with the workers' reports).
    """
    cells: dict[tuple[int, str], dict[tuple[int, str], str]] = {}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if getattr(rep, "when", None) != "call":
                continue
            for name, value in getattr(rep, "user_properties", ()):
                if name == "fault_matrix_cell":
                    op_i, op, fault_i, fault, got = value
                    cells.setdefault((op_i, op), {})[(fault_i, fault)] = got
    if not cells:
        return
    faults = sorted({f for row in cells.values() for f in row})
    width = max(len(op) for _, op in cells)
    lines = ["| " + "operation".ljust(width) + " | " + " | ".join(f.ljust(14) for _, f in faults) + " |"]
    lines.append("|" + "-" * (width + 2) + "|" + "|".join("-" * 16 for _ in faults) + "|")
    for key in sorted(cells):
        row = cells[key]
        lines.append(f"| {key[1].ljust(width)} | " + " | ".join(row.get(f, "-").ljust(14) for f in faults) + " |")
    terminalreporter.write_line("")
    terminalreporter.write_line("fault matrix (typed outcome per cell):")
    for line in lines:
        terminalreporter.write_line(line)


# -- the event loops every awaitable test runs on ---------------------------------------------


class NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop that cannot watch a file descriptor, as Windows' ``ProactorEventLoop`` (what
    ``asyncio.run`` gives there): its ``add_reader`` raises NotImplementedError, so fxpay's
    awaitables' port rings it with ``loop.call_soon_threadsafe`` instead of a socket pair."""

    def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:  # type: ignore[override]
        raise NotImplementedError


def _uvloop_factory() -> asyncio.AbstractEventLoop:
    uvloop = need("uvloop")
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "default": asyncio.new_event_loop,
    "uvloop": _uvloop_factory,
    "no_add_reader": NoReaderLoop,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--loops",
        default=",".join(LOOPS),
        help=f"the event loops each awaitable test runs on, comma-separated (default and all: {','.join(LOOPS)})",
    )


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every awaitable test runs once per loop: ``test_x[default]``, ``test_x[uvloop]`` and ``test_x[no_add_reader]``."""
    names = [n.strip() for n in str(config.getoption("--loops")).split(",") if n.strip()]
    unknown = [n for n in names if n not in LOOPS]
    if unknown or not names:
        raise pytest.UsageError(f"--loops: unknown loop {unknown or names}; known: {', '.join(LOOPS)}")
    return {n: LOOPS[n] for n in names}

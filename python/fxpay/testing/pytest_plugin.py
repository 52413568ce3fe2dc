"""The pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:
- ``fxpay_sandbox``: a fresh local :class:`fxpay.testing.Sandbox` per test; or, when
  ``--fxpay-base-url`` (or ``FXPAY_BASE_URL``) is given with ``FXPAY_CLIENT_ID`` and
  ``FXPAY_CLIENT_SECRET``, a handle on that served sandbox:
  - with ``--fxpay-admin-token`` (or ``FXPAY_ADMIN_TOKEN``) a
    :class:`fxpay.testing.RemoteSandbox`, reset before each test, on which faults, the clock
    and inspection work as on the local one;
  - without it, tests that use faults, the clock or inspection are skipped before they run.
- ``fxpay_local_sandbox``: the local sandbox, skipped when a remote one is configured.
- ``fxpay_client``: a :class:`fxpay.Client` bound to ``fxpay_sandbox``.

Cassettes (see ``docs/cassettes.md``):
- ``@pytest.mark.fxpay_cassette`` (or ``@pytest.mark.fxpay_cassette("name")``) on a test, or
  the ``fxpay_cassette`` fixture, gives the test a :class:`fxpay.testing.Cassette` at
  ``cassettes/<test module>/<test name or "name">.json`` next to the test file, and
  ``fxpay_client`` uses it.
- By default the cassette replays: ``fxpay_client`` answers from the file, with no sandbox
  and no network; a missing file fails the test. ``--fxpay-record`` records it again
  against ``fxpay_sandbox`` (local, or remote when configured); ``--fxpay-no-cassettes``
  runs them live against it without touching the files.

Under pytest-xdist each worker is a process of its own, and each test gets its own embedded
sandbox there. One served sandbox cannot be shared by several workers (faults and ``reset``
act on the whole sandbox), so ``-n`` with ``--fxpay-admin-token`` is a usage error.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from .._fxpay import Client
from ..errors import ConfigurationError
from . import Cassette, RemoteSandbox, Sandbox

# The controls a served sandbox answers only with its admin token.
_CONTROLS = frozenset(
    {
        "fail_next",
        "drop_next",
        "delay_next",
        "advance",
        "now",
        "deal_status",
        "deals",
        "deliveries",
        "stats",
        "approve",
        "register_client",
        "reset",
        "username",
        "password",
    }
)
_LOCAL_ONLY = "needs the local sandbox or a served one with --fxpay-admin-token (faults, clock, inspection)"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fxpay")
    group.addoption("--fxpay-base-url", default=None, help="run fxpay fixtures against this served sandbox")
    group.addoption("--fxpay-client-id", default=None, help="client id for --fxpay-base-url (else FXPAY_CLIENT_ID)")
    group.addoption("--fxpay-client-secret", default=None, help="client secret (else FXPAY_CLIENT_SECRET)")
    group.addoption(
        "--fxpay-admin-token",
        default=None,
        help="admin token of the served sandbox (else FXPAY_ADMIN_TOKEN): faults and clock tests run there",
    )
    group.addoption("--fxpay-ca-bundle", default=None, help="CA file of an https sandbox (else FXPAY_CA_BUNDLE)")
    group.addoption(
        "--fxpay-client-cert",
        default=None,
        help="client certificate (PEM) for a sandbox served with --tls --client-auth (else FXPAY_CLIENT_CERT)",
    )
    group.addoption("--fxpay-client-key", default=None, help="its key (PEM) (else FXPAY_CLIENT_KEY)")
    group.addoption("--fxpay-record", action="store_true", help="record the cassettes of fxpay_cassette tests again")
    group.addoption("--fxpay-no-cassettes", action="store_true", help="run fxpay_cassette tests live, neither replaying nor recording")


@dataclass(frozen=True)
class _Remote:
    base_url: str
    client_id: str
    client_secret: str
    admin_token: str | None
    ca_bundle: str | None
    client_cert: str | None = None
    client_key: str | None = None


_REMOTE = pytest.StashKey["_Remote | None"]()


def _setting(config: pytest.Config, option: str, env: str) -> str | None:
    value = config.getoption(option) or os.environ.get(env)
    return value or None


def _remote(config: pytest.Config) -> _Remote | None:
    """The served sandbox configured, if any; a partial configuration is a UsageError."""
    url = _setting(config, "--fxpay-base-url", "FXPAY_BASE_URL")
    cid = _setting(config, "--fxpay-client-id", "FXPAY_CLIENT_ID")
    secret = _setting(config, "--fxpay-client-secret", "FXPAY_CLIENT_SECRET")
    token = _setting(config, "--fxpay-admin-token", "FXPAY_ADMIN_TOKEN")
    ca = _setting(config, "--fxpay-ca-bundle", "FXPAY_CA_BUNDLE")
    cert = _setting(config, "--fxpay-client-cert", "FXPAY_CLIENT_CERT")
    key = _setting(config, "--fxpay-client-key", "FXPAY_CLIENT_KEY")
    if url is None:
        if token is not None:
            raise pytest.UsageError("fxpay: an admin token was given without a sandbox: set FXPAY_BASE_URL (or --fxpay-base-url)")
        return None
    missing = [name for name, value in (("FXPAY_CLIENT_ID", cid), ("FXPAY_CLIENT_SECRET", secret)) if value is None]
    if missing or cid is None or secret is None:
        raise pytest.UsageError(
            f"fxpay: the sandbox at {url} needs credentials: set {' and '.join(missing)} "
            "(or --fxpay-client-id / --fxpay-client-secret); fxpay will not silently run locally instead"
        )
    if key is not None and cert is None:
        raise pytest.UsageError("fxpay: a client key was given without its certificate: set FXPAY_CLIENT_CERT (or --fxpay-client-cert)")
    return _Remote(url, cid, secret, token, ca, cert, key)


def _workers(config: pytest.Config) -> int:
    n = getattr(config.option, "numprocesses", None)
    return int(n) if isinstance(n, int) else 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fxpay_cassette(name=None): replay this test's fxpay traffic from cassettes/ next to the "
        "test file (--fxpay-record records it again)",
    )
    remote = _remote(config)  # fail early, once, on a partial configuration
    if remote is not None and remote.admin_token is not None and _workers(config) > 1:
        raise pytest.UsageError(
            "fxpay: one served sandbox cannot be shared by several pytest-xdist workers (faults and reset act "
            "on the whole sandbox): run without -n, or without --fxpay-admin-token"
        )
    config.stash[_REMOTE] = remote


def _uses_controls(fn: object) -> bool:
    """Whether a test's own code calls a control on ``fxpay_sandbox`` (or a name bound to it).

    Read from the source; a control reached some other way (a helper the sandbox is passed
    to) skips the test when it is called instead.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    except (OSError, TypeError, SyntaxError):
        return False
    names = {"fxpay_sandbox"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in names:
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return any(
        isinstance(node, ast.Attribute) and node.attr in _CONTROLS and isinstance(node.value, ast.Name) and node.value.id in names
        for node in ast.walk(tree)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skips, before any fixture runs and so before any request, a test that needs what the
    configured sandbox cannot give."""
    remote = item.config.stash.get(_REMOTE, None)
    if remote is None:
        return
    fixtures = set(getattr(item, "fixturenames", ()))
    if "fxpay_local_sandbox" in fixtures:
        pytest.skip("needs the local sandbox")
    if remote.admin_token is None and "fxpay_sandbox" in fixtures and _uses_controls(getattr(item, "function", None)):
        pytest.skip(_LOCAL_ONLY)


class _ServedWithoutAdmin(RemoteSandbox):
    """A served sandbox without its admin token: the controls skip the test that calls them
    (a test whose code names them is skipped before it starts)."""

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, *, money: bool = False) -> NoReturn:
        pytest.skip(_LOCAL_ONLY)


@pytest.fixture
def fxpay_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox | RemoteSandbox]:
    """The sandbox the suite runs against: local by default, a served one when configured."""
    remote = request.config.stash.get(_REMOTE, None)
    if remote is None:
        with Sandbox() as sb:
            yield sb
        return
    if remote.admin_token is None:
        yield _ServedWithoutAdmin(
            remote.base_url,
            client_id=remote.client_id,
            client_secret=remote.client_secret,
            admin_token="-",
            ca_bundle=remote.ca_bundle,
            client_cert=remote.client_cert,
            client_key=remote.client_key,
        )
        return
    served = RemoteSandbox(
        remote.base_url,
        client_id=remote.client_id,
        client_secret=remote.client_secret,
        admin_token=remote.admin_token,
        ca_bundle=remote.ca_bundle,
        client_cert=remote.client_cert,
        client_key=remote.client_key,
    )
    served.reset()
    yield served


@pytest.fixture
def fxpay_local_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """The local sandbox; the test is skipped when a served sandbox is configured."""
    if request.config.stash.get(_REMOTE, None) is not None:
        pytest.skip("needs the local sandbox")
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def fxpay_client(request: pytest.FixtureRequest) -> Iterator[Client]:
    """A client of ``fxpay_sandbox``; with a cassette, one that records or replays it."""
    cassette = _test_cassette(request)
    if cassette is not None and cassette.mode == "replay":
        with cassette.client() as c:
            yield c
        return
    sandbox: Sandbox | RemoteSandbox = request.getfixturevalue("fxpay_sandbox")
    with sandbox.client(cassette=cassette) as c:
        yield c


# -- cassettes (fxpay.testing.Cassette) ----------------------------------------------------


def _test_cassette(request: pytest.FixtureRequest) -> Cassette | None:
    """The test's cassette, when it is marked ``fxpay_cassette`` or asks for the fixture."""
    if request.node.get_closest_marker("fxpay_cassette") is None and "fxpay_cassette" not in request.fixturenames:
        return None
    if request.config.getoption("--fxpay-no-cassettes") and "fxpay_cassette" not in request.fixturenames:
        return None
    cassette: Cassette = request.getfixturevalue("fxpay_cassette")
    return cassette


@pytest.fixture
def fxpay_cassette(request: pytest.FixtureRequest) -> Cassette:
    """This test's cassette: replayed, or recorded with ``--fxpay-record``."""
    marker = request.node.get_closest_marker("fxpay_cassette")
    name = marker.args[0] if marker is not None and marker.args else marker.kwargs.get("name") if marker else None
    if name is not None and not isinstance(name, str):
        raise pytest.UsageError(f"fxpay_cassette(name) takes a str, got {name!r}")
    test_file = Path(str(request.node.path))
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or request.node.name).strip("_")
    path = test_file.parent / "cassettes" / test_file.stem / f"{stem}.json"
    if request.config.getoption("--fxpay-no-cassettes"):
        # Live: a recording nobody keeps, so the test still gets a cassette to look at.
        tmp: Path = request.getfixturevalue("tmp_path")
        return Cassette(tmp / "cassette.json", mode="record")
    record = bool(request.config.getoption("--fxpay-record"))
    try:
        return Cassette(path, mode="record" if record else "replay")
    except ConfigurationError as e:
        problem = str(e)
    pytest.fail(f"{problem}; run the tests with --fxpay-record to record it", pytrace=False)

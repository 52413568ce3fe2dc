"""The pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:
- ``fxpay_sandbox``: a fresh local :class:`fxpay.testing.Sandbox` per test; or, when
  ``--fxpay-base-url`` (or ``FXPAY_BASE_URL`` with ``FXPAY_CLIENT_ID`` and
  ``FXPAY_CLIENT_SECRET``) is given, a handle on that remote sandbox. On a remote sandbox the
  faults, the clock and the inspection calls skip the test that uses them, so one suite runs
  against either.
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
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from . import Client
from .errors import ConfigurationError
from .testing import Cassette, Sandbox


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fxpay")
    group.addoption("--fxpay-base-url", default=None, help="run fxpay fixtures against this remote sandbox")
    group.addoption("--fxpay-client-id", default=None, help="client id for --fxpay-base-url (else FXPAY_CLIENT_ID)")
    group.addoption("--fxpay-client-secret", default=None, help="client secret (else FXPAY_CLIENT_SECRET)")
    group.addoption("--fxpay-record", action="store_true", help="record the cassettes of fxpay_cassette tests again")
    group.addoption(
        "--fxpay-no-cassettes", action="store_true", help="run fxpay_cassette tests live, neither replaying nor recording"
    )


def _remote(config: pytest.Config) -> tuple[str, str, str] | None:
    url = config.getoption("--fxpay-base-url") or None
    cid = config.getoption("--fxpay-client-id") or os.environ.get("FXPAY_CLIENT_ID")
    secret = config.getoption("--fxpay-client-secret") or os.environ.get("FXPAY_CLIENT_SECRET")
    if url is None:
        env_url = os.environ.get("FXPAY_BASE_URL")
        if not (env_url and cid and secret):
            return None
        url = env_url
    if not (cid and secret):
        raise pytest.UsageError("--fxpay-base-url needs FXPAY_CLIENT_ID and FXPAY_CLIENT_SECRET (or the options)")
    return url, cid, secret


class RemoteSandbox:
    """A remote sandbox: the same credentials and client, without the local-only controls."""

    def __init__(self, base_url: str, client_id: str, client_secret: str) -> None:
        self.base_url = base_url
        self.client_id = client_id
        self.client_secret = client_secret
        self.remote = True

    def client(self, **kwargs: Any) -> Client:
        return Client(self.client_id, self.client_secret, base_url=self.base_url, **kwargs)

    def _local_only(self, *_: Any, **__: Any) -> NoReturn:
        pytest.skip("needs the local sandbox (faults, clock and inspection are local only)")

    fail_next = drop_next = delay_next = advance = _local_only
    stats = deals = deliveries = deal_status = approve = _local_only

    def __repr__(self) -> str:
        return f"RemoteSandbox(base_url={self.base_url!r})"


@pytest.fixture
def fxpay_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox | RemoteSandbox]:
    """The sandbox the suite runs against: local by default, remote when configured."""
    remote = _remote(request.config)
    if remote is not None:
        yield RemoteSandbox(*remote)
        return
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def fxpay_local_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """The local sandbox; the test is skipped when a remote sandbox is configured."""
    if _remote(request.config) is not None:
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fxpay_cassette(name=None): replay this test's fxpay traffic from cassettes/ next to the "
        "test file (--fxpay-record records it again)",
    )


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

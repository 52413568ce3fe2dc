"""The pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:
- ``fxpay_sandbox``: a fresh local :class:`fxpay.testing.Sandbox` per test; or, when
  ``--fxpay-base-url`` (or ``FXPAY_BASE_URL`` with ``FXPAY_CLIENT_ID`` and
  ``FXPAY_CLIENT_SECRET``) is given, a handle on that remote sandbox. On a remote sandbox the
  faults, the clock and the inspection calls skip the test that uses them, so one suite runs
  against either.
- ``fxpay_local_sandbox``: the local sandbox, skipped when a remote one is configured.
- ``fxpay_client``: a :class:`fxpay.Client` bound to ``fxpay_sandbox``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from . import Client
from .testing import Sandbox


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fxpay")
    group.addoption("--fxpay-base-url", default=None, help="run fxpay fixtures against this remote sandbox")
    group.addoption("--fxpay-client-id", default=None, help="client id for --fxpay-base-url (else FXPAY_CLIENT_ID)")
    group.addoption("--fxpay-client-secret", default=None, help="client secret (else FXPAY_CLIENT_SECRET)")


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
def fxpay_client(fxpay_sandbox: Sandbox | RemoteSandbox) -> Iterator[Client]:
    """A client of ``fxpay_sandbox``."""
    with fxpay_sandbox.client() as c:
        yield c

"""The pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:
- ``fxpay_sandbox``: a fresh :class:`fxpay.testing.Sandbox` per test.
- ``fxpay_client``: a :class:`fxpay.Client` bound to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import Client
from .testing import Sandbox


@pytest.fixture
def fxpay_sandbox() -> Iterator[Sandbox]:
    """A fresh local sandbox on a random loopback port, closed after the test."""
    with Sandbox() as sb:
        yield sb


@pytest.fixture
def fxpay_client(fxpay_sandbox: Sandbox) -> Iterator[Client]:
    """A client of ``fxpay_sandbox``."""
    with fxpay_sandbox.client() as c:
        yield c

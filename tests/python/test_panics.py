"""A Rust panic never reaches Python as anything but an FxPayError with a message."""

from __future__ import annotations

import fxpay
import pytest
from fxpay import _fxpay


def test_blocking_panic_is_fxpay_error() -> None:
    with pytest.raises(fxpay.FxPayError, match="panic") as ei:
        _fxpay._raise_panic_for_test(False)
    assert type(ei.value) is fxpay.FxPayError
    assert "deliberate test panic" in str(ei.value)


async def test_async_panic_is_fxpay_error() -> None:
    with pytest.raises(fxpay.FxPayError, match="deliberate test panic"):
        await _fxpay._raise_panic_for_test(True)

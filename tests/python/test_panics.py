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


def test_ctrl_c_ends_a_blocking_call(fxpay_sandbox) -> None:  # type: ignore[no-untyped-def]
    import os
    import signal
    import threading
    import time

    c = fxpay_sandbox.client(timeout=30)
    qid = c.create_quote(buy_currency="USD", buy_amount=5, sell_currency="EUR")
    fxpay_sandbox.delay_next("GET /v1/payments/quotes/*", 10)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        c.get_quote(qid)
    assert time.monotonic() - started < 3
    # The client still works afterwards.
    assert c.get_quote(qid).id == qid

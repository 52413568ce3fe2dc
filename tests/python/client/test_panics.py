"""A Rust panic never reaches Python as anything but an FxPayError with a message (the hooks that
panic on purpose are in the private submodule ``fxpay._fxpay._testing``, not the public module)."""

from __future__ import annotations

import pytest

import fxpay
from fxpay import _fxpay


def test_blocking_panic_is_fxpay_error() -> None:
    with pytest.raises(fxpay.FxPayError, match="panic") as ei:
        _fxpay._testing.raise_panic()
    assert type(ei.value) is fxpay.FxPayError
    assert "deliberate test panic" in str(ei.value)


def test_the_panic_hooks_are_not_in_the_public_module() -> None:
    assert not [n for n in dir(_fxpay) if "panic" in n]


async def test_async_panic_is_fxpay_error() -> None:
    with pytest.raises(fxpay.FxPayError, match="deliberate test panic"):
        await _fxpay._testing.raise_panic_async()


CTRL_C = """
import os, signal, sys, threading, time
# Whatever this process inherited (a suite started as a background job ignores SIGINT),
# Ctrl-C raises KeyboardInterrupt here, as in an interactive session.
signal.signal(signal.SIGINT, signal.default_int_handler)
import fxpay

ROUTE = "GET /v1/payments/quotes/{id}"
with fxpay.testing.Sandbox() as sb:
    c = sb.client(timeout=120)
    qid = c.create_quote(buy_currency="USD", buy_amount=5, sell_currency="EUR")
    sb.delay_next("GET /v1/payments/quotes/*", 60)
    before = sb.stats()["paths"][ROUTE]
    sent_at = []

    def interrupt():
        # Once the read has reached the sandbox (and is held there), press Ctrl-C.
        while sb.stats()["paths"][ROUTE] == before:
            time.sleep(0.01)
        sent_at.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        c.get_quote(qid)
    except KeyboardInterrupt:
        print("INTERRUPTED AFTER", time.monotonic() - sent_at[0], flush=True)
    else:
        sys.exit("the call returned instead of raising KeyboardInterrupt")
    # The client still works afterwards.
    assert c.get_quote(qid).id == qid
    print("STILL WORKS", flush=True)
"""


def test_ctrl_c_ends_a_blocking_call() -> None:
    # In a child process with the default SIGINT handler restored, so the test runs (and
    # means the same) however this suite was started.
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", CTRL_C], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    took = float(out.split("INTERRUPTED AFTER", 1)[1].split()[0])
    # The read is held for 60 s; Ctrl-C must end it at once (10 s leaves a wide margin).
    assert took < 10, out
    assert "STILL WORKS" in out, out

"""``fxpay.testing``: an embedded, stateful emulator of the whole service, a handle on one
served by another process, and record and replay.

    with fxpay.testing.Sandbox() as sb:
        c = sb.client()
        quote_id = c.create_quote(buy_currency="USD", buy_amount=1000, sell_currency="AUD")

- :class:`Sandbox` runs the emulator inside this process on a free port of 127.0.0.1.
- :class:`RemoteSandbox` drives one served by another process (``python -m fxpay.sandbox``)
  over its admin API under ``/_sandbox/``, with the same methods and properties.
- :class:`Cassette` records a client's HTTP exchanges to a file and replays them offline;
  a request the cassette does not hold raises :class:`CassetteMismatchError`.
- ``fxpay.testing.pytest_plugin`` (registered on install) gives the fixtures ``fxpay_sandbox``,
  ``fxpay_local_sandbox``, ``fxpay_client`` and ``fxpay_cassette``.

``import fxpay`` does not import this package; ``fxpay.testing`` imports it on first use.
"""

from __future__ import annotations

from ..errors import CassetteMismatchError
from ._cassette import Cassette
from ._checks import UnfiredFaultWarning
from ._remote import RemoteSandbox
from ._sandbox import Sandbox
from ._webhooks import deal_created_request

__all__ = ["Cassette", "CassetteMismatchError", "RemoteSandbox", "Sandbox", "UnfiredFaultWarning", "deal_created_request"]

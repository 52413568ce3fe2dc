"""Ready-made receivers of the ``DealCreated`` notification for web frameworks.

Each lives in its own module and imports its framework only when that module is imported:

- :func:`fxpay.contrib.fastapi.deal_created_router` (``pip install fxpay[fastapi]``)
- :func:`fxpay.contrib.django.deal_created_view` (``pip install fxpay[django]``)

Both call ``on_event`` at most once per ``processId`` (see :mod:`fxpay.seen`), and answer 200
``{"ok": true}`` once ``on_event`` has returned (or, for a repeat, without calling it), 409
while another delivery of the same ``processId`` is being handled, 401 when the
``callback-nonce`` does not verify, 400 when the body is not a valid event, and 500 when
``on_event`` raises, so that the sender can try again.
"""

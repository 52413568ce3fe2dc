"""``python -m fxpay.sandbox``: the command line that serves the local sandbox (its code is
this package's ``__main__.py``). The sandbox itself, for tests, is :class:`fxpay.testing.Sandbox`."""

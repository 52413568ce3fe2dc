"""``python -m fxpay.sandbox``: serve the local sandbox until interrupted.

It prints ``FXPAY_*=value`` lines: base URL, credentials, redirect URI, user, password, the
admin token of its ``/_sandbox/`` API and, with ``--tls``, the CA file (``FXPAY_CA_BUNDLE``).
Its flags are those of ``python -m fxpay sandbox`` (one parser: ``_command.py``).
"""

from __future__ import annotations

import argparse

from ._command import DESCRIPTION, add_arguments, serve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fxpay.sandbox", description=DESCRIPTION)
    add_arguments(p)
    return serve(p.parse_args(argv), p.error)


if __name__ == "__main__":
    raise SystemExit(main())

"""The sandbox's one command line: its flags (:func:`add_arguments`) and serving with them
(:func:`serve`). ``python -m fxpay.sandbox`` and ``python -m fxpay sandbox`` both use it, so
they take the same flags with the same help."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

DESCRIPTION = (
    "Serve fxpay's local sandbox until interrupted. It prints FXPAY_*=value lines: base URL, "
    "credentials, redirect URI, user, password, the admin token of its /_sandbox/ API and, with "
    "--tls, the CA file (FXPAY_CA_BUNDLE); with --client-auth, a client certificate and key."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Adds every flag of the sandbox's command line to ``p``."""
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--tls", action="store_true", help="serve https with a CA made at start (FXPAY_CA_BUNDLE)")
    p.add_argument(
        "--client-auth",
        action="store_true",
        help="with --tls, require a client certificate issued by the sandbox's CA (FXPAY_CLIENT_CERT, FXPAY_CLIENT_KEY)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=10.0,
        help="seconds a request body may take to arrive once its headers are read (default 10)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        help="seconds a connection may stay with no request in progress before it is closed (default 60)",
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        default=None,
        metavar="N",
        help="answer requests beyond N per second with 429 and Retry-After (default: no limit)",
    )


def serve(args: argparse.Namespace, error: Callable[[str], NoReturn]) -> int:
    """Serves a sandbox made with ``args`` (the flags of :func:`add_arguments`) until SIGTERM
    or Ctrl-C; ``error`` is the parser's, for flags that do not go together."""
    if args.client_auth and not args.tls:
        error("--client-auth needs --tls")
    from ..testing import Sandbox

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Sandbox(
        host=args.host,
        port=args.port,
        tls=args.tls,
        body_timeout=args.body_timeout,
        idle_timeout=args.idle_timeout,
        client_auth=args.client_auth,
        rate_limit=args.rate_limit,
    ) as sb:
        print(f"FXPAY_BASE_URL={sb.base_url}")
        print(f"FXPAY_CLIENT_ID={sb.client_id}")
        print(f"FXPAY_CLIENT_SECRET={sb.client_secret}")
        print(f"FXPAY_REDIRECT_URI={sb.redirect_uri}")
        print(f"FXPAY_USERNAME={sb.username}")
        print(f"FXPAY_PASSWORD={sb.password}")
        print(f"FXPAY_ADMIN_TOKEN={sb.admin_token}")
        if sb.ca_bundle is not None:
            print(f"FXPAY_CA_BUNDLE={sb.ca_bundle}")
        if sb.client_cert is not None:
            print(f"FXPAY_CLIENT_CERT={sb.client_cert}")
            print(f"FXPAY_CLIENT_KEY={sb.client_key}")
        sys.stdout.flush()
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    return 0

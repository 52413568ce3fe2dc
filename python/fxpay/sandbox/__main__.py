"""``python -m fxpay.sandbox``: serve the local sandbox until interrupted.

It prints ``FXPAY_*=value`` lines: base URL, credentials, redirect URI, user, password, the
admin token of its ``/_sandbox/`` API and, with ``--tls``, the CA file (``FXPAY_CA_BUNDLE``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from ..testing import Sandbox


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fxpay.sandbox", description="Serve fxpay's local sandbox.")
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
    args = p.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.client_auth and not args.tls:
        p.error("--client-auth needs --tls")
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


if __name__ == "__main__":
    raise SystemExit(main())

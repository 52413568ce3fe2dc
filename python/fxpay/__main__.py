"""``python -m fxpay``: a small command line.

python -m fxpay quote USD AUD 1000          # against FXPAY_BASE_URL with FXPAY_CLIENT_ID/SECRET
python -m fxpay quote USD AUD 1000 --sandbox   # against a throw-away embedded sandbox
python -m fxpay sandbox [--port P] [--tls] ...       # serve the emulator (every flag of python -m fxpay.sandbox)
python -m fxpay journal create URL          # make a Redis or PostgreSQL journal, once
"""

from __future__ import annotations

import argparse
import sys

from . import Client, FxPayError, Quote, _journal_cli
from .sandbox._command import DESCRIPTION, add_arguments, serve


def _quote_table(q: Quote) -> str:
    rows = [
        ("quote id", q.id),
        ("buy", f"{q.buy_amount} {q.buy_currency}"),
        ("sell", f"{q.sell_amount} {q.sell_currency}"),
        ("customer rate", str(q.customer_rate)),
        ("inverse rate", str(q.inverse_customer_rate)),
        ("fee", "not given" if q.fee is None else f"{q.fee} {q.fee_currency or ''}".rstrip()),
        ("freebies", "not given" if q.freebies is None else f"{q.freebies.remaining} of {q.freebies.total} left"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _quote(args: argparse.Namespace) -> int:
    # The text as typed: the client reads it as it reads any amount given as text (one
    # parser, so `1_000` is refused here as the library refuses it).
    amount = args.amount
    if args.sandbox:
        from .testing import Sandbox

        with Sandbox() as sb, sb.client() as c:
            q = c.get_quote(c.create_quote(buy_currency=args.buy, buy_amount=amount, sell_currency=args.sell))
            print(_quote_table(q) + "\n(embedded sandbox)")
        return 0
    with Client.from_env() as c:
        q = c.get_quote(c.create_quote(buy_currency=args.buy, buy_amount=amount, sell_currency=args.sell))
        print(_quote_table(q))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fxpay", description="fxpay command line")
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quote", help="create a quote and print it")
    q.add_argument("buy", help="currency the service buys from you (ISO 4217, e.g. USD)")
    q.add_argument("sell", help="currency the service sells to you (e.g. AUD)")
    q.add_argument("amount", help="amount in the buy currency (exact decimal)")
    q.add_argument("--sandbox", action="store_true", help="use a throw-away embedded sandbox")
    s = sub.add_parser("sandbox", help="serve the local sandbox", description=DESCRIPTION)
    add_arguments(s)
    _journal_cli.add_parser(sub)
    args = p.parse_args(argv)
    try:
        if args.command == "quote":
            return _quote(args)
        if args.command == "journal":
            return _journal_cli.run(args)
        return serve(args, s.error)
    except FxPayError as e:
        print(f"fxpay: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

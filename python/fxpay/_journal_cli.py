"""``python -m fxpay journal create URL``: makes a shared journal, once.

A Redis or PostgreSQL journal is made by one explicit step (docs/idempotency.md, "Make a
journal once"): this command, ``journal.create()``, or the Django migration. Never at every
start-up: made where a journal was lost, a new journal sends every key the old one held again.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .errors import FxPayError


def add_parser(sub: Any) -> None:
    j = sub.add_parser("journal", help="make a shared idempotency journal (once)")
    jsub = j.add_subparsers(dest="journal_command", required=True)
    c = jsub.add_parser(
        "create",
        help="make the journal at URL if it is not there (does nothing where it is)",
        description="Makes the idempotency journal at URL: redis://, rediss:// or unix:// (RedisJournal), "
        "postgresql:// or postgres:// (PostgresJournal). Run it once, never at every start-up.",
    )
    c.add_argument("url", help="redis://host:6379/0, unix:///path/redis.sock?db=0, or postgresql://user@host/db")
    c.add_argument("--prefix", default=None, help="RedisJournal's key prefix (default fxpay:journal:)")
    c.add_argument("--table", default=None, help="PostgresJournal's table, optionally schema-qualified (default fxpay_journal)")


def run(args: argparse.Namespace) -> int:
    url: str = args.url
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    try:
        if scheme in ("redis", "rediss", "unix"):
            from .journals import RedisJournal

            journal: Any = RedisJournal(url) if args.prefix is None else RedisJournal(url, prefix=args.prefix)
            where = f"prefix {journal.prefix!r}"
        elif scheme in ("postgresql", "postgres"):
            from .journals.postgres import PostgresJournal

            journal = PostgresJournal(url) if args.table is None else PostgresJournal(url, table=args.table)
            where = f"table {journal.table!r}"
        else:
            print(
                "fxpay journal create: URL must start with redis://, rediss://, unix:// (Redis) or postgresql:// (PostgreSQL)",
                file=sys.stderr,
            )
            return 2
        made = journal.create()
    except FxPayError as e:
        print(f"fxpay journal create: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"journal {'created' if made else 'already there, left as it was'}: {where}")
    return 0

"""``manage.py fxpay_unknown``: the keys whose outcome is unknown, and settling one.

    manage.py fxpay_unknown                               # lists them, oldest first
    manage.py fxpay_unknown --resolve KEY --result ID     # it was created: ID is its id
    manage.py fxpay_unknown --resolve KEY --none          # it was not: the key is released

``--database ALIAS`` (default ``default``) names the journal's database. How to find out
whether an unknown request was created: docs/idempotency.md, "Reconciling an unknown key".
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fxpay.errors import FxPayError


class Command(BaseCommand):
    help = "Lists the idempotency keys whose outcome is unknown, or settles one (--resolve KEY --result ID | --none)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default="default", help="the alias of the journal's database (default: default)")
        parser.add_argument("--resolve", metavar="KEY", help="the unknown key to settle")
        outcome = parser.add_mutually_exclusive_group()
        outcome.add_argument("--result", metavar="ID", help="the id the request created (found in the provider's records)")
        outcome.add_argument("--none", action="store_true", help="the request created nothing: release the key")

    def handle(self, *args: Any, **options: Any) -> None:
        from fxpay.contrib.django import journal

        key, result, none = options["resolve"], options["result"], options["none"]
        if key is None and (result is not None or none):
            raise CommandError("--result and --none settle a key: give it with --resolve KEY")
        if key is not None and result is None and not none:
            raise CommandError("--resolve KEY needs --result ID (it was created) or --none (it was not)")
        try:
            j = journal(options["database"])
            if key is not None:
                entry = j.resolve(key, result=result)
                shown = f" {entry.result}" if entry.result else ""
                self.stdout.write(f"{entry.key}\t{entry.state}{shown}")
                return
            unknown = j.unknown()
        except FxPayError as e:
            raise CommandError(str(e)) from e
        for entry in unknown:
            self.stdout.write(f"{entry.key}\t{entry.operation}\t{entry.created_at.isoformat()}\t{entry.error or ''}")
        if not unknown:
            self.stderr.write("no unknown keys")

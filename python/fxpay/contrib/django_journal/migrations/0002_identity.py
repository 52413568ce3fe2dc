"""Gives the journal its identity (issue 52: a journal knows itself): the identity row of
:func:`fxpay.postgres_journal.table_ddl`, which ``PostgresJournal`` checks with every claim.
A journal made by ``0001`` on an older fxpay gets its identity here, keys and all.

Reversed (``manage.py migrate fxpay_journal zero``), it refuses while the journal holds keys
that are not settled (``pending`` or ``unknown``: a payment may be in flight), since dropping
them would let those payments be sent again; settle them first (``manage.py fxpay_unknown``),
or set ``FXPAY_JOURNAL_FORCE_DROP=1`` to drop the journal anyway. On any other database it
does nothing, as ``fxpay.contrib.django.journal()`` refuses those."""

from __future__ import annotations

import importlib
import os
from typing import Any, ClassVar

from django.db import migrations

from fxpay.journals.postgres import DEFAULT_TABLE, IDENTITY_KEY

# The same statements as 0001's (table_ddl, the identity row included): idempotent, so a
# journal 0001 made on an older fxpay gets its identity here.
create = importlib.import_module(f"{__package__}.0001_initial").create


def refuse_while_unsettled(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(DEFAULT_TABLE)
    with schema_editor.connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table} WHERE state IN ('pending', 'unknown')")
        (unsettled,) = cur.fetchone()
        if unsettled and os.environ.get("FXPAY_JOURNAL_FORCE_DROP") != "1":
            raise RuntimeError(
                f"fxpay_journal: the journal holds {unsettled} key(s) that are not settled (pending or unknown: their "
                "payments may have been sent), and dropping the journal would let them be sent again. Settle them "
                "first (manage.py fxpay_unknown, then --resolve KEY --result ID or --none), or set "
                "FXPAY_JOURNAL_FORCE_DROP=1 to drop it anyway. Nothing was dropped."
            )
        cur.execute(f"DELETE FROM {table} WHERE key = %s", [IDENTITY_KEY])


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("fxpay_journal", "0001_initial")]
    operations: ClassVar[list[Any]] = [migrations.RunPython(create, refuse_while_unsettled, elidable=False)]

"""Makes the journal's table and indexes (:func:`fxpay.postgres_journal.table_ddl`, the
statements ``PostgresJournal.create_table()`` runs) on PostgreSQL; on any other database it
does nothing, as ``fxpay.contrib.django.journal()`` refuses those."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from fxpay.journals.postgres import DEFAULT_TABLE, table_ddl


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in table_ddl(DEFAULT_TABLE):
        schema_editor.execute(statement)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(DEFAULT_TABLE)}")


class Migration(migrations.Migration):
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[Any]] = [migrations.RunPython(create, drop, elidable=False)]

"""The public names of :mod:`fxpay.journals.postgres` at the path the docs give them
(``fxpay.postgres_journal.table_ddl``): the PostgreSQL journal itself lives in the journals
package, with the other stores."""

from __future__ import annotations

from .journals.postgres import DEFAULT_TABLE, IDENTITY_KEY, PostgresJournal, conninfo_of, table_ddl

__all__ = ["DEFAULT_TABLE", "IDENTITY_KEY", "PostgresJournal", "conninfo_of", "table_ddl"]

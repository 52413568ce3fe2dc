"""PostgresJournal: the idempotency journal in the user's own PostgreSQL (``fxpay[postgres]``).

Every machine of a deployment that reaches one PostgreSQL shares its keys, with the user's
backups, replication and ``psql``. The table is one row per key: the entry's
:meth:`~fxpay.JournalEntry.to_json` text in ``data``, with its ``state`` and ``result``
beside it for the indexes. A claim is ``INSERT ... ON CONFLICT (key) DO NOTHING`` and a swap
a compare-and-set ``UPDATE ... WHERE data = old``, each committed on the journal's own
connection (autocommit) before the call goes on: a caller's open transaction (Django's
``atomic()``, a SQLAlchemy session) can neither hold a claim back nor roll it back.

Each process keeps a few connections of its own (up to ``max_connections``, 4), made as
concurrent calls need them, each used by one call at a time, and made anew in a forked child
(the child never uses nor closes its parent's). The DDL, the reasons and
the settings the server needs: docs/idempotency.md.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import _forks
from .._fxpay import JournalEntry, _NativeStore, _postgres_store
from .._group_commit import _Claim, _GroupCommit
from .._later import _Later
from ..errors import ConfigurationError, JournalError
from ._base import JournalBase, _check_entry, _check_key, _OwnJournal, _result_waits, _seconds, logger

__all__ = ["DEFAULT_TABLE", "IDENTITY_KEY", "PostgresJournal", "conninfo_of", "table_ddl"]

# The table a journal uses unless told otherwise (and the one the Django migration makes).
DEFAULT_TABLE = "fxpay_journal"

# The key of the journal's identity row: it starts with a control character, which no
# caller's key may hold.
IDENTITY_KEY = "\x01journal"

# One part of a table name (PostgreSQL folds nothing inside quotes, and we always quote).
# At most 50 characters, so that the index names made from it stay within PostgreSQL's 63.
_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,49}")

# SQLSTATE classes and codes met when the journal cannot be used as it is.
_UNDEFINED_TABLE = "42P01"
_READ_ONLY = "25006"

# The longest timeout PostgreSQL takes (its settings in milliseconds are 32-bit integers).
_MAX_SECONDS = 2_000_000.0


def _table_parts(table: object) -> tuple[str, ...]:
    """``table`` ("name" or "schema.name") as its parts, each an SQL identifier; anything
    else is a TypeError or a ConfigurationError naming ``table``."""
    if not isinstance(table, str):
        raise TypeError(f"table must be a str, not {type(table).__name__}")
    parts = tuple(table.split("."))
    if len(parts) > 2 or not all(_PART.fullmatch(p) for p in parts):
        raise ConfigurationError(
            f"table must be an SQL identifier (letters, digits and _, not starting with a digit, "
            f"at most 50 characters), optionally schema-qualified, got {table!r}"
        )
    return parts


def _conninfo_dict(conninfo: str) -> dict[str, Any]:
    """The parameters a libpq connection string or URL sets; one that libpq cannot read is a
    ConfigurationError (which does not repeat the string: it may hold a password)."""
    try:
        from psycopg import conninfo as libpq
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise ConfigurationError("PostgresJournal needs psycopg 3: pip install 'fxpay[postgres]'") from e
    try:
        return dict(libpq.conninfo_to_dict(conninfo))
    except Exception:
        raise ConfigurationError("conninfo is not a libpq connection string or URL (host=... dbname=..., postgresql://...)") from None


# What fxpay's core reads of a connection string (the rest of libpq's parameters, TLS's
# among them, are psycopg's alone).
_CORE_KEYS = frozenset(
    {
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "connect_timeout",
        "tcp_user_timeout",
        "application_name",
        "options",
        "sslmode",
    }
)
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _core_conninfo(given: dict[str, Any]) -> str | None:
    """The connection string for fxpay's core, which connects as libpq would with ``given``
    (the conninfo's parameters) and the ``PG*`` environment variables libpq reads, or None
    where only libpq can: a parameter the core does not read (a service file, client
    certificates, ...), a password libpq would look up in a password file, no host (libpq's
    default socket folder), or a connection libpq would make over TLS (``sslmode`` other than
    ``disable``, unless every host is a Unix socket or loopback, where libpq's ``prefer``
    only encrypts what never leaves the machine)."""
    from psycopg import conninfo as libpq
    from psycopg import pq

    params = {k: str(v) for k, v in given.items() if v is not None and v != ""}
    for option in pq.Conninfo.get_defaults():
        key, env = option.keyword.decode(), option.envvar
        if env is not None and env.decode() in os.environ and key not in params:
            params[key] = os.environ[env.decode()]
    if not set(params) <= _CORE_KEYS or "host" not in params:
        return None
    hosts = params["host"].split(",")
    local = all(h.startswith("/") or h in _LOOPBACK for h in hosts) and "hostaddr" not in params
    if params.get("sslmode", "prefer") != "disable" and not (local and params.get("sslmode", "prefer") in ("prefer", "allow")):
        return None
    if params.get("sslmode") == "allow":
        params["sslmode"] = "prefer"
    if "password" not in params and (os.environ.get("PGPASSFILE") or os.path.exists(os.path.expanduser("~/.pgpass"))):
        return None
    if "user" not in params:
        import getpass

        params["user"] = getpass.getuser()
    return libpq.make_conninfo("", **params)


def _quoted(*parts: str) -> str:
    try:
        from psycopg import sql
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise ConfigurationError("PostgresJournal needs psycopg 3: pip install 'fxpay[postgres]'") from e
    return sql.Identifier(*parts).as_string(None)


def table_ddl(table: str = DEFAULT_TABLE) -> list[str]:
    """The statements that make the journal: its table, its indexes and its identity row
    (idempotent: ``IF NOT EXISTS``, ``ON CONFLICT DO NOTHING``). :meth:`PostgresJournal.create`
    and the Django migrations run these; the docs show them for those who migrate by hand.
    Run them once: where a journal was lost, a new one sends every key the old one held again."""
    return _ddl(_table_parts(table))


def _ddl(parts: tuple[str, ...]) -> list[str]:
    name = _quoted(*parts)
    result_index = _quoted(parts[-1] + "_result")
    open_index = _quoted(parts[-1] + "_open")
    return [
        f"CREATE TABLE IF NOT EXISTS {name} ("
        " key text PRIMARY KEY,"
        " seq bigint GENERATED BY DEFAULT AS IDENTITY,"
        " state text NOT NULL,"
        " result text,"
        " data text NOT NULL,"
        " updated_at timestamptz NOT NULL DEFAULT now())",
        f"CREATE INDEX IF NOT EXISTS {result_index} ON {name} (result) WHERE result IS NOT NULL",
        f"CREATE INDEX IF NOT EXISTS {open_index} ON {name} (seq) WHERE state IN ('pending', 'unknown')",
        # The journal's identity: a random id, and the table it was made in (schema and name,
        # as PostgreSQL resolved them), so that a copy or a shadowing table is told apart.
        f"INSERT INTO {name} (key, state, data)"
        f" SELECT {_literal(IDENTITY_KEY)}, 'journal', json_build_object("
        "'journal', 'fxpay-journal:' || md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text),"
        " 'table', n.nspname || '.' || c.relname)::text"
        f" FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass({_literal(name)})"
        " ON CONFLICT (key) DO NOTHING",
    ]


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (no backslash escapes: standard_conforming_strings)."""
    return "'" + text.replace("'", "''") + "'"


def conninfo_of(params: dict[str, Any]) -> str:
    """A libpq connection string from ``params`` (a framework's database settings: ``dbname``,
    ``user``, ``host`` ... and its options): empty values and keys that are not libpq's
    (a framework's own options, such as Django's ``isolation_level``) are left out."""
    try:
        from psycopg import conninfo, pq
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise ConfigurationError("PostgresJournal needs psycopg 3: pip install 'fxpay[postgres]'") from e
    known = {o.keyword.decode() for o in pq.Conninfo.get_defaults()}
    kept = {k: str(v) for k, v in params.items() if k in known and v is not None and v != ""}
    return conninfo.make_conninfo("", **kept)


class PostgresJournal(_OwnJournal):
    """A journal in a PostgreSQL table, shared by every process and machine that reaches it.

    ``conninfo``: a libpq connection string or URL (``"host=db dbname=app user=app"``,
    ``"postgresql://app@db/app"``), used with psycopg 3; or a callable that returns a DB-API
    connection to PostgreSQL (a SQLAlchemy engine's ``raw_connection``, a
    ``psycopg.connect`` partial). The journal keeps that connection for itself, in
    autocommit.

    ``table``: the table's name, optionally schema-qualified (``"payments.fxpay_journal"``);
    make it with :meth:`create_table` (or the Django migration, or the DDL of
    :func:`table_ddl`). ``timeout``: seconds that connecting and each statement may take
    (``connect_timeout``, ``statement_timeout``) before the call fails closed.

    It fails closed (:class:`fxpay.JournalError`, nothing sent) when the server is down or
    unreachable, a statement times out, the table is missing, or the server is read-only (a
    replica in recovery, ``default_transaction_read_only``). A session whose
    ``synchronous_commit`` is ``off`` is set ``on``: a claim is flushed to the server's WAL
    before its request is sent.

    Each process opens up to ``max_connections`` (4) connections, as concurrent calls need
    them; with a ``conninfo`` callable they come from (and count in) your pool. A connection
    unused for ``ping_after`` seconds (30) is checked with ``SELECT 1`` before
    the next statement and made anew if the server closed it meanwhile.
    """

    # Seconds a connection may sit unused before the next call checks it first.
    ping_after: float = 30.0
    # Connections a process opens at most (as many calls run at once; each call uses one).
    max_connections: int = 4

    def __init__(
        self,
        conninfo: str | Callable[[], Any],
        *,
        table: str = DEFAULT_TABLE,
        timeout: float = 5.0,
    ) -> None:
        if isinstance(conninfo, str):
            self._conninfo: str | None = conninfo
            self._factory: Callable[[], Any] | None = None
            given = _conninfo_dict(conninfo)
            self._given = set(given)
        elif callable(conninfo):
            self._conninfo, self._factory = None, conninfo
        else:
            raise TypeError(f"conninfo must be a str or a callable returning a DB-API connection, not {type(conninfo).__name__}")
        seconds = _seconds("timeout", timeout, most=math.inf)  # beyond PostgreSQL's longest: its longest
        self._parts = _table_parts(table)
        self.table = table
        self._timeout = seconds
        self._millis = max(1, int(min(self._timeout, _MAX_SECONDS) * 1000))
        # A journal made from a connection string the core can use keeps its storage in
        # fxpay's Rust core: a keyed call on it never climbs into Python. One over a callable
        # (Django, SQLAlchemy), or whose connection only libpq can make, runs here on psycopg.
        self._store: _NativeStore | None = None
        core = _core_conninfo(given) if self._conninfo is not None else None
        if core is not None:
            from .. import _later

            self._store = _postgres_store(
                core,
                table,
                min(self._timeout, _MAX_SECONDS),
                _later.RESULT_DELAY,
                _result_waits,
                functools.partial(_postgres_not_recorded, table),
            )
            _forks.register(self)
            return
        # The journal this process opened, read on first use (or made by `create()`): its
        # table, schema-qualified as PostgreSQL resolved it, its identity row's text, and the
        # statements on that table. Every claim runs only where that identity row still is.
        self._sql: _Statements | None = None
        self._open_lock = threading.Lock()
        # The pool: connections of this process, made as calls need them (up to
        # `max_connections`), each used by one call at a time; `_lock` guards the lists.
        self._lock = threading.Condition()
        self._idle: list[_Conn] = []  # free, the last used on top
        self._mine: set[_Conn] = set()  # every connection of this process, free or in use
        self._pid = os.getpid()
        # Connections inherited through a fork: kept (never used, never closed) so that no
        # finaliser of the child ever writes to the parent's session.
        self._inherited: list[_Conn] = []
        # Results of keyed calls waiting for the next commit (one durable write per call).
        self._where = f"postgres:{self._conninfo if self._conninfo is not None else id(self._factory)}:{table}"
        self._later = _Later.of(self._where)
        # This process's claims waiting for their commit (made anew in a forked child).
        self._group = _GroupCommit()
        _forks.register(self)

    def _identity(self) -> str:
        """The identity row's text of the journal this process opened (read on first use)."""
        if self._store is not None:
            return self._store.diagnostic("identity")
        st = self._open("identity")
        assert st.ident is not None
        return st.ident

    # -- the connection ------------------------------------------------------------------

    def _after_fork(self, *, child: bool) -> None:
        """A store of the core's hands its per-process side over (:class:`_OwnJournal`); one in
        Python makes, in a forked child, a fresh lock (the parent's may have been held by a
        thread the child does not have), and sets the parent's connections aside, unused and
        unclosed."""
        super()._after_fork(child=child)
        if not child or self._store is not None:
            return
        self._lock = threading.Condition()
        self._set_aside()
        self._later = _Later.of(self._where)
        self._group = _GroupCommit()  # a leader of the parent's commit is not the child's

    def _set_aside(self) -> None:
        for c in self._mine:
            _detach(c.dbapi)
            self._inherited.append(c)
        self._mine, self._idle = set(), []
        self._pid = os.getpid()

    def _connect(self) -> _Conn:
        """A new connection of this process, in autocommit, checked and set up."""
        if self._factory is None:
            try:
                import psycopg
            except ImportError as e:  # pragma: no cover - depends on the extra
                raise ConfigurationError("PostgresJournal needs psycopg 3: pip install 'fxpay[postgres]'") from e
            assert self._conninfo is not None
            # What the connection string sets itself is left as it is.
            extra: dict[str, Any] = {}
            if "connect_timeout" not in self._given:
                extra["connect_timeout"] = max(2, math.ceil(min(self._timeout, _MAX_SECONDS)))
            if "tcp_user_timeout" not in self._given:
                # A server that vanished without a word (its host gone) fails the call
                # after `timeout`, not after the kernel's 15 minutes of retransmissions.
                extra["tcp_user_timeout"] = self._millis
            conn = psycopg.connect(self._conninfo, autocommit=True, **extra)
            dbapi = conn
        else:
            conn = self._factory()
            if not hasattr(conn, "cursor"):
                raise ConfigurationError(f"conninfo() returned {type(conn).__name__}, not a DB-API connection")
            # A SQLAlchemy pool's proxy: its driver connection takes `autocommit`.
            dbapi = getattr(conn, "dbapi_connection", None) or conn
        try:
            commit_each = False
            try:
                if dbapi.autocommit is not True:
                    dbapi.rollback()  # a connection handed over inside a transaction
                    dbapi.autocommit = True
            except AttributeError:
                commit_each = True
            c = _Conn(conn, dbapi, commit_each)
            rows = c.execute(
                "SELECT pg_is_in_recovery(), current_setting('transaction_read_only'),"
                " current_setting('synchronous_commit'), set_config('statement_timeout', %s, false)",
                (str(self._millis),),
            )[1]
            recovery, read_only, sync = rows[0][0], rows[0][1], rows[0][2]
            if recovery or read_only == "on":
                why = "a replica in recovery" if recovery else "transaction_read_only is on"
                raise JournalError(f"PostgresJournal: the server is read-only ({why}); the journal needs the primary")
            if sync == "off":
                c.execute("SET synchronous_commit = on", ())
        except BaseException:
            _close(conn)
            raise
        return c

    def _checkout(self, what: str) -> _Conn:
        """A connection for one call: a free one, else a new one while there are fewer than
        ``max_connections``, else the first one given back (within ``timeout``)."""
        deadline = time.monotonic() + self._timeout
        with self._lock:
            if self._pid != os.getpid():  # a fork that ran no at-fork handler
                self._set_aside()
            while not self._idle and len(self._mine) >= self.max_connections:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise JournalError(
                        f"PostgresJournal.{what}() failed: its {self.max_connections} connections were busy for {self._timeout} s"
                    )
                self._lock.wait(left)
            c = self._idle.pop() if self._idle else None
            if c is None:
                c = _Conn(None, None, False)  # its place in the pool, while it is made
                self._mine.add(c)
        if c.conn is not None and _closed_by_server(c.dbapi):
            # The server said goodbye while the connection sat in the pool (a restart, an
            # administrator's terminate, its idle timeout): made anew now, rather than
            # failing this call. The other free ones are checked as they are taken.
            _close(c.conn)
            c.conn = c.dbapi = None
        elif c.conn is not None and time.monotonic() - c.used_at > self.ping_after:
            # Idle that long, it may have been closed meanwhile (the server's idle timeout, a
            # restart, a firewall) without this process knowing: tried first, and made anew
            # if it fails, so that the first call after a quiet night does not fail for a
            # connection it never needed.
            try:
                c.execute("SELECT 1", ())
            except Exception:
                _close(c.conn)
                c.conn = c.dbapi = None
        if c.conn is None:
            try:
                made = self._connect()
            except BaseException as e:
                self._discard(c)
                # What the user's setting is (no psycopg, a callable that gives no connection)
                # is said as that; what the server or the network did, as the journal's error.
                if isinstance(e, Exception) and not isinstance(e, (JournalError, ConfigurationError)):
                    raise JournalError(f"PostgresJournal.{what}() failed: {_explain(e, self.table)}") from e
                raise
            c.conn, c.dbapi, c.commit_each = made.conn, made.dbapi, made.commit_each
        return c

    def _checkin(self, c: _Conn) -> None:
        with self._lock:
            if c in self._mine:  # not set aside by a fork meanwhile
                self._idle.append(c)
                self._lock.notify()

    def _discard(self, c: _Conn) -> None:
        if c.conn is not None:
            _close(c.conn)
        with self._lock:
            if c in self._mine:
                self._mine.discard(c)
                self._lock.notify()

    def _run(self, what: str, *statements: tuple[str, tuple[Any, ...]]) -> tuple[int, list[Any]]:
        """Runs ``statements`` in a row on one connection of this process, with no other
        call's in between: the rowcount and rows of the last. Any failure is a JournalError,
        and the connection is dropped: the next call makes a new one."""
        out: tuple[int, list[Any]] = (0, [])
        with self._using(what) as c:
            for sql, args in statements:
                out = c.execute(sql, args)
        return out

    @contextlib.contextmanager
    def _using(self, what: str) -> Iterator[_Conn]:
        """One connection of this process for a call, given back after it. Any failure is a
        JournalError (a driver's error named with what fixes it), and the connection is
        dropped (with it any transaction left open): the next call makes a new one."""
        c = self._checkout(what)
        try:
            yield c
        except Exception as e:
            self._discard(c)
            if isinstance(e, JournalError):
                raise
            raise JournalError(f"PostgresJournal.{what}() failed: {_explain(e, self.table)}") from e
        except BaseException:
            self._discard(c)
            raise
        c.used_at = time.monotonic()
        self._checkin(c)

    # -- the journal this process opened --------------------------------------------------

    def _resolve(self, what: str) -> tuple[str, str] | None:
        """The (schema, name) PostgreSQL resolves this journal's table to (the search path
        for an unqualified name), or None when there is no such table."""
        _, rows = self._run(
            what,
            (
                "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
                (_quoted(*self._parts),),
            ),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def _open(self, what: str) -> _Statements:
        """The journal this process opened: read on first use. A missing table, a table with
        no identity row, or one whose identity names another table (a copy) is a
        :class:`JournalError`: opening never creates a journal."""
        sql = self._sql
        if sql is not None:
            return sql
        with self._open_lock:
            if self._sql is not None:
                return self._sql
            found = self._resolve(what)
            if found is None:
                raise JournalError(
                    f"PostgresJournal found no journal table {self.table!r}: opening a journal never creates one. " + _advice()
                )
            st = _Statements(found)
            _, rows = self._run(what, (st.identity, (IDENTITY_KEY,)))
            if not rows:
                raise JournalError(
                    f"PostgresJournal found the table {st.name!r} without a journal's identity row (emptied by TRUNCATE "
                    "or DELETE, or made by an older fxpay or by hand without it), so it is not taken for a "
                    "journal. " + _advice()
                )
            ident = str(rows[0][0])
            made_in = _identity_table(ident)
            if made_in != st.name:
                raise JournalError(
                    f"PostgresJournal: the table {st.name!r} holds the identity of a journal made in {made_in!r}: a "
                    "copy, or a table that shadows the journal on the search path, is not the journal. Give "
                    f"PostgresJournal(table={made_in!r}). Nothing was sent."
                )
            st.ident = ident
            self._sql = st
            return st

    def _refusal(self, st: _Statements, stored: str | None) -> JournalError:
        if stored is None:
            return JournalError(
                f"PostgresJournal's identity row is gone from {st.name!r} (TRUNCATE, DELETE, or the table dropped "
                "and made again): the journal this process opened was lost, and it is not taken for a new one. " + _advice()
            )
        return JournalError(
            f"PostgresJournal: {st.name!r} now holds another journal than the one this process opened: the journal "
            "was lost and made again while this process ran, and its keys are not this journal's. Restart the "
            "processes that use it once a person has checked what was lost. Nothing was sent."
        )

    def create(self) -> bool:
        """Makes the journal: its table, indexes and identity row, where they are missing
        (the statements of :func:`table_ddl`), in one transaction under an advisory lock, so
        that processes that run it together do not trip over each other. An unqualified
        table name that the search path already resolves to a table is that table (a schema
        named after the role, made later, never gets a new, empty journal). Run it once (by
        hand, in a deployment's migration step, ``python -m fxpay journal create URL``),
        never at every start-up: on a database that lost its journal it makes a new, empty
        one, and every key the old one held could be sent again. True when it made the
        identity, False when the journal was there."""
        if self._store is not None:
            return self._store.create()
        lock = ("SELECT pg_advisory_xact_lock(hashtext(%s))", ("fxpay_journal:" + self.table,))
        resolve = (
            "SELECT coalesce((SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.oid = to_regclass(%s)), current_schema())",
            (_quoted(*self._parts),),
        )
        with self._using("create") as c:  # a failure drops the connection, and with it the transaction
            c.execute("BEGIN", ())
            c.execute(*lock)
            if len(self._parts) == 2:
                schema = self._parts[0]
            else:
                schema = c.execute(*resolve)[1][0][0]
                if schema is None:
                    raise JournalError(
                        "PostgresJournal.create(): no schema to make the table in (the search path names none that "
                        "exists): give the table schema-qualified, PostgresJournal(table='schema.name')"
                    )
            st = _Statements((schema, self._parts[-1]))
            exists = bool(c.execute("SELECT 1 FROM pg_class WHERE oid = to_regclass(%s)", (_quoted(schema, self._parts[-1]),))[1])
            had = exists and bool(c.execute(st.identity, (IDENTITY_KEY,))[1])
            for statement in _ddl((schema, self._parts[-1])):
                c.execute(statement, ())
            rows = c.execute(st.identity, (IDENTITY_KEY,))[1]
            c.execute("COMMIT", ())
        st.ident = str(rows[0][0])
        with self._open_lock:
            if self._sql is not None and self._sql.ident != st.ident:
                raise self._refusal(self._sql, st.ident)
            self._sql = st
        return not had

    def create_table(self) -> bool:
        """The same as :meth:`create` (its name before journals had an identity)."""
        return self.create()

    # -- the storage methods -------------------------------------------------------------

    def get(self, key: str) -> JournalEntry | None:
        key = _check_key(key)
        if self._store is not None:
            return self._store.get(key)
        st = self._open("get")
        mine = self._later.get(key)  # before the read (see _Later.news)
        _, rows = self._run("get", (st.get, (key,)))
        return self._later.news(JournalEntry.from_json(rows[0][0]) if rows else None, mine)

    def entries(self, keys: Iterable[str]) -> dict[str, JournalEntry]:
        wanted = [_check_key(k) for k in keys]
        if self._store is not None:
            return {e.key: e for e in self._store.entries(wanted)}
        st = self._still_here("entries")
        out = {}
        for start in range(0, len(wanted), 1000):  # one query per 1,000 keys
            mine = self._later.waiting_now()  # before the read (see _Later.news)
            _, rows = self._run("entries", (st.get_many, (wanted[start : start + 1000],)))
            for (data,) in rows:
                e = JournalEntry.from_json(data)
                out[e.key] = self._later.news(e, mine.get(e.key)) or e
        return out

    def _still_here(self, what: str) -> _Statements:
        """For the readings people act on (``unknown()``, a payout's progress): the journal is
        still the one opened, so an emptied table never reads as a journal with nothing open."""
        st = self._open(what)
        _, rows = self._run(what, (st.identity, (IDENTITY_KEY,)))
        stored = str(rows[0][0]) if rows else None
        if stored != st.ident:
            raise self._refusal(st, stored)
        return st

    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        entry = _check_entry(entry)
        if self._store is not None:
            return self._store.claim(entry)
        # The claim reaches the table even when this process holds the key's result: the
        # identity is checked with every claim (a TRUNCATE under a live process is caught).
        st = self._open("claim")
        claim_args = (entry.key, entry.state, entry.result, entry.to_json(), IDENTITY_KEY, st.ident)
        for attempt in range(16):
            # Inserted only where this journal's identity row still is (one statement: a
            # TRUNCATE, or a DROP and a new journal, under a live process is caught here).
            # First with the claims of this process's other threads waiting at once and the
            # results waiting: one statement, one commit, one WAL flush (fxpay._group_commit).
            if attempt == 0:
                if self._group.run(_Claim(entry.key, (st, claim_args[:4])), self._commit_claims).claimed:
                    return None
            else:
                n, _rows = self._run("claim", (st.claim, claim_args))
                if n == 1:
                    return None
            # Whatever is stored is another call's, even if equal to `entry`.
            _, rows = self._run("claim", (st.get_two, ([entry.key, IDENTITY_KEY],)))
            found = {str(k): str(v) for k, v in rows}
            stored = found.get(IDENTITY_KEY)
            if stored != st.ident:
                raise self._refusal(st, stored)
            if entry.key in found:
                # A result of this process still on its way to the table is the key's news.
                return self._later.news(JournalEntry.from_json(found[entry.key]))
        raise JournalError(f"the entry of key {entry.key!r} kept vanishing while it was claimed")

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        if self._store is not None:
            return self._store.swap(*self._swap_pair(old, new))
        ready = self._swap_begun(old, new)  # a call's result waits for the next commit
        if ready is None:
            return True
        old, new, old_text, text = ready
        st = self._open("swap")
        n, _ = self._run("swap", (st.swap, (new.state, new.result, text, old.key, old_text)))
        return n == 1

    def _commit_claims(self, batch: list[_Claim]) -> None:
        """The group commit of ``batch``'s claims (one per key), with the results waiting
        riding it: one statement, one commit, one WAL flush. The claims are inserted in key
        order (two processes' commits never wait for each other in a circle). A result whose
        row is locked (or changed) is not waited for: it waits again, for the flusher. Each
        claim learns whether it was inserted (else its caller reads why not)."""
        st: _Statements = batch[0].args[0]
        ident = (IDENTITY_KEY, st.ident)
        results = self._later.taken()
        if not results and len(batch) == 1:
            n, _ = self._run("claim", (st.claim, (*batch[0].args[1], *ident)))
            batch[0].claimed = n == 1
            return
        values, args = _results_values(results)
        claims = ", ".join(["(%s, %s, %s, %s)"] * len(batch))
        claim_args = tuple(a for c in batch for a in c.args[1])
        sql = st.claims_riding if results else st.claims
        try:
            _, rows = self._run("claim", (sql.replace("{values}", values).replace("{claims}", claims), (*args, *claim_args, *ident)))
        except BaseException:
            if results:
                self._later.missed(results)
                _Later.wake(self)
            raise
        inserted, written = rows[0]
        mine = set(inserted or ())
        for c in batch:
            c.claimed = c.key in mine
        if not results:
            return
        landed = set(written or ())
        self._later.landed([r for r in results if r[0] in landed])
        left = [r for r in results if r[0] not in landed]
        if left:
            self._later.missed(left)
            _Later.wake(self)

    def _flush_results(self) -> None:
        """Writes every result waiting in one statement (one commit, one WAL flush): the
        flusher's, every :data:`fxpay._later.RESULT_DELAY`, and exit's. A result whose entry
        changed meanwhile is written over it if it is still this call's claim, else logged
        with its id for :meth:`resolve`."""
        results = self._later.taken()
        if not results:
            return
        try:
            st = self._open("swap")
            values, args = _results_values(results)
            _, rows = self._run("swap", (st.swap_many.replace("{values}", values), tuple(args)))
        except Exception:
            self._later.missed(results)
            logger.debug("PostgresJournal: writing the results waiting failed; they are tried again", exc_info=True)
            _Later.retry(self)
            return
        self._later.landed(results)
        written = {str(k) for (k,) in rows}
        for key, _old, new, text in results:
            if key not in written:
                self._write_over(st, key, new, text)

    def _write_over(self, st: _Statements, key: str, new: JournalEntry, text: str) -> None:
        _, rows = self._run("swap", (st.get, (key,)))
        stored = JournalEntry.from_json(rows[0][0]) if rows else None
        if (stored is not None and rows[0][0] == text) or _Later.written_otherwise(stored, new):
            return
        if _Later.still_its_claim(stored, new):
            n, _ = self._run("swap", (st.swap, (new.state, new.result, text, key, rows[0][0])))
            if n == 1:
                return
        self._not_recorded(self.table, key, new.result)

    def _find_stored(self, result: str) -> JournalEntry | None:
        st = self._open("find")
        _, rows = self._run("find", (st.find, (result,)))
        return JournalEntry.from_json(rows[0][0]) if rows else None

    def candidates(self) -> list[JournalEntry]:
        if self._store is not None:
            return self._store.candidates()
        st = self._still_here("candidates")
        _, rows = self._run("candidates", (st.candidates, ()))
        entries = [JournalEntry.from_json(r[0]) for r in rows]
        return [e for e in entries if self._later.news(e) is e]  # a result on its way: done

    # -- administration ------------------------------------------------------------------

    def close(self) -> None:
        """Writes the results waiting, then closes this process's free connections (the
        journal makes new ones on next use)."""
        if self._store is not None:
            self._store.close()
            return
        self._flush_results()
        with self._lock:
            if self._pid != os.getpid():
                return
            idle, self._idle = self._idle, []
            for c in idle:
                self._mine.discard(c)
            self._lock.notify_all()
        for c in idle:
            _close(c.conn)

    def __repr__(self) -> str:
        return f"PostgresJournal(table={self.table!r})"


def _postgres_not_recorded(table: str, key: str, result: str | None) -> None:
    """A result of the PostgreSQL journal in ``table`` found its key changed otherwise."""
    JournalBase._not_recorded(PostgresJournal.__new__(PostgresJournal), table, key, result)


def _results_values(results: list[tuple[str, str, JournalEntry, str]]) -> tuple[str, tuple[Any, ...]]:
    """The ``VALUES`` rows (key, old, state, result, data) of results waiting, and their
    arguments."""
    args: list[Any] = []
    for key, old_text, new, text in results:
        args += [key, old_text, new.state, new.result, text]
    return ", ".join(["(%s, %s, %s, %s, %s)"] * len(results)), tuple(args)


class _Statements:
    """The statements on one resolved table (schema, name), and the identity row's text."""

    def __init__(self, resolved: tuple[str, str]) -> None:
        t = _quoted(*resolved)
        self.name = f"{resolved[0]}.{resolved[1]}"
        self.ident: str | None = None
        self.identity = f"SELECT data FROM {t} WHERE key = %s"
        self.get = f"SELECT data FROM {t} WHERE key = %s"
        self.get_two = f"SELECT key, data FROM {t} WHERE key = ANY(%s)"
        self.get_many = f"SELECT data FROM {t} WHERE key = ANY(%s)"
        self.claim = (
            f"INSERT INTO {t} (key, state, result, data) SELECT %s, %s, %s, %s"
            f" WHERE EXISTS (SELECT 1 FROM {t} WHERE key = %s AND data = %s) ON CONFLICT (key) DO NOTHING"
        )
        self.swap = f"UPDATE {t} SET state = %s, result = %s, data = %s, updated_at = now() WHERE key = %s AND data = %s"
        # Many claims in one statement (`{claims}`: a row of four placeholders per claim, one
        # per key), inserted in key order where the identity row still is; with the results
        # waiting (`{values}`) as above. Its row: the keys inserted, and the results' keys
        # written.
        many = (
            f" ins AS (INSERT INTO {t} (key, state, result, data) SELECT c.key, c.state, c.result, c.data"
            " FROM (VALUES {claims}) AS c(key, state, result, data)"
            f" WHERE EXISTS (SELECT 1 FROM {t} WHERE key = %s AND data = %s) ORDER BY c.key"
            " ON CONFLICT (key) DO NOTHING RETURNING key)"
        )
        self.claims = f"WITH{many} SELECT ARRAY(SELECT key FROM ins), NULL::text[]"
        self.claims_riding = (
            "WITH v(key, old, state, result, data) AS (VALUES {values}),"
            f" free AS (SELECT j.key FROM {t} AS j JOIN v ON j.key = v.key AND j.data = v.old FOR UPDATE OF j SKIP LOCKED),"
            f" done AS (UPDATE {t} AS j SET state = v.state, result = v.result, data = v.data, updated_at = now()"
            f" FROM v WHERE j.key = v.key AND j.key IN (SELECT key FROM free) RETURNING j.key),{many}"
            " SELECT ARRAY(SELECT key FROM ins), ARRAY(SELECT key FROM done)"
        )
        # Many swaps in one statement (`{values}`: a row of five placeholders per swap):
        # the keys it wrote.
        self.swap_many = (
            f"UPDATE {t} AS j SET state = v.state, result = v.result, data = v.data, updated_at = now()"
            " FROM (VALUES {values}) AS v(key, old, state, result, data)"
            " WHERE j.key = v.key AND j.data = v.old RETURNING j.key"
        )
        self.find = f"SELECT data FROM {t} WHERE result = %s ORDER BY seq LIMIT 1"
        self.candidates = f"SELECT data FROM {t} WHERE state IN ('pending', 'unknown') ORDER BY seq"


def _identity_table(ident: str) -> str | None:
    """The table an identity row says its journal was made in."""
    import json

    try:
        made_in = json.loads(ident).get("table")
    except (ValueError, AttributeError):
        return None
    return made_in if isinstance(made_in, str) else None


def _advice() -> str:
    return (
        "A journal is made once, by hand or in a deployment's migration step: PostgresJournal(conninfo).create(), "
        "the Django migration (manage.py migrate fxpay_journal), or `python -m fxpay journal create URL`; never at "
        "every start-up. If a journal was here and was lost (TRUNCATE, DROP, a restore without it), restore it "
        "from a backup first: creating a new one where a journal was lost sends every key it held again. "
        "Nothing was sent."
    )


class _Conn:
    """One connection of the pool: what was connected or returned by the factory (closed
    through it), the DB-API connection itself (a SQLAlchemy proxy unwrapped), whether its
    driver lacks ``autocommit`` (then each statement is committed), and when it last
    answered (``time.monotonic()``)."""

    __slots__ = ("commit_each", "conn", "dbapi", "used_at")

    def __init__(self, conn: Any, dbapi: Any, commit_each: bool) -> None:
        self.conn, self.dbapi, self.commit_each = conn, dbapi, commit_each
        self.used_at = time.monotonic()

    def execute(self, sql: str, args: tuple[Any, ...]) -> tuple[int, list[Any]]:
        """Runs one statement: its rowcount and rows."""
        cur = self.dbapi.cursor()
        try:
            cur.execute(sql, args)
            rows = cur.fetchall() if cur.description is not None else []
            count = cur.rowcount
        finally:
            cur.close()
        if self.commit_each:
            self.dbapi.commit()
        return count, rows


def _explain(e: Exception, table: str) -> str:
    code = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
    text = f"{type(e).__name__}: {e}".strip()
    if code == _UNDEFINED_TABLE:
        return f"{text} (make the table {table!r} with journal.create_table(), or the Django migration)"
    if code == _READ_ONLY:
        return f"{text} (the server is read-only: the journal needs the primary)"
    return text


def _closed_by_server(dbapi: Any) -> bool:
    """Whether an idle connection has something to read: a connection in autocommit with no
    statement running and nothing listened to is sent nothing by a live server, so anything
    readable is its goodbye (the error it sends as it shuts down or terminates the session,
    then the end of the stream). One ``poll`` with no wait; False where it cannot be asked."""
    try:
        fd = dbapi.fileno()
        poller = select.poll()
    except Exception:  # no fileno (a stand-in driver), no poll (Windows)
        return False
    if not isinstance(fd, int) or fd < 0:
        return False
    poller.register(fd, select.POLLIN | select.POLLPRI)
    try:
        return bool(poller.poll(0))
    except OSError:
        return True


def _close(conn: Any) -> None:
    """Closes a connection of this process, whatever state it is in; a SQLAlchemy proxy is
    invalidated (its pool must not hand out a connection that failed)."""
    try:
        invalidate = getattr(conn, "invalidate", None)
        if invalidate is not None:
            invalidate()
        else:
            conn.close()
    except Exception:
        pass  # closing a broken connection may fail; it is gone anyway


def _detach(dbapi: Any) -> None:
    """In a forked child: points the inherited connection's socket at /dev/null, so that
    nothing the child does with it (its finaliser's goodbye to the server included) reaches
    the parent's session. The parent's socket is untouched: only the child's descriptor is
    replaced."""
    try:
        fd = dbapi.fileno()
    except Exception:
        return
    if not isinstance(fd, int) or fd < 0:
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
    except OSError:
        pass

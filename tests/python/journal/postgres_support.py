"""A real PostgreSQL server for the journal tests: ``initdb`` into a temporary folder, served on
127.0.0.1 at a free port, run by an unprivileged user (root cannot run postgres)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fxpay

from conftest import need, need_program

# Who runs the server when the tests run as root (postgres refuses to run as root).
SERVER_USER = "nobody"


def _bin(program: str) -> str:
    """``program`` from PATH, else from Debian's /usr/lib/postgresql/<version>/bin (newest)."""
    found = shutil.which(program)
    if found is not None:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"), key=lambda p: int(Path(p).parts[-3]))
    if versions:
        return versions[-1]
    return str(need_program(program))  # a skip here, a failure in CI


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PostgresServer:
    """A PostgreSQL cluster of its own, that a test can stop (even ``-m immediate``, a crash)
    and start again on the same port and data."""

    def __init__(self, *, standby_of: PostgresServer | None = None) -> None:
        """A new cluster (``initdb``), or with ``standby_of`` a hot standby of that server
        (``pg_basebackup -R``): read-only, replaying the primary's WAL."""
        need("psycopg")
        self.pg_ctl = _bin("pg_ctl")
        # Not under pytest's tmp_path: that is private to root, and the server's user must
        # own its data folder.
        self.folder = Path(tempfile.mkdtemp(prefix="fxpay-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self.conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.running = False
        self._as: list[str] = []
        if os.getuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", SERVER_USER, "--"]
        if standby_of is None:
            initdb = ["-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"]
            self._run(_bin("initdb"), *initdb)
        else:
            primary = ["-h", "127.0.0.1", "-p", str(standby_of.port), "-U", "postgres"]
            self._run(_bin("pg_basebackup"), "-D", str(self.data), *primary, "-R", "-X", "stream", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            # Loopback only, no Unix socket; a claim is durable (fsync, synchronous_commit) as
            # a user's server's must be. (A standby's copy of these lines is overridden here.)
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = ''\n")
            conf.write("fsync = on\nsynchronous_commit = on\nmax_connections = 200\n")

    def _run(self, *args: str) -> None:
        out = subprocess.run([*self._as, *args], cwd=self.folder, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
        if out.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            pytest.fail(f"{' '.join(args[:2])} failed: {out.stdout}{out.stderr}\n{log[-3000:]}")

    def start(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        self.running = True
        psycopg = need("psycopg")
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.conninfo, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    pytest.fail("postgres did not accept connections: " + self.log.read_text()[-3000:])
                time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """``mode``: ``fast`` (a clean shutdown) or ``immediate`` (a crash: no checkpoint, the
        next start replays the WAL)."""
        if self.running:
            self._run(self.pg_ctl, "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
            self.running = False

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    yield server
    server.remove()


def table_name() -> str:
    """A table of the test's own, so tests sharing the server never meet."""
    return f"j{time.monotonic_ns()}"


def make_postgres_journal(server: PostgresServer, **kwargs: object) -> fxpay.PostgresJournal:
    """A PostgresJournal in a new table of ``server``'s."""
    journal = fxpay.PostgresJournal(server.conninfo, table=table_name(), **kwargs)  # type: ignore[arg-type]
    journal.create_table()
    return journal


def wal_syncs(server: PostgresServer) -> int:
    psycopg = need("psycopg")
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        time.sleep(0.2)  # the ended sessions' statistics reach the server's
        row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
        assert row is not None
        return int(row[0])


def backend_pid(journal: fxpay.PostgresJournal) -> int:
    """The server process of one of ``journal``'s connections in this process."""
    if journal._store is not None:  # the core's store
        return int(journal._store.diagnostic("backend"))
    return int(journal._run("probe", ("SELECT pg_backend_pid()", ()))[1][0][0])


def setting(journal: fxpay.PostgresJournal, name: str) -> str:
    """``SHOW name`` on one of ``journal``'s connections."""
    if journal._store is not None:
        return journal._store.diagnostic(name)
    return str(journal._run("probe", (f"SHOW {name}", ()))[1][0][0])


def sql(server: PostgresServer, statement: str, *args: Any) -> list[Any]:
    """Runs one statement on ``server`` in autocommit: its rows, if it gives any."""
    psycopg = need("psycopg")
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []

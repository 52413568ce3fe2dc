"""Idempotency journals: where fxpay keeps its own idempotency keys (the service has none).

A creating call with ``idempotency_key=`` claims its key in the client's journal, durably,
before any byte of the request is sent; records the created id when the answer comes; and
any later call with the key replays, refuses or reports an unknown outcome instead of sending
again. The states, the guarantees and their limits: docs/idempotency.md.

- :class:`SqliteJournal`: one machine (every process on it); the embedded default.
- :class:`RedisJournal`: many machines sharing one Redis.
- :class:`MemoryJournal`: one process (tests).

All three implement the :class:`Journal` protocol; a journal of your own (say in
PostgreSQL) implements its four storage methods and inherits the rest from
:class:`JournalBase`. The state machine itself (what a repeat means, leases, what a failure
leaves behind) is fxpay's, in its Rust core: a journal only stores entries.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ._fxpay import JournalEntry, _journal_complete_spot, _journal_resolve, _journal_unknown
from .errors import ConfigurationError, JournalError

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "Journal",
    "JournalBase",
    "JournalEntry",
    "MemoryJournal",
    "RedisJournal",
    "SqliteJournal",
]

_T = TypeVar("_T")


@runtime_checkable
class Journal(Protocol):
    """What a journal is. The client calls ``get``, ``claim``, ``swap`` and ``find``; people
    call ``get``, ``unknown`` and ``resolve``.

    Storage methods (each atomic; an exception is an outage, and a call that meets one fails
    closed with :class:`fxpay.JournalError`, nothing sent):

    - ``get(key)``: the entry under ``key``, or None.
    - ``claim(entry)``: store ``entry`` if nothing is stored under ``entry.key``; return
      None when stored, else the stored entry. This is what makes a key at most once: it
      must be atomic across every process that shares the journal.
    - ``swap(old, new)``: replace ``old`` by ``new`` only if the stored entry is still
      ``old`` (compare their :meth:`~fxpay.JournalEntry.to_json` texts); True when replaced.
    - ``find(result)``: the entry whose ``result`` is ``result`` (a spot deal's process id).

    A journal whose processes all run on one machine may set ``single_host = True``: a
    pending key whose holder process has exited is then known to be gone at once, rather
    than when its 30 s lease lapses.
    """

    def get(self, key: str) -> JournalEntry | None: ...

    def claim(self, entry: JournalEntry) -> JournalEntry | None: ...

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool: ...

    def find(self, result: str) -> JournalEntry | None: ...

    def unknown(self) -> list[JournalEntry]: ...

    def resolve(self, key: str, *, result: str | None) -> JournalEntry: ...


def _fails_closed(what: str) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """A storage method whose storage errors become :class:`JournalError`."""

    def wrap(f: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(f)
        def method(self: Any, *args: Any, **kwargs: Any) -> _T:
            try:
                return f(self, *args, **kwargs)
            except JournalError:
                raise
            except (TypeError, ValueError):
                raise
            except Exception as e:
                raise JournalError(f"{type(self).__name__}.{what}() failed: {type(e).__name__}: {e}") from e

        return method

    return wrap


class JournalBase:
    """The hand operations every journal shares, built on its storage methods."""

    single_host: bool = False

    def get(self, key: str) -> JournalEntry | None:
        raise NotImplementedError

    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        raise NotImplementedError

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        raise NotImplementedError

    def find(self, result: str) -> JournalEntry | None:
        raise NotImplementedError

    def candidates(self) -> list[JournalEntry]:
        """Every entry that is ``pending`` or ``unknown`` (for :meth:`unknown`)."""
        raise NotImplementedError

    def unknown(self) -> list[JournalEntry]:
        """Every key whose outcome is unknown, oldest first. A pending key whose holder is
        gone (its lease lapsed, or, on one host, its process exited) is marked unknown here.
        Settle each with :meth:`resolve`."""
        return _journal_unknown(self, self.candidates())

    def resolve(self, key: str, *, result: str | None) -> JournalEntry:
        """Settles an unknown key: ``result`` is the id that the request created (later
        calls with the key return it without sending), or None when it created nothing (the
        key is released, and may be used again). Returns the entry as settled."""
        return _journal_resolve(self, key, result)

    def complete_spot(self, process_id: str, deal_id: str) -> JournalEntry | None:
        """Records a spot deal's ``dealId`` (from its ``DealCreated``) on its entry; the
        receivers of ``fxpay.contrib`` do this when given a journal. None when the journal
        holds no spot deal with that process id."""
        return _journal_complete_spot(self, process_id, deal_id)


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    return key


def _check_entry(entry: object, name: str = "entry") -> JournalEntry:
    if not isinstance(entry, JournalEntry):
        raise TypeError(f"{name} must be a fxpay.JournalEntry, not {type(entry).__name__}")
    return entry


class MemoryJournal(JournalBase):
    """A journal in this process's memory, for tests: it ends with the process."""

    single_host = True

    def __init__(self) -> None:
        self._entries: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> JournalEntry | None:
        with self._lock:
            text = self._entries.get(_check_key(key))
        return None if text is None else JournalEntry.from_json(text)

    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        e = _check_entry(entry)
        with self._lock:
            text = self._entries.get(e.key)
            if text is None:
                self._entries[e.key] = e.to_json()
                return None
        # Whatever is stored is another call's, even if equal to `entry`: two calls of one
        # process that claim a key in the same millisecond make equal entries.
        return JournalEntry.from_json(text)

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        o, n = _check_entry(old, "old"), _check_entry(new, "new")
        if o.key != n.key:
            raise ValueError("old and new must have the same key")
        with self._lock:
            if self._entries.get(o.key) != o.to_json():
                return False
            self._entries[o.key] = n.to_json()
            return True

    def find(self, result: str) -> JournalEntry | None:
        with self._lock:
            texts = list(self._entries.values())
        for text in texts:
            e = JournalEntry.from_json(text)
            if e.result == result:
                return e
        return None

    def candidates(self) -> list[JournalEntry]:
        with self._lock:
            texts = list(self._entries.values())
        entries = [JournalEntry.from_json(t) for t in texts]
        return [e for e in entries if e.state in ("pending", "unknown")]

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"MemoryJournal(keys={len(self._entries)})"


class _Write:
    """One write statement waiting for a group commit, and what came of it."""

    __slots__ = ("args", "done", "error", "rowcount", "sql")

    def __init__(self, sql: str, args: tuple[Any, ...]) -> None:
        self.sql, self.args = sql, args
        self.done = False
        self.rowcount = 0
        self.error: Exception | None = None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS fxpay_journal (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    result TEXT,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS fxpay_journal_result ON fxpay_journal (result);
CREATE INDEX IF NOT EXISTS fxpay_journal_state ON fxpay_journal (state);
"""


class SqliteJournal(JournalBase):
    """A journal in an SQLite file: every process of one machine shares it.

    The file is created with mode 0600 (it holds spot deals' callback nonces). It runs in WAL
    mode with ``synchronous=FULL``: a claim is on disk (fsync) before the request is sent,
    so neither a killed process nor a power cut can lose it. ``timeout`` is how long a call
    waits for another process's write lock before failing closed with
    :class:`fxpay.JournalError`.

    Python's own ``sqlite3`` is used (not a Rust driver): a connection is opened per process
    (anew after a fork, never shared across one), and a journal of your own in Python uses the
    same protocol.
    """

    single_host = True

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or an os.PathLike, not {type(path).__name__}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
        if os.fspath(path) in ("", b""):
            raise ConfigurationError("SqliteJournal needs the path of its file, got an empty path")
        if os.fspath(path) == ":memory:":
            # SQLite's in-memory database is one connection's own, and this journal opens one
            # connection per process (anew after a fork): each worker would start with an
            # empty journal of its own, and a key claimed in one would be sent again in another.
            raise ConfigurationError(
                "SqliteJournal(':memory:') would keep a journal per process, which other processes "
                "(and a forked child) cannot see: give it a file path, or use MemoryJournal() in one process"
            )
        # Absolute, once: the file is opened again in each forked child, and a child that
        # changed its working directory (a daemon's chdir("/"), Celery's --workdir) would
        # otherwise open another, empty journal there and send a claimed key again.
        self.path = os.path.abspath(os.fspath(path))
        self._timeout = float(timeout)
        self._lock = threading.Lock()
        # Group commit: writes of concurrent calls wait in `_queue`; one of them (the leader)
        # commits them all in one transaction, so they share one fsync.
        self._writes = threading.Condition()
        self._queue: list[_Write] = []
        self._leading = False
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        # Connections inherited through a fork are never used or closed in the child.
        self._inherited: list[sqlite3.Connection] = []
        with self._lock:
            self._connection()

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (the caller holds ``_lock``)."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        import sqlite3

        if self._conn is not None:
            self._inherited.append(self._conn)
            self._conn = None
        try:
            # Create the file private before SQLite opens it (SQLite gives its -wal and -shm
            # files the database file's mode).
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
        except OSError as e:
            if not os.path.exists(self.path):
                raise JournalError(f"SqliteJournal cannot create {self.path!r}: {e}") from e
        # Switching to WAL takes an exclusive lock, and SQLite does not wait for it (no busy
        # handler there): processes that open a new journal together retry, up to `timeout`.
        deadline = time.monotonic() + max(self._timeout, 1.0)
        while True:
            try:
                conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=FULL")
                    conn.executescript(_SCHEMA)
                except BaseException:
                    conn.close()
                    raise
                break
            except sqlite3.OperationalError as e:
                if "locked" in str(e) and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise JournalError(f"SqliteJournal cannot open {self.path!r}: {type(e).__name__}: {e}") from e
            except sqlite3.Error as e:
                raise JournalError(f"SqliteJournal cannot open {self.path!r}: {type(e).__name__}: {e}") from e
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _run(self, sql: str, args: tuple[Any, ...]) -> tuple[int, list[Any]]:
        """Runs one statement: its rowcount and rows. A write lock that another process holds
        is waited for up to ``timeout`` (SQLite's own busy handler does not cover every case
        in WAL mode: a lock met while a snapshot is open is answered at once)."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                with self._lock:
                    cur = self._connection().execute(sql, args)
                    return cur.rowcount, cur.fetchall()
            except Exception as e:
                if "locked" in str(e) and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                raise

    def _write(self, sql: str, args: tuple[Any, ...]) -> int:
        """Runs one write statement in the next commit and returns its rowcount once that
        commit is on disk. Writes queued by other threads meanwhile share the commit (and
        its fsync): a claim is still durable before its request is sent."""
        mine = _Write(sql, args)
        with self._writes:
            self._queue.append(mine)
            while not mine.done:
                if self._leading:
                    self._writes.wait()
                    continue
                self._leading = True
                batch, self._queue = self._queue, []
                break
        if not mine.done:
            try:
                self._commit(batch)
            finally:
                with self._writes:
                    for w in batch:
                        w.done = True
                    self._leading = False
                    self._writes.notify_all()
        if mine.error is not None:
            raise mine.error
        return mine.rowcount

    def _commit(self, batch: list[_Write]) -> None:
        """Runs `batch` in one transaction; each write gets its rowcount, or everyone the
        error that kept the transaction from committing."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                with self._lock:
                    conn = self._connection()
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        for w in batch:
                            w.rowcount = conn.execute(w.sql, w.args).rowcount
                        conn.execute("COMMIT")
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
                return
            except Exception as e:
                if "locked" in str(e) and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                for w in batch:
                    w.error = e
                return

    @_fails_closed("get")
    def get(self, key: str) -> JournalEntry | None:
        _, rows = self._run("SELECT data FROM fxpay_journal WHERE key = ?", (_check_key(key),))
        return JournalEntry.from_json(rows[0][0]) if rows else None

    @_fails_closed("claim")
    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        e = _check_entry(entry)
        for _ in range(16):
            n = self._write(
                "INSERT INTO fxpay_journal (key, state, result, data) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                (e.key, e.state, e.result, e.to_json()),
            )
            if n == 1:
                return None
            _, rows = self._run("SELECT data FROM fxpay_journal WHERE key = ?", (e.key,))
            if rows:
                return JournalEntry.from_json(rows[0][0])
        raise JournalError(f"the entry of key {e.key!r} kept vanishing while it was claimed")

    @_fails_closed("swap")
    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        o, n = _check_entry(old, "old"), _check_entry(new, "new")
        if o.key != n.key:
            raise ValueError("old and new must have the same key")
        count = self._write(
            "UPDATE fxpay_journal SET state = ?, result = ?, data = ? WHERE key = ? AND data = ?",
            (n.state, n.result, n.to_json(), o.key, o.to_json()),
        )
        return count == 1

    @_fails_closed("find")
    def find(self, result: str) -> JournalEntry | None:
        _, rows = self._run("SELECT data FROM fxpay_journal WHERE result = ? ORDER BY rowid LIMIT 1", (result,))
        return JournalEntry.from_json(rows[0][0]) if rows else None

    @_fails_closed("candidates")
    def candidates(self) -> list[JournalEntry]:
        _, rows = self._run("SELECT data FROM fxpay_journal WHERE state IN ('pending', 'unknown') ORDER BY rowid", ())
        return [JournalEntry.from_json(r[0]) for r in rows]

    def close(self) -> None:
        """Closes this process's connection (the journal reopens it on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"SqliteJournal({self.path!r})"


# KEYS: entry key, open-keys set. ARGV: entry text, key. Claims with SET NX.
_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('SADD', KEYS[2], ARGV[2])
  return false
end
return redis.call('GET', KEYS[1])
"""

# KEYS: entry key, open-keys set, result index key (or ''). ARGV: old text, new text, key,
# new state.
_SWAP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[4] == 'pending' or ARGV[4] == 'unknown' then
  redis.call('SADD', KEYS[2], ARGV[3])
else
  redis.call('SREM', KEYS[2], ARGV[3])
end
if KEYS[3] ~= '' then
  redis.call('SET', KEYS[3], ARGV[3])
end
return 1
"""


class RedisJournal(JournalBase):
    """A journal in Redis, shared by every process and machine that uses it.

    ``url_or_client``: a ``redis.Redis`` or a URL (``redis://127.0.0.1:6379/0``);
    ``socket_timeout`` bounds each command of a client made from a URL, so an unreachable
    Redis fails closed quickly. Claims are ``SET NX`` (in a script that also indexes the
    key); swaps compare and set in one script. Keys are ``prefix + "k:" + key``.

    At most once across a Redis restart needs Redis to keep every write: ``appendonly yes``
    with ``appendfsync always`` (docs/idempotency.md says why ``everysec`` is not enough).
    """

    def __init__(
        self,
        url_or_client: Any,
        *,
        prefix: str = "fxpay:journal:",
        socket_timeout: float = 5.0,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
        if isinstance(url_or_client, str):
            from ._redis import client_from_url

            url_or_client = client_from_url("RedisJournal", url_or_client, socket_timeout)
        elif not (hasattr(url_or_client, "register_script") and hasattr(url_or_client, "get")):
            raise TypeError(f"url_or_client must be a redis URL or a redis.Redis, not {type(url_or_client).__name__}")
        self._r = url_or_client
        self.prefix = prefix
        self._open = prefix + "open"
        # Sent once, then run by their SHA (EVALSHA): no script text on every call.
        self._claim = url_or_client.register_script(_CLAIM)
        self._swap = url_or_client.register_script(_SWAP)

    def _k(self, key: str) -> str:
        return self.prefix + "k:" + key

    def _entry(self, raw: Any) -> JournalEntry | None:
        if raw is None:
            return None
        return JournalEntry.from_json(raw.decode() if isinstance(raw, bytes) else raw)

    @_fails_closed("get")
    def get(self, key: str) -> JournalEntry | None:
        return self._entry(self._r.get(self._k(_check_key(key))))

    @_fails_closed("claim")
    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        e = _check_entry(entry)
        return self._entry(self._claim(keys=[self._k(e.key), self._open], args=[e.to_json(), e.key]))

    @_fails_closed("swap")
    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        o, n = _check_entry(old, "old"), _check_entry(new, "new")
        if o.key != n.key:
            raise ValueError("old and new must have the same key")
        index = self.prefix + "r:" + n.result if n.result and n.result != o.result else ""
        done = self._swap(keys=[self._k(o.key), self._open, index], args=[o.to_json(), n.to_json(), o.key, n.state])
        return bool(done == 1)

    @_fails_closed("find")
    def find(self, result: str) -> JournalEntry | None:
        key = self._r.get(self.prefix + "r:" + result)
        if key is None:
            return None
        return self.get(key.decode() if isinstance(key, bytes) else key)

    @_fails_closed("candidates")
    def candidates(self) -> list[JournalEntry]:
        keys = sorted(k.decode() if isinstance(k, bytes) else k for k in self._r.smembers(self._open))
        out = []
        for key in keys:
            e = self.get(key)
            if e is not None and e.state in ("pending", "unknown"):
                out.append(e)
        return out

    def __repr__(self) -> str:
        return f"RedisJournal(prefix={self.prefix!r})"

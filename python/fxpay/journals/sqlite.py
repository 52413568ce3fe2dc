"""SqliteJournal: a journal in an SQLite file, shared by every process of one machine."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile

from .. import _forks
from .._fxpay import JournalEntry, _NativeStore, _sqlite_create, _sqlite_store
from ..errors import ConfigurationError, JournalError
from ._base import JournalBase, _check_entry, _check_key, _fails_closed, _OwnJournal, _result_waits, _seconds, logger

__all__ = ["SqliteJournal"]


def _what_to_do(path: str) -> str:
    return (
        f"If {path!r} is a journal that was emptied or damaged (a restore gone wrong, a bad copy, a full disk), "
        "restore it from a backup: a journal started afresh would send every key it held again. "
        "If it is not a journal, give SqliteJournal another path."
    )


def _is_file_name(path: str | bytes) -> bool:
    """A path SQLite (and the cassette's file) can be given: UTF-8 text with no NUL (a lone
    surrogate, as ``os.fsdecode`` makes of a non-UTF-8 name, is not)."""
    try:
        raw = path.encode("utf-8") if isinstance(path, str) else path.decode("utf-8").encode("utf-8")
    except UnicodeError:
        return False
    return b"\0" not in raw


def _not_recorded(path: str, key: str, result: str | None) -> None:
    """A result of the journal at ``path`` found its key changed otherwise (logged, even when
    only the client still holds the journal's store)."""
    JournalBase._not_recorded(SqliteJournal.__new__(SqliteJournal), path, key, result)


class SqliteJournal(_OwnJournal):
    """A journal in an SQLite file: every process of one machine shares it.

    The file is created with mode 0600 (it holds spot deals' callback nonces), and an
    existing journal's files are made 0600 when opened. It runs in WAL mode with
    ``synchronous=FULL``: a claim is on disk (fsync) before the request is sent, so neither
    a killed process nor a power cut can lose it. ``timeout`` is how long a call waits for
    another process's write lock before failing closed with :class:`fxpay.JournalError`.

    The journal knows its own file. A new journal is made only where no file exists (made
    complete under a temporary name, then linked into place, so no process ever sees it half
    made). An existing file that is not an fxpay journal, an empty one included, is a
    :class:`fxpay.JournalError` saying what was found: it is never taken for a new journal.
    Before each claim the journal checks that its path still names the file it opened (device
    and inode): a file removed or replaced under a live process is a ``JournalError``, and
    nothing is sent.

    Its storage is fxpay's Rust core with SQLite built in (``fxpay._fxpay._sqlite_store``): a
    keyed call on it never climbs into Python. A connection is opened per process (anew
    after a fork, never shared across one), and every ``SqliteJournal`` of one file in a
    process shares it. Do not open the journal's file with another SQLite library (Python's
    ``sqlite3`` included) in a process that uses the journal: two copies of SQLite in one
    process do not see each other's file locks. A subclass that overrides ``get``,
    ``claim``, ``swap`` or ``find`` is called through those methods, as any journal is.
    """

    single_host = True
    _store: _NativeStore

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or an os.PathLike, not {type(path).__name__}")
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
        if not _is_file_name(os.fspath(path)):
            raise ConfigurationError("SqliteJournal's path must be UTF-8 text without NUL characters (SQLite opens files by such names)")
        self._timeout = _seconds("timeout", timeout)
        # Absolute, once: the file is opened again in each forked child, and a child that
        # changed its working directory (a daemon's chdir("/"), Celery's --workdir) would
        # otherwise open another, empty journal there and send a claimed key again.
        self.path = os.path.abspath(os.fspath(path))
        if not os.path.lexists(self.path):
            self._create()
        dev, ino = self._inspect()
        from .. import _later

        self._store = _sqlite_store(
            self.path,
            dev,
            ino,
            self._timeout,
            _later.RESULT_DELAY,
            _result_waits,
            functools.partial(_not_recorded, self.path),
        )
        _forks.register(self)

    # Its fork hooks (_OwnJournal's): before a fork the store takes what a child inherits
    # (the results waiting, to read), and no thread is inside SQLite at the fork: bounded by
    # `timeout` (a thread stuck longer is left; the child makes its own connection).

    def _create(self) -> None:
        """Makes a new, complete journal at ``path`` if no file is there: built under a
        temporary name in the same folder, then hard-linked into place (which fails if a file
        appeared meanwhile: another process's new journal is then used). The file's schema and
        application id are the core's (``_sqlite_create``), which knows them once."""
        folder = os.path.dirname(self.path)
        try:
            fd, tmp = tempfile.mkstemp(prefix=".fxpay-journal-", suffix=".tmp", dir=folder)  # mode 0600
        except OSError as e:
            raise JournalError(f"SqliteJournal cannot create {self.path!r}: {e}") from e
        os.close(fd)
        try:
            try:
                # The application id, WAL, synchronous=FULL, the table and its indexes; closed by
                # the last connection: WAL checkpointed into the file, -wal removed. Its error
                # names SQLite's as Python's sqlite3 does ("OperationalError: disk I/O error").
                _sqlite_create(tmp)
            except JournalError as e:
                raise JournalError(f"SqliteJournal cannot create {self.path!r}: {e}") from e
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, self.path)
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as e:
            raise JournalError(f"SqliteJournal cannot create {self.path!r}: {type(e).__name__}: {e}") from e
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    def _inspect(self) -> tuple[int, int]:
        """The (device, inode) of the file at ``path``, made private; a :class:`JournalError`
        when it is not a regular file with content. By its name only: a descriptor of the
        journal's file closed in a process whose SQLite has it open would drop SQLite's locks
        (the store checks what the file holds)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise JournalError(
                f"SqliteJournal's file {self.path!r} was removed while the journal was in use; nothing was sent. "
                "A new file there would be an empty journal that sends every key again: restore the journal "
                "(from the file this process still has open, or a backup) before any keyed call."
            ) from None
        except OSError as e:
            raise JournalError(f"SqliteJournal cannot open {self.path!r}: {e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise JournalError(f"SqliteJournal: {self.path!r} is not a regular file, so not a journal")
        if st.st_size == 0:
            raise JournalError(
                f"SqliteJournal found {self.path!r} empty (0 bytes): that is not an fxpay journal, "
                "and it was not made into a new one. " + _what_to_do(self.path)
            )
        for name in (self.path, self.path + "-wal", self.path + "-shm"):
            try:
                if stat.S_IMODE(os.stat(name).st_mode) & 0o077:
                    os.chmod(name, 0o600)
            except FileNotFoundError:
                pass
            except PermissionError:
                if name == self.path:
                    logger.warning("SqliteJournal cannot make %r private (mode 0600): not its owner", self.path)
        return st.st_dev, st.st_ino

    @property
    def _writes_waiting(self) -> int:
        """How many writes wait for the next group commit in this process."""
        return int(self._store.diagnostic("writes_waiting"))

    @_fails_closed("get")
    def get(self, key: str) -> JournalEntry | None:
        return self._store.get(_check_key(key))

    @_fails_closed("claim")
    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        return self._store.claim(_check_entry(entry))

    @_fails_closed("swap")
    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        return self._store.swap(*self._swap_pair(old, new))

    @_fails_closed("candidates")
    def candidates(self) -> list[JournalEntry]:
        return self._store.candidates()

    def close(self) -> None:
        """Writes the results waiting, then closes this process's connection (the journal
        reopens it on next use)."""
        self._store.close()

    def __repr__(self) -> str:
        return f"SqliteJournal({self.path!r})"

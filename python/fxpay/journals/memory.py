"""MemoryJournal: a journal in this process's memory, for tests."""

from __future__ import annotations

from .. import _forks
from .._fxpay import JournalEntry, _MemoryStore
from ._base import _check_entry, _check_key, _OwnJournal

__all__ = ["MemoryJournal"]


class MemoryJournal(_OwnJournal):
    """A journal in this process's memory, for tests: it ends with the process.

    Its entries live in Rust (``fxpay._fxpay._MemoryStore``): a client given a
    ``MemoryJournal`` makes its keyed calls without a climb into Python. A subclass that
    overrides ``get``, ``claim``, ``swap`` or ``find`` is called through those methods, as
    any journal is. A child forked with ``os.fork()`` (or multiprocessing) starts with a copy
    of the entries taken by the forking thread; neither sees the other's later ones."""

    single_host = True

    _store: _MemoryStore

    def __init__(self) -> None:
        # Its fork hooks (_OwnJournal's): the copy a child starts from is taken by the forking
        # thread, so the child never inherits a lock another thread held at the fork
        # (tests/stress found that hang).
        self._store = _MemoryStore()
        _forks.register(self)

    def get(self, key: str) -> JournalEntry | None:
        return self._store.get(_check_key(key))

    def claim(self, entry: JournalEntry) -> JournalEntry | None:
        # Whatever is stored is another call's, even if equal to `entry`: two calls of one
        # process that claim a key in the same millisecond make equal entries.
        return self._store.claim(_check_entry(entry))

    def swap(self, old: JournalEntry, new: JournalEntry) -> bool:
        ready = self._swap_ready(old, new)
        assert ready is not None  # nothing waits in memory
        o, n, _, _ = ready
        return self._store.swap(o, n)

    def candidates(self) -> list[JournalEntry]:
        return [e for e in self._store.entries() if e.state in ("pending", "unknown")]

    def __len__(self) -> int:
        return len(self._store.entries())

    def __repr__(self) -> str:
        return f"MemoryJournal(keys={len(self)})"

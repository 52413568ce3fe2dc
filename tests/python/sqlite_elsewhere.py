"""SQL run on a journal's file by another process, with Python's own ``sqlite3``.

An ``SqliteJournal``'s storage is fxpay's SQLite, built into the extension. A second copy of
SQLite in the same process (Python's ``sqlite3``) does not see the first one's file locks
(POSIX locks belong to the process, and each copy keeps its own table of them): a write lock
taken by one would not stop the other, and closing one's connection drops the other's locks.
So the tests that play "another process" run in one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

_SERVE = r"""
import json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
for line in sys.stdin:
    sql, params = json.loads(line)
    try:
        rows = [list(r) for r in conn.execute(sql, params).fetchall()]
        print(json.dumps({"rows": rows}), flush=True)
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
conn.close()
"""


class Elsewhere:
    """A connection to ``path`` held by another process; :meth:`run` runs one statement in it
    (``BEGIN IMMEDIATE`` takes the file's write lock, held until ``COMMIT``/``ROLLBACK``)."""

    def __init__(self, path: Path | str) -> None:
        self._p = subprocess.Popen([sys.executable, "-c", _SERVE, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        assert self._p.stdin is not None
        assert self._p.stdout is not None
        self._p.stdin.write(json.dumps([sql, list(params)]) + "\n")
        self._p.stdin.flush()
        line = self._p.stdout.readline()
        assert line, "the other process died"
        got = json.loads(line)
        if "error" in got:
            raise RuntimeError(got["error"])
        return [tuple(r) for r in got["rows"]]

    def close(self) -> None:
        if self._p.stdin is not None:
            self._p.stdin.close()
        self._p.wait(60)

    def __enter__(self) -> Elsewhere:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sql_elsewhere(path: Path | str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Runs one statement on ``path`` in another process (committed); its rows."""
    with Elsewhere(path) as other:
        return other.run(sql, *params)

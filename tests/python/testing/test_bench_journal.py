"""bench/journal.py: keyed calls per journal, its smoke test (``--quick``) and its table."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import need_program

BENCH = Path(__file__).resolve().parents[3] / "bench"
COLUMNS = "| journal | shape | instructions per call | x unkeyed | client CPU µs per call | flushes per call | calls per flush |"


def _number(cell: str) -> float:
    return float(cell.strip().rstrip("x").replace(",", ""))


def test_journal_py_quick_measures_every_cell_of_memory_and_sqlite(tmp_path: Path) -> None:
    need_program("valgrind")
    need_program("strace")
    out = tmp_path / "journal"
    cmd = [sys.executable, str(BENCH / "journal.py"), "--quick", "--journals", "memory,sqlite", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    md = out.with_suffix(".md").read_text()
    assert md in p.stdout  # the table is printed too
    lines = md.splitlines()
    at = lines.index(COLUMNS)
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[at + 2 :] if ln.startswith("| ")]
    rows = [r for r in rows if r[0] in ("none (unkeyed)", "MemoryJournal", "SqliteJournal")]
    # The unkeyed baseline is always measured: every journal's ratio is against it.
    assert {(r[0], r[1]) for r in rows} == {
        (j, s) for j in ("none (unkeyed)", "MemoryJournal", "SqliteJournal") for s in ("loop", "8 threads", "async 64")
    }
    for journal, shape, ins, ratio, cpu, flushes, per_flush in rows:
        assert _number(ins) > 0, (journal, shape)
        assert _number(ratio) > 0, (journal, shape)
        assert _number(cpu) > 0, (journal, shape)
        if journal == "SqliteJournal":
            # SQLite's flushes are the client's own fsync calls: a keyed call makes at least one.
            assert _number(flushes) > 0, (journal, shape, flushes)
            assert _number(per_flush) > 0, (journal, shape, per_flush)
        else:
            assert (flushes, per_flush) == ("-", "-"), journal
    # The disk's own flush rate, 1 and 8 writers, measured in the same run.
    disk = re.findall(r"^\| before the cells \| (\d+) \| ([\d,]+) \| ([\d,]+) \|$", md, re.M)
    assert [w for w, _, _ in disk] == ["1", "8"]
    assert all(_number(rate) > 0 for _, rate, _ in disk)
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["errors"] == {}
    assert doc["n"] == [10, 30]
    assert doc["cells"]["sqlite / loop"]["flushed_by"] == "client"

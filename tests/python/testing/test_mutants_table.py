"""tests/MUTANTS.md lists every file of python/fxpay and crates/fxpay-python/src with its last
mutation run (or "not run yet"): a file added, moved or renamed without a row fails here, and
so does a row for a file that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MUTANTS = ROOT / "tests" / "MUTANTS.md"
HEADING = "## Every file"
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$")


def source_files() -> set[str]:
    python = [p for p in (ROOT / "python" / "fxpay").rglob("*") if p.suffix in (".py", ".pyi") and "__pycache__" not in p.parts]
    rust = list((ROOT / "crates" / "fxpay-python" / "src").rglob("*.rs"))
    return {p.relative_to(ROOT).as_posix() for p in python + rust}


def table() -> dict[str, list[str]]:
    """The rows of the "Every file" section: path -> the other cells."""
    text = MUTANTS.read_text()
    assert HEADING in text, f"{MUTANTS} has no {HEADING!r} section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"two rows for {m.group(1)}"
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_every_file_of_the_package_and_the_binding_has_a_row() -> None:
    rows = table()
    files = source_files()
    assert len(files) > 40, "the file walk found too little: wrong root?"
    assert sorted(files - set(rows)) == [], "files without a row in tests/MUTANTS.md's table"
    assert sorted(set(rows) - files) == [], "rows in tests/MUTANTS.md's table for files that are gone"


def test_each_row_is_a_run_or_says_it_is_not_run_yet() -> None:
    # last run | mutants | caught | missed | ...: caught + missed = mutants, or "not run yet".
    bad = []
    for path, cells in table().items():
        last, counts = cells[0], cells[1:4]
        if last == "not run yet":
            if any(c not in ("", "-") for c in counts):
                bad.append(f"{path}: counts for a file not run yet")
            continue
        if not all(c.isdigit() for c in counts):
            bad.append(f"{path}: mutants, caught and missed must be numbers: {counts}")
        elif int(counts[1]) + int(counts[2]) != int(counts[0]):
            bad.append(f"{path}: caught + missed is not mutants: {counts}")
    assert bad == []

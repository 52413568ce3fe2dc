"""The documentation a new user reads: README.md, CONTRIBUTING.md and docs/ name only paths
that exist."""

from __future__ import annotations

import glob
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("**/*.md"))]
PATH = re.compile(r"`((?:crates|python|tests|scripts|bench|docs|examples|fuzz)/[^`\s]*)`")


def test_every_path_the_docs_name_exists() -> None:
    # Issue 23 item 10: the README's Layout section named paths that had moved.
    missing = []
    for page in PAGES:
        text = page.read_text()
        for m in PATH.finditer(text):
            path = re.sub(r"\{[^}]*\}", "*", m.group(1).split("::")[0].rstrip("/"))
            if "/target/" in f"/{path}/":
                continue  # made by the command the page shows (cargo's target/)
            if not glob.glob(str(ROOT / path)):
                missing.append(f"{page.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(1)}")
    assert missing == []


def test_scripts_test_says_it_swaps_the_editable_install() -> None:
    # Issue 23 item 10: scripts/test replaced the editable install with the wheel, silently.
    script = (ROOT / "scripts" / "test").read_text()
    assert "trap restore_note EXIT" in script
    assert "'bash scripts/setup' (or '.venv/bin/maturin develop') restores it" in script
    assert "restore it\nwith `bash scripts/setup`" in (ROOT / "CONTRIBUTING.md").read_text()

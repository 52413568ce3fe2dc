"""The README's "Layout" section is a true map: every path it names exists, and it names every
top-level folder of the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FILE_NAME = re.compile(r"\.(rs|py|pyi|md|toml|yml|yaml|txt|json)$")


def layout_bullets() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    bullets: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            bullets.append(line)
        elif line.startswith("  ") and bullets:
            bullets[-1] += " " + line.strip()
        elif not line.strip() and bullets:
            bullets.append("")  # a paragraph after the list is not part of the last bullet
    return [b for b in bullets if b] + [section]


def named_paths(text: str) -> list[str]:
    tokens = re.findall(r"`([^`\s]+)`", text)
    return [t.rstrip(",") for t in tokens if ("/" in t or FILE_NAME.search(t)) and not t.startswith("http")]


def test_every_path_the_layout_names_exists() -> None:
    missing = []
    for bullet in layout_bullets():
        paths = named_paths(bullet)
        folders = [p for p in paths if p.endswith("/")]
        for p in paths:
            where = [ROOT, *(ROOT / f for f in folders)]
            if not any((w / p).exists() or ("*" in p and any(w.glob(p))) for w in where):
                missing.append(p)
    assert missing == []


def test_the_layout_names_every_top_level_folder() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.split()
    if not tracked:  # not a git checkout (an sdist): the folders on disk
        tracked = [str(p.relative_to(ROOT)) for p in ROOT.iterdir()]
    folders = sorted({t.split("/", 1)[0] for t in tracked if "/" in t})
    named = {p.split("/", 1)[0] for b in layout_bullets() for p in named_paths(b)}
    assert [f for f in folders if f not in named] == []

"""Every python block of README.md and docs/ runs as written (issue 23 item 10): the blocks of
one page in order, in one namespace, against an embedded sandbox the FXPAY_* variables point
at (doc_snippets_support.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PAGES = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))] if "```python" in p.read_text()]


def test_the_pages_with_python_blocks_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/testing.md", "docs/quickstart.md", "docs/webhooks.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_python_block_runs(page: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
    r = subprocess.run(
        [sys.executable, str(HERE / "doc_snippets_support.py"), str(page)],
        cwd=tmp_path,  # blocks that write files (cassettes/...) write them here
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, f"{page.name}: a block failed\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    ran = [ln for ln in r.stdout.splitlines() if ln.startswith("ok ")]
    assert len(ran) == page.read_text().count("```python"), r.stdout

"""Issue 54 items 8, 9 and 13: the README is for users first. At most 250 lines; its python
blocks run as given (plain Python, no top-level ``await``; ``test_doc_snippets.py`` runs
them); it names every extra and says how to install a checkout into your own venv, which CI
does (``just ci`` runs ``install-check``); the benchmark, CI and fuzzing details live in
docs/; docs/index.md lists every guide of the site's nav."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import need

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_at_most_250_lines_and_leaves_the_details_to_docs() -> None:
    assert README.count("\n") <= 250
    for detail in ("bench:results", "tracing cost", "cargo-fuzz", "auditwheel", "cargo-mutants", "pytest-randomly"):
        assert detail not in README, detail
    for page in ("docs/benchmarks.md", "docs/development.md"):
        assert page in README, page
        assert (ROOT / page).exists()
    for title in ("Install", "Quick start", "Async", "Errors", "Guides", "Layout"):
        assert f"\n## {title}\n" in README, title


def test_every_python_block_of_the_readme_is_plain_python() -> None:
    """A reader pastes a block into a file and runs it: no top-level ``await``/``async with``
    (the snippet runner allows them, a script does not)."""
    blocks = BLOCK.findall(README)
    assert len(blocks) >= 3
    for code in blocks:
        compile(code, "README.md", "exec", dont_inherit=True)
    assert "asyncio.run(" in section("Async")


def test_install_names_every_extra_and_a_checkout_into_your_own_venv() -> None:
    tomllib = need("tomli") if sys.version_info < (3, 11) else __import__("tomllib")
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    install = section("Install")
    named = set(re.findall(r"`([a-z]+)`", install))
    assert {"postgres", "notebook"} <= extras
    assert extras - named == set()
    assert 'pip install "./fxpay[' in install
    assert "dist/fxpay-*.whl" in install
    for command in ("bash scripts/demo", "bash scripts/test"):
        assert command in install, command
    index = (ROOT / "docs" / "index.md").read_text()
    assert set(re.findall(r"`([a-z]+)`", index.split("The extras:", 1)[1].split("\n\n", 1)[0])) >= extras


def test_ci_installs_the_wheel_with_an_extra_into_a_fresh_venv_and_runs_a_payouts_snippet() -> None:
    justfile = (ROOT / "justfile").read_text()
    ci = next(line for line in justfile.splitlines() if line.startswith("ci "))
    assert "install-check" in ci.split(":", 1)[1]
    recipe = justfile.split("\ninstall-check:\n", 1)[1].split("\n\n", 1)[0]
    assert "scripts/install_check" in recipe
    script = (ROOT / "scripts" / "install_check").read_text()
    assert '-m venv "$work/venv"' in script
    assert "[notebook]" in script
    assert "docs/payouts.md" in script
    assert "bash scripts/setup --wheel" in (ROOT / ".ci" / "run").read_text()  # the wheel it installs


def test_docs_index_lists_every_guide_of_the_nav() -> None:
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    guides = mkdocs.split("  - Guides:\n", 1)[1].split("\n  - ", 1)[0]
    pages = re.findall(r":\s*([\w-]+\.md)\s*$", guides, re.M)
    assert len(pages) >= 12
    index = (ROOT / "docs" / "index.md").read_text()
    assert [p for p in pages if f"]({p})" not in index] == []

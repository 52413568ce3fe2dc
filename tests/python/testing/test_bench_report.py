"""bench/report.py: what a passing run prints and what it writes into the README."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture(scope="module")
def report() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("fxpay_bench_report", BENCH / "report.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_a_quick_run_prints_missed_targets_as_not_gated(report: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 23 item 10: a passing scripts/test printed FAIL for targets it does not gate.
    doc = report.load(BENCH / "results" / "results.json")
    doc["quick"] = True
    doc["rps"]["fxpay / 8 threads"] = doc["rps"]["fxpay / loop"] * 1.04  # the quick run's 1.04x
    report.write(doc, tmp_path)
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "not gated  fxpay 8 threads >= 1.5x one thread" in out
    assert "| fxpay 8 threads >= 1.5x one thread | 1.04x | >= 1.5x | not gated |" in (tmp_path / "results.md").read_text()
    # A full run still says FAIL for a target it misses.
    doc["quick"] = False
    assert [c.verdict for c in report.checks(doc) if c.name == "fxpay 8 threads >= 1.5x one thread"] == ["FAIL"]


def test_the_readme_block_keeps_the_tracing_cost_table(report: Any) -> None:
    # Issue 23 item 10: the README's bench block had an empty "tracing cost" bullet.
    lines = report.readme_block(report.load(BENCH / "results" / "results.json")).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("- tracing cost"))
    assert lines[at + 1] == ""
    assert lines[at + 2].startswith("  | shape | worker |")
    assert any(ln.startswith("  | blocking | sdk |") for ln in lines[at:])
    readme = (BENCH.parent / "README.md").read_text()
    assert "\n".join(lines) in readme

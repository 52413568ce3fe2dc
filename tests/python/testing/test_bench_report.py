"""bench/report.py: what a passing run prints and what it writes into the README."""

from __future__ import annotations

import importlib.util
import os
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


@pytest.fixture(scope="module")
def measure() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("fxpay_bench_measure", BENCH / "measure.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_a_fast_cell_is_timed_for_half_a_second_at_least(measure: Any) -> None:
    # Issue 23 item 12: --quick capped every cell at 2,000 calls, so fxpay's 8 threads were
    # timed for 45 ms and its loop for 50-200 ms: windows that short caught the loop in a
    # burst (37,000 req/s against its usual 9,500) and "8 threads >= 1.5x" read 1.04x.
    quick = measure.Plan(requests=2_000, warmup=200, cell_seconds=3.0)
    assert quick.count(200, 200 / 45_000) >= 0.5 * 45_000  # 8 threads: >= 0.5 s, not 2,000 calls
    assert quick.count(200, 200 / 9_500) >= 0.5 * 9_500
    assert quick.count(200, 200 / 300) == 1_000  # a slow client: as before
    assert measure.Plan(requests=20_000, warmup=1_000, cell_seconds=10.0).count(1_000, 1_000 / 9_500) == 20_000


def test_the_sandbox_and_the_clients_get_cores_of_their_own(measure: Any) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        assert measure.SERVER_CPUS == measure.CLIENT_CPUS == set()
        return
    assert {cpus[-1]} == measure.SERVER_CPUS
    assert set(cpus[:-1]) == measure.CLIENT_CPUS


def test_cpu_per_call_is_reported_beside_the_rate_and_against_the_ceiling(report: Any) -> None:
    # Issue 28 item 1: every cell's client CPU per call, and fxpay / ceiling for both figures.
    doc = report.load(BENCH / "results" / "results.json")
    doc["cpu_us"] = {k: 10.0 * (i + 1) for i, k in enumerate(doc["rps"])}
    fx = "fxpay / async 64 / h2"
    doc["rps"][fx] = 30_000.0
    doc["cpu_us"][fx] = 60.0
    doc["ceiling"]["h2"]["async64_rps"] = 40_000.0
    doc["ceiling"]["h2"]["async64_cpu_us"] = 48.0
    table = report.cells_table(doc)
    assert table[0].endswith("| client CPU µs/call |")
    assert any(ln.startswith("| TLS h2 | async 64 | **fxpay** | 30,000 |") and ln.endswith("| 60.0 |") for ln in table)
    assert any("(ceiling) |" in ln and ln.endswith("| 48.0 |") for ln in table if "TLS h2 | async 64" in ln)
    (row,) = [r for r in report.ceiling_rows(doc) if r["transport"] == "h2" and r["shape"] == "async 64"]
    assert row["rps_ratio"] == pytest.approx(0.75)
    assert row["cpu_ratio"] == pytest.approx(1.25)
    assert "| TLS h2 | async 64 | 30,000 | 40,000 | 0.75x | 60.0 | 48.0 | 1.25x |" in report.ceiling_table(doc)
    # Results without CPU figures keep the old table (the README's block is made from one).
    del doc["cpu_us"]
    assert not report.cells_table(doc)[0].endswith("| client CPU µs/call |")


def test_the_ceilings_cpu_per_call_comes_from_its_own_ticks(measure: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The ceiling prints `<name>_self=utime,stime,...` in clock ticks over n calls.
    fake = tmp_path / "ceiling"
    fake.write_text(
        "#!/bin/sh\n"
        "echo loop_mt_rps=1000.0\necho loop_mt_self=50,50,1,2,3,4\n"
        "echo loop_ct_rps=2000.0\necho loop_ct_self=20,5,1,2,3,4\n"
        "echo async64_rps=4000.0\necho async64_self=30,10,1,2,3,4\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(measure, "ceiling_binary", lambda: fake)
    t = measure.Target("http://127.0.0.1:1", "id", "secret", "q")
    out = measure.run_ceiling(t, "http", 10_000, None)
    tick_us = 1e6 / measure.CLK_TCK
    assert out["loop_mt_cpu_us"] == pytest.approx(100 * tick_us / 10_000)
    assert out["loop_cpu_us"] == pytest.approx(25 * tick_us / 10_000)  # the faster loop's (loop_ct)
    assert out["async64_cpu_us"] == pytest.approx(40 * tick_us / 10_000)

"""bench/payouts_in_flight.py: pay_out's rows/s and CPU a row at several depths, its smoke test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"


def test_payouts_in_flight_measures_each_depth_of_both_journals(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, str(BENCH / "payouts_in_flight.py"), "--rows", "400", "--in-flight", "2,8", "--rounds", "1", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    md = (out / "payouts_in_flight.md").read_text()
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in md.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [(r[0], r[1]) for r in rows] == [("2", "memory"), ("2", "SQLite"), ("8", "memory"), ("8", "SQLite")]
    for depth, kind, rate, ratio, user, system, sandbox, total, switches in rows:
        assert float(rate.replace(",", "")) > 0, (depth, kind)
        assert float(ratio.rstrip("x")) > 0, (depth, kind)
        # Every row's CPU is read, the client's and the sandbox's: 400 rows are some 1,200 requests,
        # many clock ticks of /proc's CPU time even for the sandbox.
        assert float(user) + float(system) > 0, (depth, kind)
        assert float(sandbox) > 0, (depth, kind)
        assert float(total) >= float(user) + float(system) + float(sandbox) - 1, (depth, kind)
        assert float(switches) >= 0, (depth, kind)
        if kind == "memory":
            assert ratio == "1.00x"
    doc = json.loads((out / "payouts_in_flight.json").read_text())
    assert doc["rows"] == 400
    assert sorted(doc["best"]) == ["SQLite, 2", "SQLite, 8", "memory, 2", "memory, 8"]

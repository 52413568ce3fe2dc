"""The chaos harness in CI, small (tests/chaos/README.md): a few hundred keyed payments over
real parts under about ten faults, and the history checked for the one invariant: no payment
reference booked twice. `just chaos` runs it at full size (10,000 keys, 50 faults)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from chaos_support import Harness, Options, Report, program


def _need_parts() -> None:
    """redis-server and PostgreSQL, redis-py and psycopg: a skip on a developer's machine, a
    failure in CI (as conftest.need does for tests/python)."""
    missing = []
    for name in ("redis-server", "initdb", "pg_ctl"):
        try:
            program(name)
        except FileNotFoundError:
            missing.append(name)
    for module in ("redis", "psycopg", "httpx"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        message = f"{', '.join(missing)} not installed (scripts/setup installs them)"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(message + "; in CI a missing test dependency is a failure, not a skip", pytrace=False)
        pytest.skip(message)


def _run(tmp_path: Path, **kw: Any) -> Report:
    _need_parts()
    lines: list[str] = []
    folder = tmp_path / "run"
    report = Harness(Options(folder=folder, log=lines.append, **kw)).run()
    print("\n".join(lines))
    print(report.table())
    return report


def test_no_reference_is_booked_twice_under_the_nemesis(tmp_path: Path) -> None:
    """300 keys (deals, spot deals and payout rows over Redis, PostgreSQL and SQLite), 10
    faults: client and store kills, a FLUSHALL, a restart from an empty data dir, a TRUNCATE,
    dropped, forged and redelivered notifications, stale and stalled connections. The seed is
    printed; CHAOS_SEED replays a schedule."""
    seed = int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else None
    report = _run(tmp_path, keys=300, faults=10, seed=seed, workers=3, batch=20)
    r = report
    assert r.booked_twice == [], f"references booked twice (seed {r.seed}): {r.booked_twice[:20]}"
    assert r.resent == [], f"second requests for a booked quote (seed {r.seed}): {r.resent[:20]}"
    # Every unknown is named by its cause.
    assert not [c for c in r.unknown_by_cause if c.endswith("(no text)")], r.unknown_by_cause
    # The run did something: most keys booked, every fault made.
    assert r.booked >= 100, r.table()
    assert sum(r.faults.values()) == 10, r.faults
    assert not [k for k in r.faults if k.endswith("(failed)")], r.faults
    shutil.rmtree(tmp_path / "run", ignore_errors=True)


def test_the_checker_catches_a_worker_that_ignores_its_journal(tmp_path: Path) -> None:
    """The planted bug: a worker that sends every call unkeyed. The final pass runs each key
    again, so every deal is booked twice, with no fault needed: the checker must say so."""
    report = _run(tmp_path, keys=30, faults=0, seed=1, workers=2, batch=10, plant="no-journal")
    assert report.failed
    assert len(report.booked_twice) >= 15, report.table()

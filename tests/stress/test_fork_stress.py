"""The fork stress harness in CI, small (tests/stress/README.md): 20 forks on each of the four
journals while 8 threads of the parent make keyed calls; no child may hang or fail. `just
stress` runs it at full size (3,000 forks per journal)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _need_parts() -> None:
    """redis-server, PostgreSQL, redis-py and psycopg: a skip on a developer's machine, a
    failure in CI (as conftest.need does for tests/python)."""
    sys.path.insert(0, str(HERE.parent / "chaos"))
    from chaos_support import program

    missing = []
    for name in ("redis-server", "initdb", "pg_ctl"):
        try:
            program(name)
        except FileNotFoundError:
            missing.append(name)
    for module in ("redis", "psycopg"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        message = f"{', '.join(missing)} not installed (scripts/setup installs them)"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(message + "; in CI a missing test dependency is a failure, not a skip", pytrace=False)
        pytest.skip(message)


@pytest.mark.slow
def test_no_child_forked_while_8_threads_make_keyed_calls_hangs_on_any_journal(tmp_path: Path) -> None:
    """The harness in its own process (a fork of pytest's own would carry pytest's threads and
    plugins into every child): 20 forks per journal, each child's call checked in its journal."""
    _need_parts()
    folder = tmp_path / "stress"
    out = subprocess.run(
        [sys.executable, str(HERE / "fork_stress.py"), "--forks", "20", "--seed", "1", "--folder", str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(out.stdout, out.stderr)
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}"
    lines = out.stdout.splitlines()
    for kind in ("memory", "sqlite", "redis", "postgres"):
        row = next(line for line in lines if line.startswith(kind))
        assert "forks    20  ok    20  failed   0  hung   0" in row, row
    assert not folder.exists() or not any(folder.rglob("*.stacks")), "a child left its stacks (it hung or was slow)"

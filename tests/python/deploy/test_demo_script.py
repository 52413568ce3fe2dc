"""scripts/demo, a new user's first run, needs only Rust, Python and the extension (issue 23
item 11): no root, no apt, no contributor toolchain, and the demo imports nothing else."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_the_demo_script_needs_no_root_apt_or_dev_toolchain() -> None:
    script = (ROOT / "scripts" / "demo").read_text()
    code = "\n".join(ln.split("#", 1)[0] for ln in script.splitlines())
    for forbidden in ("apt-get", "apt ", "sudo", "id -u", "scripts/setup", "requirements-dev", ".venv/bin/just"):
        assert forbidden not in code, forbidden
    # What it installs: maturin (the build tool) and fxpay itself, nothing else.
    installs = [ln for ln in code.splitlines() if "pip install" in ln]
    assert len(installs) == 1
    assert '"maturin>=1.8,<2.0"' in installs[0]
    assert 'maturin" develop' in code


def test_the_demo_imports_only_fxpay_and_the_standard_library() -> None:
    tree = ast.parse((ROOT / "examples" / "demo.py").read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    assert {r for r in roots if r not in sys.stdlib_module_names} == {"fxpay"}


# -- issue 54 item 13: what the two set-up commands print ---------------------------------------

FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for the demo venv's python: pip is a no-op, the demo prints one line.
if [ "$1" = "-m" ]; then exit 0; fi
echo "demo ran: $*"
"""

FAKE_MATURIN = """#!/usr/bin/env bash
# Stands in for maturin develop: what the real one prints, pip's marker lines included.
echo "   Compiling fxpay-core v0.1.0" >&2
echo "Ignoring fxpay: markers 'extra == \\"all\\"' don't match your environment" >&2
echo "Ignoring fxpay: markers 'extra == \\"all\\"' don't match your environment"
echo "🛠 Installed fxpay-0.1.0"
"""


def fake(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def test_the_demo_script_prints_progress_and_no_pip_marker_lines(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake(venv / "bin" / "python", FAKE_PYTHON)
    fake(venv / "bin" / "maturin", FAKE_MATURIN)
    tools = tmp_path / "tools"
    tools.mkdir()
    fake(tools / "cargo", "#!/bin/sh\nexit 0\n")
    env = {"PATH": f"{tools}:/usr/bin:/bin", "FXPAY_DEMO_VENV": str(venv), "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(ROOT / "scripts" / "demo")], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "Ignoring fxpay: markers" not in out, out
    steps = [ln for ln in r.stdout.splitlines() if ln.startswith("scripts/demo: [")]
    assert [s[: len("scripts/demo: [1/3]")] for s in steps] == ["scripts/demo: [1/3]", "scripts/demo: [2/3]", "scripts/demo: [3/3]"], out
    assert "Compiling fxpay-core" in out  # cargo's own progress is shown
    assert r.stdout.splitlines()[-1] == "demo ran: examples/demo.py"


@pytest.mark.parametrize("rc", [0, 3])
def test_scripts_test_ends_with_one_verdict_line(tmp_path: Path, rc: int) -> None:
    """scripts/test run in a copy whose set-up and `just` are stand-ins: its last line says what
    passed (or that it failed), how long it took and the disk it left."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test").write_text((ROOT / "scripts" / "test").read_text())
    fake(tmp_path / "scripts" / "setup", "#!/bin/sh\necho setup ran\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    fake(tmp_path / ".venv" / "bin" / "just", f"#!/bin/sh\necho '== pytest'\nexit {rc}\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FXPAY_PYTHONS_CACHE": str(tmp_path / "none")}
    r = subprocess.run(["bash", str(tmp_path / "scripts" / "test")], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == rc
    last = r.stdout.splitlines()[-1]
    assert last.startswith("scripts/test: "), r.stdout
    assert ("passed: " in last) == (rc == 0), last
    assert (f"FAILED (exit {rc})" in last) == (rc != 0), last
    assert " min " in last, last
    assert "disk: clone " in last, last
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("scripts/test: ")] == [last]


def test_the_demo_does_what_its_docstring_says() -> None:
    """examples/demo.py's docstring names a spot deal and its DealCreated: it books one and
    receives the notification (run against the embedded sandbox)."""
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = ast.get_docstring(ast.parse((ROOT / "examples" / "demo.py").read_text())) or ""
    assert "spot deal" in doc
    lines = r.stdout.splitlines()
    for step in ("quote ", "benef. ", "deal ", "spot     process ", "spot     DealCreated success", "account "):
        assert any(ln.startswith(step) for ln in lines), (step, r.stdout)

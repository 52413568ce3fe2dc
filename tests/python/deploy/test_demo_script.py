"""scripts/demo, a new user's first run, needs only Rust, Python and the extension (issue 23
item 11): no root, no apt, no contributor toolchain, and the demo imports nothing else."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

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

"""The suite's own rules: a missing optional dependency skips on a developer's machine and
fails in CI (conftest.need / need_program); test files live in their area under unique names
and never import one another."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import in_ci, need, need_program


def test_need_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception):
        need("fxpay_no_such_module")
    with pytest.raises(pytest.skip.Exception):
        need_program("fxpay-no-such-program")
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        assert in_ci()
        with pytest.raises(pytest.fail.Exception, match="not installed"):
            need("fxpay_no_such_module")
        with pytest.raises(pytest.fail.Exception, match="not installed"):
            need_program("fxpay-no-such-program")
    monkeypatch.setenv("CI", "false")
    assert not in_ci()


def test_need_returns_what_is_there() -> None:
    assert need("json") is json
    assert need_program("fxpay-no-such-program", "sh").endswith("/sh")


HERE = Path(__file__).parent
AREAS = ("client", "oauth", "webhooks", "sandbox", "deploy", "testing", "journal")


def suite_files() -> list[Path]:
    return sorted(p for p in HERE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_test_file_lives_in_its_area_under_a_unique_name() -> None:
    """pytest imports test files by their base name (rootdir-relative, no __init__.py), so two
    files of one name in different folders would collide."""
    files = suite_files()
    misplaced = [str(p.relative_to(HERE)) for p in files if p.name.startswith("test_") and p.parent != HERE and p.parent.name not in AREAS]
    loose = [p.name for p in files if p.name.startswith("test_") and p.parent == HERE and p.name != "test_suite_rules.py"]
    assert (misplaced, loose) == ([], [])
    names = [p.name for p in files]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_no_test_module_imports_another() -> None:
    """Helpers shared by tests live in conftest.py or a *_support.py module, never in a test."""
    offenders = []
    for p in suite_files():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
            offenders += [f"{p.relative_to(HERE)}: {n}" for n in names if n.split(".")[0].startswith("test_")]
    assert offenders == []


def test_nothing_skips_silently_for_want_of_a_dependency() -> None:
    """A missing optional dependency goes through conftest.need / need_program (a skip on a
    developer's machine, a failure in CI), never pytest.importorskip, which skips in CI too."""
    offenders = []
    for p in suite_files():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Attribute) and node.attr == "importorskip":
                offenders.append(f"{p.relative_to(HERE)}:{node.lineno}")
    assert offenders == []

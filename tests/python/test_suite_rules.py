"""The suite's own rules: a missing optional dependency skips on a developer's machine and
fails in CI (conftest.need / need_program)."""

from __future__ import annotations

import json

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

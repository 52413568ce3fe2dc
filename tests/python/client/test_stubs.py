"""The model classes of ``_fxpay.pyi`` are written from the Rust field lists
(``scripts/gen_stubs.py``, which ``just lint`` runs with ``--check``)."""

from __future__ import annotations

import inspect
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

import fxpay
from fxpay import _fxpay

from conftest import load_script

ROOT = Path(__file__).resolve().parents[3]

GENERATOR = ROOT / "scripts" / "gen_stubs.py"


def generator() -> ModuleType:
    return load_script(GENERATOR)


def ruff_found() -> bool:
    return (Path(sys.executable).parent / "ruff").exists() or shutil.which("ruff") is not None


def model_classes() -> list[type]:
    return [c for n in _fxpay.__all__ if isinstance(c := getattr(_fxpay, n), type) and hasattr(c, "_stub_fields")]


def test_every_model_class_tells_its_fields_as_its_constructor_takes_them() -> None:
    classes = model_classes()
    assert {c.__name__ for c in classes} >= {"Quote", "Deal", "DealBeneficiary", "Token", "DealCreated", "FieldError"}
    for cls in classes:
        fields = cls._stub_fields  # type: ignore[attr-defined]
        assert tuple(f[0] for f in fields) == cls.__match_args__  # type: ignore[attr-defined]
        params = inspect.signature(cls).parameters
        assert list(params) == [f[0] for f in fields]
        for name, _taken, _given, default in fields:
            # A field the constructor may leave out has the stub's default: None or ().
            expected = inspect.Parameter.empty if default is None else {"None": None, "()": ()}[default]
            assert params[name].default == expected, (cls.__name__, name)


def test_amounts_are_taken_as_amounts_and_given_as_decimals() -> None:
    fields = {f[0]: f[1:] for f in fxpay.Quote._stub_fields}  # type: ignore[attr-defined]
    assert fields["buy_amount"] == ("_Amount", "Decimal", None)
    assert fields["fee"] == ("_Amount | None", "Decimal | None", "None")
    assert fields["freebies"] == ("Freebies | None", "Freebies | None", "None")
    deal = {f[0]: f[1:] for f in fxpay.Deal._stub_fields}  # type: ignore[attr-defined]
    assert deal["beneficiaries"] == ("Sequence[DealBeneficiary]", "tuple[DealBeneficiary, ...]", "()")


@pytest.mark.skipif(not ruff_found(), reason="ruff formats what the generator writes")
def test_the_committed_stub_is_what_the_generator_writes() -> None:
    gen = generator()
    current = gen.STUB.read_text(encoding="utf-8")
    assert gen.render(current) == current, "run: python scripts/gen_stubs.py"


@pytest.mark.skipif(not ruff_found(), reason="ruff formats what the generator writes")
def test_a_stub_that_drifted_from_the_rust_fields_is_written_anew() -> None:
    gen = generator()
    current = gen.STUB.read_text(encoding="utf-8")
    drifted = current.replace("    def fee(self) -> Decimal | None: ...\n", "    def fee(self) -> float: ...\n", 1)
    assert drifted != current
    assert gen.render(drifted) == current

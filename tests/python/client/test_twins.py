"""Every network method `x` has an awaitable twin `x_async` taking the same arguments: the
binding writes most pairs as two one-line methods over one shared function
(crates/fxpay-python/src/twin.rs), and this checks every pair, in the compiled module and in
its stub, whichever way it was written. An iterator's twin is an async iterator."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import fxpay

STUB = Path(fxpay.__file__).with_name("_fxpay.pyi")
CLASSES = [fxpay.Client, fxpay.UserSession]


def twins(cls: type) -> list[tuple[str, str]]:
    names = set(dir(cls))
    return sorted((n[: -len("_async")], n) for n in names if n.endswith("_async") and n[: -len("_async")] in names)


def test_the_classes_have_the_twins_the_api_names() -> None:
    assert [b for b, _ in twins(fxpay.Client)] == [
        "_payments_token",
        "create_beneficiary",
        "create_deal",
        "create_quote",
        "create_spot_deal",
        "exchange_code",
        "get_quote",
        "pay_out",
        "pay_out_iter",
        "refresh_token",
    ]
    assert twins(fxpay.UserSession) == [("list_virtual_accounts", "list_virtual_accounts_async")]


@pytest.mark.parametrize(
    ("cls", "name", "twin"), [(c, n, t) for c in CLASSES for n, t in twins(c)], ids=lambda v: getattr(v, "__name__", v)
)
def test_a_method_and_its_async_twin_have_the_same_signature(cls: type, name: str, twin: str) -> None:
    assert inspect.signature(getattr(cls, twin)) == inspect.signature(getattr(cls, name))


def stub_defs(cls_name: str) -> dict[str, list[ast.FunctionDef]]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name]
    defs: dict[str, list[ast.FunctionDef]] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            defs.setdefault(node.name, []).append(node)
    return defs


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_in_the_stub_a_twin_takes_the_same_arguments_and_returns_a_coroutine_of_the_same_result(
    cls: type,
) -> None:
    defs = stub_defs(cls.__name__)
    pairs = twins(cls)
    assert pairs
    for name, twin in pairs:
        assert len(defs[name]) == len(defs[twin]), name  # the same overloads
        for sync, awaitable in zip(defs[name], defs[twin], strict=True):
            assert ast.dump(awaitable.args) == ast.dump(sync.args), twin
            assert sync.returns is not None
            assert awaitable.returns is not None
            result = ast.unparse(sync.returns)
            if result.startswith("Iterator["):
                assert ast.unparse(awaitable.returns) == f"Async{result}", twin
            else:
                assert ast.unparse(awaitable.returns) == f"Coroutine[Any, Any, {result}]", twin


def test_a_twin_made_by_the_macro_says_what_it_is_the_twin_of() -> None:
    for cls in CLASSES:
        for name, twin in twins(cls):
            doc = getattr(cls, twin).__doc__ or ""
            assert doc.startswith(f":meth:`{name}`"), (cls, twin, doc)

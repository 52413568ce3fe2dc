"""Writes the model classes of ``python/fxpay/_fxpay.pyi`` from the Rust field lists.

Each model class of the built extension carries ``_stub_fields``: its fields in order, as
``(name, type taken, type given, default)``. The fields come from the core's one definition of
the model (``fxpay_core::Model``: ``FIELDS``, ``TYPES``, ``ABSENT``), and each
field type's Python types from the rule that converts it (``field_py_types`` in
``crates/fxpay-python/src/models/class.rs``, the nested models' and enums' in
``models/mod.rs``). So a field is named and typed in Rust only; this script writes the part of
the stub between the two marker lines from that, and ruff formats the file.

The methods a class adds by hand (``Token.expired``, ``FieldError.layer``...) are in
``EXTRAS`` below; stubtest (``just lint``) fails if they stop matching the extension.

Usage, after building the extension (``maturin develop``):
- ``python scripts/gen_stubs.py``: rewrites the stub;
- ``python scripts/gen_stubs.py --check``: fails, showing the difference, when the stub is not
  what it would write (``just lint`` runs this).
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "fxpay" / "_fxpay.pyi"
BEGIN = "# -- models: written by scripts/gen_stubs.py from the Rust field lists (edit the Rust, then run it) --"
END = "# -- end of the models written by scripts/gen_stubs.py --"

# What a class declares by hand in Rust (the braces of its `pymodel!`), after its fields.
EXTRAS: dict[str, list[str]] = {
    "Token": [
        "@property",
        "def expired(self) -> bool: ...",
        "@classmethod",
        "def from_dict(cls, d: Mapping[str, Any]) -> Token: ...",
    ],
    "FieldError": [
        "@property",
        "def layer(self) -> str | None: ...",
        "@property",
        "def component(self) -> str | None: ...",
        "@property",
        "def number(self) -> int | None: ...",
    ],
    "DealCreated": [
        "@property",
        "def ok(self) -> bool: ...",
    ],
}


def models() -> list[tuple[str, type, tuple[tuple[str, str, str, str | None], ...]]]:
    """The extension's model classes, in the order it adds them, with their fields."""
    from fxpay import _fxpay

    found = []
    for name in _fxpay.__all__:
        cls = getattr(_fxpay, name)
        fields = getattr(cls, "_stub_fields", None)
        if isinstance(cls, type) and fields is not None:
            found.append((name, cls, fields))
    return found


def render_class(name: str, cls: type, fields: tuple[tuple[str, str, str, str | None], ...]) -> list[str]:
    has_raw = "__setstate__" in vars(cls)
    names = ", ".join(f'"{f[0]}"' for f in fields) + ("," if len(fields) == 1 else "")
    params = ", ".join(f"{f}: {taken}" + (f" = {default}" if default is not None else "") for f, taken, _, default in fields)
    out = [
        "@final",
        f"class {name}:",
        "    __signature__: ClassVar[inspect.Signature]",
        f"    __match_args__ = ({names})",
        f"    def __new__(cls, {params}) -> {name}: ...",
    ]
    for f, _, given, _ in fields:
        out += ["    @property", f"    def {f}(self) -> {given}: ..."]
    out += [f"    {line}" for line in EXTRAS.get(name, [])]
    if has_raw:
        out += ["    @property", "    def raw(self) -> dict[str, Any]: ..."]
    changes = ", ".join(f"{f}: {taken} = ..." for f, taken, _, _ in fields)
    out += [
        "    def to_dict(self) -> dict[str, Any]: ...",
        f"    def replace(self, *, {changes}) -> {name}: ...",
        "    def _repr_html_(self) -> str: ...",
        "    def __reduce__(self) -> tuple[Any, ...]: ...",
    ]
    if has_raw:
        out.append("    def __setstate__(self, state: Any) -> None: ...")
    out += [
        f"    def __copy__(self) -> {name}: ...",
        f"    def __deepcopy__(self, memo: Any) -> {name}: ...",
        "",
    ]
    return out


def render(current: str) -> str:
    """``current`` with the part between the markers written anew, formatted by ruff."""
    head, sep, rest = current.partition(BEGIN + "\n")
    _, sep2, tail = rest.partition(END + "\n")
    if not sep or not sep2:
        sys.exit(f"gen_stubs: {STUB.relative_to(ROOT)} lacks the marker lines:\n{BEGIN}\n{END}")
    body: list[str] = []
    for name, cls, fields in models():
        body += render_class(name, cls, fields)
    return ruff_format(head + BEGIN + "\n\n" + "\n".join(body) + "\n" + END + "\n" + tail)


def ruff_format(text: str) -> str:
    ruff = Path(sys.executable).parent / "ruff"
    command = str(ruff) if ruff.exists() else shutil.which("ruff") or "ruff"
    done = subprocess.run(
        [command, "format", "--stdin-filename", str(STUB), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"gen_stubs: ruff format failed:\n{done.stderr}")
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the stub differs from what would be written")
    args = parser.parse_args()
    current = STUB.read_text(encoding="utf-8")
    wanted = render(current)
    if args.check:
        if wanted != current:
            where = str(STUB.relative_to(ROOT))
            diff = difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), where, where + " (generated)")
            sys.stdout.writelines(diff)
            print(f"gen_stubs: {where} is not what scripts/gen_stubs.py writes: run it after building the extension")
            return 1
        return 0
    if wanted != current:
        STUB.write_text(wanted, encoding="utf-8")
        print(f"gen_stubs: wrote {STUB.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

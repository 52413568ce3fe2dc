"""Mutation testing of the pyo3 binding (crates/fxpay-python) against the Python tests
(standard library only).

The binding's code is only reachable from Python, and cargo-mutants runs only `cargo test`,
so this takes the mutants from cargo-mutants and runs the Python tests itself: for each
mutant it applies its diff to the file in place, builds the extension incrementally
(`cargo build -p fxpay-python`, this tree's `target/`), copies `target/debug/lib_fxpay.so`
to `python/fxpay/_fxpay.abi3.so`, runs the tests that cover the file (its `TESTS` table)
in a fresh pytest process with `PYTHONPATH` on this tree's `python/`, and puts the file
back, also on Ctrl-C or an error. One mutant at a time: they share the tree.

Before a file's mutants it checks that `fxpay` and `fxpay._fxpay` load from this tree, runs
the tests on the clean build (the baseline, timed: they must pass), and plants a canary (a
`panic!` at the top of a function the tests call, `CANARY`), which must fail them: a run
whose tests load another build of the extension stops there. After the last mutant the
clean extension is built again.

Outcomes: caught (a test failed), missed (every test passed), timeout (the tests did not
end within `--timeout`: a hang, a detection too), unviable (the mutant does not build),
unbuilt (the library built is the clean one byte for byte: the mutant is in code this
platform does not compile, such as `#[cfg(not(unix))]`; its tests are not run).

Usage (the machine is small: run it niced, one run at a time):
    nice -n 10 .venv/bin/python scripts/rsmutants.py --file crates/fxpay-python/src/bridge/port.rs
    .venv/bin/python scripts/rsmutants.py --list --file crates/fxpay-python/src/bridge/port.rs
Options: [--file FILE ...] [--timeout S] [--report PATH] [--list] [--missed-in REPORT]
         [--match TEXT] [--resume] [--tests NODEID ...] [--deselect NODEID ...] [--no-canary]
To check that one test kills one mutant: `--match '<its name>' --tests <the test> --no-canary`
(the test passes on the clean build, then fails with the mutant).
Results: `target/rsmutants/<file stem>.json` (each mutant's outcome, written as it ends;
`--resume` skips the mutants a report already has). Exit status: 0 when no mutant is
missed, 1 otherwise, 2 when a check before the mutants failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = "crates/fxpay-python/src/"
EXTENSION = ROOT / "python" / "fxpay" / "_fxpay.abi3.so"
BUILT = ROOT / "target" / "debug" / "lib_fxpay.so"

# The model classes: their fields, constructors, copies, pickles, reprs and stubs, and Token.from_dict.
MODEL_TESTS = [
    "tests/python/client/test_models.py",
    "tests/python/client/test_tolerant_reading.py",
    "tests/python/client/test_validation.py",
    "tests/python/client/test_stubs.py",
    "tests/python/client/test_fast_paths.py::test_quote_is_the_same_object_as_its_constructor_builds",
    "tests/python/oauth/test_tokens.py",
    "tests/python/oauth/test_oauth.py",
]

# The tests that cover each file (pytest arguments, relative to the tree's root).
TESTS: dict[str, list[str]] = {
    "bridge/block.rs": [
        "tests/python/client/test_panics.py",
        "tests/python/client/test_blocking_calls.py",
        "tests/python/client/test_deadline_waits.py",
        "tests/python/journal/test_payouts.py::test_ctrl_c_starts_no_new_row_and_the_table_resumes",
        "tests/python/journal/test_payouts.py::test_the_first_ctrl_c_lets_the_row_in_flight_finish_a_second_abandons_it",
    ],
    "bridge/port.rs": [
        "tests/python/client/test_fast_paths.py",
        "tests/python/client/test_waiter.py",
        "tests/python/client/test_tracing.py::test_a_cancelled_call_still_ends_its_span",
    ],
    # The panic guard, both ways of waiting: a blocking call's and an awaited one's.
    "bridge/guarded.rs": ["tests/python/client/test_panics.py"],
    # The coroutine of an `*_async` method: its steps, `send`, `throw`, `close`, reuse, repr.
    "bridge/coroutine.rs": [
        "tests/python/client/test_client_class.py",
        "tests/python/client/test_waiter.py",
        "tests/python/client/test_fast_paths.py",
        "tests/python/client/test_twins.py",
        "tests/python/client/test_panics.py",
    ],
    # Module declarations and re-exports only: no mutant (the run says so and stops there).
    "bridge/mod.rs": ["tests/python/client/test_panics.py"],
    # "Am I inside a blocking call": where a hook of the call does its Python work.
    "bridge/blocking.rs": [
        "tests/python/client/test_tracing.py",
        "tests/python/client/test_blocking_calls.py",
        "tests/python/oauth/test_on_token_order.py",
    ],
    "bridge/waiter.rs": [
        "tests/python/client/test_waiter.py",
        "tests/python/client/test_fast_paths.py",
        "tests/python/oauth/test_refresh_cancel.py",
    ],
    "observe/otel.rs": ["tests/python/client/test_tracing.py"],
    # pay_out's calls run on the shared runtime, neither driven by their thread nor on a loop.
    "observe/spans.rs": [
        "tests/python/client/test_tracing.py",
        "tests/python/journal/test_payouts.py::test_each_call_of_a_payout_is_a_client_span_under_the_callers",
    ],
    "observe/mod.rs": ["tests/python/client/test_tracing.py", "tests/python/client/test_lazy_import.py"],
    # The journals' stores held by the binding (issue 55): the Python tests that make each
    # kind of journal from a path, a URL or a connection string, and the memory journal's.
    "journal/memory.rs": [
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_journal_holes.py",
    ],
    "journal/sqlite.rs": [
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_holes.py",
        "tests/python/journal/test_journal_one_flush.py",
        "tests/python/journal/test_journal_identity.py",
    ],
    "journal/redis.rs": [
        "tests/python/journal/test_journal_identity.py",
        "tests/python/journal/test_journal_redis_client.py",
        "tests/python/journal/test_journal_redis_connection.py",
        "tests/python/journal/test_journal_one_flush.py",
    ],
    "journal/postgres.rs": [
        "tests/python/journal/test_journal_postgres.py",
        "tests/python/journal/test_journal_identity_postgres.py",
        "tests/python/journal/test_journal_one_flush.py",
    ],
    # A journal whose storage is Python's (a user's own, a subclass overriding its storage
    # methods, a RedisJournal over a client) seen from the core.
    "journal.rs": [
        "tests/python/journal/test_journal_python_store_results.py",
        "tests/python/journal/test_journal_redis_client.py",
        "tests/python/journal/test_journal_holes.py",
        "tests/python/journal/test_journal_thread_states.py",
        "tests/python/journal/test_journal_calls.py",
    ],
    # `fxpay.JournalEntry`: its fields, JSON text, pickle and repr.
    "journal/entry.rs": [
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_holes.py",
        "tests/python/journal/test_journal_python_store_results.py",
        "tests/python/journal/test_spot_settles.py",
    ],
    # The core's stores held by fxpay's own journals, called from Python.
    "journal/native.rs": [
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_identity.py",
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_journal_one_flush.py",
        "tests/python/journal/test_journal_redis_connection.py",
    ],
    # resolve, unknown, complete, verify and settle a spot deal.
    "journal/operations.rs": [
        "tests/python/journal/test_spot_settles.py",
        "tests/python/journal/test_journal_receivers.py",
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_holes.py",
    ],
    "store.rs": [
        "tests/python/oauth/test_tokens.py",
        "tests/python/oauth/test_store_outage.py",
    ],
    "models/mod.rs": MODEL_TESTS,
    "client.rs": [
        "tests/python/client/test_config.py",
        "tests/python/client/test_client_class.py",
        "tests/python/client/test_call_options.py",
        "tests/python/oauth/test_pkce.py",
        "tests/python/journal/test_payouts.py::test_a_table_is_paid_in_order_and_a_refused_row_stops_nothing",
        "tests/python/journal/test_payouts.py::test_progress_reaches_a_callable_in_order",
        "tests/python/journal/test_payouts.py::test_progress_counts_an_unknown_row_as_unknown",
        "tests/python/journal/test_payouts.py::test_pay_out_returns_only_after_its_last_progress_report",
        "tests/python/journal/test_payouts.py::test_each_call_of_a_payout_is_a_client_span_under_the_callers",
        "tests/python/journal/test_payouts.py::test_the_awaitable_twin",
        "tests/python/journal/test_payouts.py::test_bad_tables_are_refused_before_anything_is_sent",
    ],
    "models/class.rs": MODEL_TESTS,
}

# A canary per file: (text to find in the file, text put before it). The planted panic must
# fail the file's tests, or they do not run this tree's build.
PANIC = 'panic!("rsmutants canary"); '
CANARY: dict[str, tuple[str, str]] = {
    "bridge/block.rs": ("let rt = fxpay_core::runtime();", PANIC),
    "bridge/port.rs": ("let inbox = current(py, &event_loop)?;", PANIC),
    "bridge/waiter.rs": ("state.outcome = match outcome {", PANIC),
    "bridge/guarded.rs": ("match AssertUnwindSafe(fut).catch_unwind().await {", PANIC),
    "bridge/blocking.rs": ("fxpay_core::blocking_here()\n}", PANIC),
    "bridge/coroutine.rs": ("let waiter = spawn(py, guarded(start(observer(py))))?;", PANIC),
    "observe/otel.rs": ("let (tracer, parent, fixed) = match provider(py)", PANIC),
    "observe/spans.rs": ("let end = span_end(log);", PANIC),
    "observe/mod.rs": ("let log = logging::observer(py);", PANIC),
    "store.rs": ("PyTokenStore {\n            obj: Arc::new(obj),", PANIC),
    "models/mod.rs": ("into_py::<Quote>(py, q, Raw::Text(raw_text))", PANIC),
    "models/class.rs": ("Py::new(py, M::wrap(core, raw))", PANIC),
    "client.rs": ("let open = self.initialised()?;\n        if self.is_closed()", PANIC),
    "journal/memory.rs": ("out(self.0.claim(&entry.0)", PANIC),
    "journal/sqlite.rs": ("let waits = hook::<()>(result_waits);", PANIC),
    "journal/redis.rs": ("let waits = hook::<()>(result_waits);", PANIC),
    "journal/postgres.rs": ("let waits = hook::<()>(result_waits);", PANIC),
    "journal.rs": ('for m in ["get", "claim", "swap", "find"] {', PANIC),
    "journal/entry.rs": ("&self.0.key\n", PANIC),
    "journal/native.rs": ("Ok(out(py.detach(|| self.0.get(key))?))", PANIC),
    "journal/operations.rs": ("Ok(JournalEntry(resolve_entry(", PANIC),
}


OUTCOMES = ("caught", "missed", "timeout", "unviable", "unbuilt")


@dataclass
class Mutant:
    name: str  # as cargo-mutants names it: file:line:column: replace ... with ...
    diff: str


def short(file: str) -> str:
    return file.removeprefix(SRC)


def list_mutants(file: str) -> list[Mutant]:
    cmd = ["cargo", "mutants", "--list", "--json", "--diff", "--package", "fxpay-python", "--file", file]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    mutants = []
    for m in json.loads(out):
        if m["file"] != file:  # `--file` also takes globs; keep the file asked for
            continue
        start = m["span"]["start"]
        what = f"replace {m['function']['function_name']} with {m['replacement']}" if m["genre"] == "FnValue" else None
        name = m.get("name") or f"{m['file']}:{start['line']}:{start['column']}: {what or m['genre']}"
        mutants.append(Mutant(name, m["diff"]))
    return mutants


def apply_diff(text: str, diff: str) -> str:
    """`text` with the unified diff's hunks applied; each hunk's old lines must be there."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # next line of `lines` not yet copied
    hunks = re.split(r"^@@ ", diff, flags=re.M)[1:]
    for hunk in hunks:
        header, _, body = hunk.partition("\n")
        old_start = int(re.match(r"-(\d+)", header).group(1))  # type: ignore[union-attr]
        start = max(old_start - 1, 0)
        out.extend(lines[at:start])
        at = start
        for line in body.splitlines(keepends=True):
            if line.startswith("\\"):  # "\ No newline at end of file"
                continue
            tag, content = line[:1], line[1:]
            if tag in (" ", "-"):
                if at >= len(lines) or lines[at].rstrip("\n") != content.rstrip("\n"):
                    raise ValueError(f"the diff does not apply at line {at + 1}: {content!r}")
                if tag == " ":
                    out.append(lines[at])
                at += 1
            elif tag == "+":
                out.append(content if content.endswith("\n") else content + "\n")
    out.extend(lines[at:])
    return "".join(out)


def build() -> bool:
    """Builds the extension into this tree's python/fxpay; False when it does not build."""
    r = subprocess.run(["cargo", "build", "-q", "-p", "fxpay-python"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        return False
    # A new file (not a copy over the old one): a test process that still maps the old one
    # keeps it intact.
    tmp = EXTENSION.with_suffix(".tmp")
    shutil.copyfile(BUILT, tmp)
    os.replace(tmp, EXTENSION)
    return True


def digest() -> str:
    """The built library's hash: a mutant whose build is the clean one byte for byte changed
    code this platform does not compile (`#[cfg(not(unix))]`)."""
    return hashlib.sha256(BUILT.read_bytes()).hexdigest()


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "python"), "PYTHONDONTWRITEBYTECODE": "1"}


def run_tests(tests: list[str], timeout: float, deselect: Sequence[str] = ()) -> str:
    # pytest-timeout fails a test that hangs after 60 s; the whole run gets `timeout`.
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--timeout=60", *tests]
    cmd += [f"--deselect={d}" for d in deselect]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:  # timed out, or Ctrl-C: end its whole process group
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if code is None:
        return "timeout"
    return "missed" if code == 0 else "caught"


def check_import() -> None:
    code = "import fxpay, fxpay._fxpay as e; print(fxpay.__file__); print(e.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), capture_output=True, text=True, check=True).stdout
    for line in out.split():
        if not Path(line).resolve().is_relative_to((ROOT / "python").resolve()):
            raise SystemExit(f"rsmutants: {line} is not this tree's ({ROOT / 'python'})")
    print(f"imports: {' '.join(out.split())}", flush=True)


class Restore:
    """Puts the file back when the block ends, however it ends (SIGTERM too)."""

    def __init__(self, path: Path) -> None:
        self.path, self.original = path, path.read_text()

    def __enter__(self) -> Restore:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.path.read_text() != self.original:
            self.path.write_text(self.original)


def run_file(file: str, args: argparse.Namespace) -> list[dict[str, object]] | None:
    key = short(file)
    tests = args.tests or TESTS[key]
    report = Path(args.report or ROOT / "target" / "rsmutants" / f"{Path(key).as_posix().replace('/', '-')}.json")
    done: dict[str, dict[str, object]] = {}
    if args.resume and report.exists():
        done = {r["mutant"]: r for r in json.loads(report.read_text())["mutants"]}
    chosen = list_mutants(file)
    if args.missed_in:
        again = {r["mutant"] for r in json.loads(Path(args.missed_in).read_text())["mutants"] if r["outcome"] == "missed"}
        chosen = [m for m in chosen if m.name in again]
    if args.match:
        chosen = [m for m in chosen if args.match in m.name]
    path = ROOT / file
    results: list[dict[str, object]] = [done[m.name] for m in chosen if m.name in done]
    todo = [m for m in chosen if m.name not in done]
    print(f"{file}: {len(chosen)} mutants, {len(todo)} to run; tests: {' '.join(tests)}", flush=True)
    if not chosen:  # nothing to mutate (declarations and re-exports): no build, no tests
        return []

    def save() -> None:
        counts = {k: sum(1 for r in results if r["outcome"] == k) for k in OUTCOMES}
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"file": file, "tests": tests, "counts": counts, "mutants": results}, indent=1))

    with Restore(path) as saved:
        started = time.monotonic()
        if not build():
            print(f"{file}: the clean tree does not build", file=sys.stderr)
            return None
        built = time.monotonic()
        clean = digest()
        check_import()
        baseline = run_tests(tests, args.timeout, args.deselect)
        print(f"baseline: build {built - started:.1f} s, tests {time.monotonic() - built:.1f} s: {baseline}", flush=True)
        if baseline != "missed":
            print(f"{file}: the tests fail without any mutant ({baseline})", file=sys.stderr)
            return None
        if not args.no_canary:
            anchor, planted = CANARY[key]
            if saved.original.count(anchor) != 1:
                raise SystemExit(f"rsmutants: the canary's anchor is not once in {file}")
            path.write_text(saved.original.replace(anchor, planted + anchor))
            t0 = time.monotonic()
            canary = run_tests(tests, args.timeout, args.deselect) if build() else "unviable"
            path.write_text(saved.original)
            print(f"canary: {canary} ({time.monotonic() - t0:.1f} s)", flush=True)
            if canary != "caught":
                print(f"{file}: the planted panic did not fail the tests ({canary}): not this tree's build?", file=sys.stderr)
                return None
        try:
            for m in todo:
                t0 = time.monotonic()
                path.write_text(apply_diff(saved.original, m.diff))
                if not build():
                    outcome, took = "unviable", f"build {time.monotonic() - t0:.0f} s"
                elif digest() == clean:
                    outcome, took = "unbuilt", "the clean build byte for byte: code this platform does not compile"
                else:
                    t1 = time.monotonic()
                    outcome = run_tests(tests, args.timeout, args.deselect)
                    took = f"build {t1 - t0:.0f} s, tests {time.monotonic() - t1:.0f} s"
                path.write_text(saved.original)
                print(f"{outcome:8} {m.name} ({took})", flush=True)
                results.append({"mutant": m.name, "outcome": outcome, "diff": m.diff})
                save()
        finally:
            path.write_text(saved.original)
            save()
            build()  # the extension of the clean tree again
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", nargs="*", default=[SRC + k for k in TESTS], help="files of the binding to mutate")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run")
    ap.add_argument("--report", help="the report (default: target/rsmutants/<file>.json); with one --file only")
    ap.add_argument("--list", action="store_true", help="only list the mutants")
    ap.add_argument("--missed-in", metavar="REPORT", help="only the mutants an earlier report lists as missed")
    ap.add_argument("--match", metavar="TEXT", help="only the mutants whose name contains TEXT")
    ap.add_argument("--resume", action="store_true", help="skip the mutants the report already has")
    ap.add_argument("--tests", nargs="+", metavar="NODEID", help="run these tests instead of the file's (to check one kill)")
    ap.add_argument("--deselect", action="append", default=[], metavar="NODEID", help="a test left out (pytest --deselect)")
    ap.add_argument("--no-canary", action="store_true", help="skip the canary (checked on an earlier run)")
    args = ap.parse_args()
    files = [f if f.startswith(SRC) else SRC + f for f in args.file]
    if args.list:
        for f in files:
            for m in list_mutants(f):
                print(m.name)
        return 0
    missed = 0
    for f in files:
        results = run_file(f, args)
        if results is None:
            return 2
        counts = {k: sum(1 for r in results if r["outcome"] == k) for k in OUTCOMES}
        print(f"{f}: {json.dumps(counts)}", flush=True)
        missed += counts["missed"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

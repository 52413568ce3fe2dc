"""A small mutation tester for python/fxpay (standard library only).

mutmut 3 mutates only code under `./`, `src/` or `source/` and runs its workers by forking a
process that has imported the package; fxpay lives under `python/` and its Rust runtime is
made anew after a fork, so this does the same job plainly: for each mutant it rewrites one
file in place, runs the tests that cover that file in a fresh pytest process, and puts the
file back.

Mutations (one at a time, on each function and method):
- comparison flipped (`==`/`!=`, `<`/`>=`, `<=`/`>`, `is`/`is not`, `in`/`not in`);
- `and` <-> `or`; `not x` -> `x`; `True` <-> `False`;
- an `if` condition replaced by `True` and by `False`;
- a `return x` replaced by `return None`;
- a statement that calls or assigns replaced by `pass`.

Usage: python scripts/pymutants.py [--only FILE ...] [--jobs N] [--timeout S] [--report PATH] [--missed-in REPORT]
                                   [--lines FIRST-LAST ...] [--by-coverage]
`--lines` keeps the mutants of those lines only (a part of a file too big for one sitting).

`--by-coverage` (with `--jobs`) runs each mutant against the tests that run its line, not the
file's whole list: the list runs once under coverage (pytest-cov, a context per test), and a
mutant runs the tests whose context ran its statement (its header, for an `if`, a `with`, a
`def`), quickest first. A mutant no test's context ran, or that those tests miss, then runs
the whole list as before, so a line run only in a forked child or a subprocess (which
coverage does not see) is never counted missed for want of a test: only the whole list's
verdict counts a mutant missed.
Exit status: 0 when no mutant is missed (caught or timed out), 1 otherwise.

`--jobs N` runs N mutants at a time. Each job has its own copy of the package
(`target/pymutants-jobs/<pid>/jobK/python/fxpay`, the compiled `_fxpay` extension included) and
of `tests/python`, and its tests run with `PYTHONPATH` on that copy, so a mutant never
touches `python/fxpay`, two mutants never share a file, and editing the worktree during a
run changes nothing in it. Before a file's mutants, every job checks that its tests
really import its copy: `fxpay` and `fxpay._fxpay` must load from the copy, and a "canary"
(the file replaced by one that raises on import) must fail the file's tests, or the run
stops. With the default `--jobs 0` the file is mutated in place in `python/fxpay`, as before.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "python" / "fxpay"

# Which tests cover which file: the mutant is run against these only.
TESTS: dict[str, list[str]] = {
    "stores.py": ["tests/python/oauth/test_tokens.py", "tests/python/oauth/test_redis_store.py"],
    "redis_store.py": ["tests/python/oauth/test_redis_store.py"],
    "seen.py": ["tests/python/webhooks/test_receivers_once.py"],
    "models.py": [
        "tests/python/client/test_payments.py",
        "tests/python/oauth/test_tokens.py",
        "tests/python/client/test_notebook.py",
        "tests/python/webhooks/test_webhooks.py",
        "tests/python/client/test_validation.py",
        "tests/python/client/test_tolerant_reading.py",
        "tests/python/oauth/test_oauth.py",
    ],
    "errors.py": [
        "tests/python/client/test_request_ids.py",
        "tests/python/client/test_raw_response.py",
        "tests/python/client/test_errors.py",
        "tests/python/client/test_typed_errors.py",
        "tests/python/client/test_payments.py",
        "tests/python/client/test_validation.py",
        "tests/python/oauth/test_oauth.py",
    ],
    # The plugin runs in the pytest processes these tests start (pytester): measured with
    # coverage in those processes too, test_plugin_three_ways.py runs no line the others do
    # not, nor do the two left out below (four xdist workers, recording through a served
    # sandbox: the lines they run, the others run too), which take the longest.
    "testing/pytest_plugin.py": [
        "tests/python/testing/test_pytest_plugin.py",
        "tests/python/testing/test_plugin_remote.py::test_one_suite_runs_unchanged_locally_and_on_a_served_sandbox",
        "tests/python/testing/test_plugin_remote.py::test_without_the_admin_token_control_tests_skip_before_any_request",
        "tests/python/testing/test_plugin_remote.py::test_without_the_admin_token_a_control_under_another_name_or_in_a_helper_skips",
        "tests/python/testing/test_plugin_remote.py::test_a_partial_configuration_is_a_usage_error",
        "tests/python/testing/test_plugin_remote.py::test_the_option_without_credentials_is_a_usage_error",
        "tests/python/testing/test_plugin_remote.py::test_xdist_with_one_served_sandbox_is_a_usage_error",
        "tests/python/testing/test_cassette_plugin.py::test_record_then_replay_with_pytester",
        "tests/python/testing/test_cassette_plugin.py::test_a_cassettes_name_may_be_a_keyword_and_must_be_a_str",
        "tests/python/testing/test_pytest_plugin_edges.py",
    ],
    # The files whose tests run each line of `_sandbox.py` and `_remote.py` (coverage per
    # test, 2026-11-25): the pytest-plugin tests add none, the two below are all they need.
    "testing/_sandbox.py": [
        "tests/python/testing/test_testing_package.py",
        "tests/python/testing/test_remote_sandbox.py",
        "tests/python/webhooks/test_webhook_helpers.py",
        "tests/python/client/test_client_cert.py",
        "tests/python/journal/test_journal_receivers.py",
        "tests/python/oauth/test_paging.py",
    ],
    "testing/_remote.py": [
        "tests/python/testing/test_remote_sandbox.py",
        "tests/python/sandbox/test_served_sandbox.py",
        "tests/python/webhooks/test_webhook_helpers.py",
        "tests/python/client/test_client_cert.py",
        "tests/python/oauth/test_paging.py",
    ],
    # `python -m fxpay` (issue 55): its own tests, and the journal and TLS tests that run its
    # `journal create` and `sandbox` commands.
    "__main__.py": [
        "tests/python/client/test_cli_edges.py",  # first: in-process, most mutants fail in a second
        "tests/python/client/test_cli.py",
        "tests/python/journal/test_journal_identity.py::test_python_m_fxpay_journal_create",
        "tests/python/sandbox/test_sandbox_tls.py::test_the_cli_subcommand_serves_https_too",
    ],
    "testing/_cassette.py": ["tests/python/testing/test_cassette.py", "tests/python/testing/test_cassette_plugin.py"],
    "testing/_checks.py": ["tests/python/testing/test_checks.py", "tests/python/testing/test_remote_sandbox.py"],
    "testing/_webhooks.py": ["tests/python/webhooks/test_webhook_helpers.py"],
    "_otel.py": ["tests/python/client/test_tracing.py"],
    "_raw.py": ["tests/python/client/test_raw_response.py", "tests/python/client/test_request_ids.py"],
    "_redis.py": ["tests/python/oauth/test_redis_store.py", "tests/python/journal/test_journal_calls.py"],
    # The journals (issue 55): the test files that run their code and each take seconds,
    # not the Celery, Dask, Django or subprocess-heavy chaos files.
    "_later.py": [
        "tests/python/journal/test_journal_one_flush.py",
        "tests/python/journal/test_journal_races.py",
        "tests/python/journal/test_journal_fork_locks.py",
        # The flusher of the journals over Python's storage (a redis-py client, a psycopg
        # callable): results written, a refused commit tried again on a turn of its own.
        "tests/python/journal/test_journal_python_store_results.py",
        "tests/python/journal/test_journal_redis_client.py",
        # The flusher's pace: the gathering sleep, a timed wait (no polling), no retry at exit.
        "tests/python/journal/test_journal_flusher.py",
    ],
    # The journals package (issue 55 item 3 split journals.py and postgres_journal.py, one
    # module per store): each module's entry the files that run its code.
    "journals/_base.py": [
        "tests/python/journal/test_journal_one_flush.py",
        # `payout_progress` and `_row_status`: every status, `since`, on every journal.
        "tests/python/journal/test_payout_fanout_progress.py",
        # `leased`, and the Python stores' results riding the next commit (`_swap_ready`).
        "tests/python/journal/test_payout_pressure.py::test_leased_lists_the_keys_held_under_a_lease",
        "tests/python/journal/test_journal_group_commit.py",
        "tests/python/journal/test_journal_python_store_results.py",
        # `_swap_begun`: a swap written at once leaves another key's waiting result be.
        "tests/python/journal/test_journal_redis_client.py::test_a_swap_of_another_key_leaves_a_waiting_result_for_its_commit",
        # `find` over Python's storage: a result read back while it waits, and once written.
        "tests/python/journal/test_journal_redis_client.py::test_a_result_waiting_for_its_commit_is_read_by_every_journal_of_its_place_only",
        "tests/python/journal/test_journal_redis_client.py::test_find_reads_a_result_back_to_its_key_and_a_swap_may_drop_the_result",
        "tests/python/journal/test_journal_redis_client.py::test_find_of_a_waiting_result_gives_no_key_that_now_holds_another",
        # `complete_spot`: the receivers record a spot deal's dealId on its entry.
        "tests/python/journal/test_journal_receivers.py",
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_races.py",
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_journal_holes.py::test_a_wrong_timeout_is_a_configuration_error",
        "tests/python/journal/test_journal_holes.py::test_wrong_types_of_the_new_settings_are_type_errors",
        "tests/python/journal/test_journal_postgres.py::test_wrong_types_and_values_are_refused",
    ],
    "journals/__init__.py": [
        "tests/python/journal/test_journal_receivers.py",
        "tests/python/journal/test_spot_settles.py",
        "tests/python/journal/test_notifications_forward.py",
        "tests/python/journal/test_journal_calls.py",
    ],
    "journals/memory.py": [
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_fork_locks.py",
    ],
    "journals/sqlite.py": [
        "tests/python/journal/test_journal_one_flush.py",
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_races.py",
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_journal_holes.py",
    ],
    "journals/redis.py": [
        # A journal over a client given (its checks run in Python), the helpers (1 s).
        "tests/python/journal/test_journal_redis_client.py",
        "tests/python/journal/test_journal_one_flush.py",
        "tests/python/journal/test_journal_group_commit.py",
        "tests/python/journal/test_journal_calls.py",
        "tests/python/journal/test_journal_identity.py",
        "tests/python/journal/test_journal_redis_connection.py",
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_journal_holes.py::test_a_wrong_timeout_is_a_configuration_error",
        "tests/python/journal/test_journal_holes.py::test_wrong_types_of_the_new_settings_are_type_errors",
    ],
    "journals/postgres.py": [
        "tests/python/journal/test_journal_postgres.py",
        "tests/python/journal/test_postgres_sqlalchemy.py",
        # The journal's identity (`create`, `_identity`, the refusals of a lost table), a
        # journal over a callable (Python's storage: its results ride the next commit),
        # two claims of one key in one group commit.
        "tests/python/journal/test_journal_identity_postgres.py",
        "tests/python/journal/test_journal_python_store_results.py",
        "tests/python/journal/test_journal_group_commit_edges.py::test_two_claims_of_one_key_in_one_postgres_group_commit_make_one_claim",
        "tests/python/journal/test_journal_group_commit_edges.py::test_claims_of_two_keys_in_one_postgres_group_commit_are_one_insert",
        # Forks: the core's store hands a child what waits; psycopg's makes its own locks,
        # waiting room and group commit in the child.
        "tests/python/journal/test_journal_one_flush.py::test_a_forked_child_replays_the_result_its_parent_still_holds",
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_journal_group_commit.py::test_a_child_forked_while_a_thread_holds_the_group_commits_lock_does_not_hang",
        "tests/python/journal/test_journal_calls.py::test_a_result_the_core_could_not_record_is_logged_with_its_resolve_call",
    ],
    # The documented path of the PostgreSQL journal's names (a re-export).
    "postgres_journal.py": [
        "tests/python/journal/test_journal_postgres.py::test_the_documented_module_path_names_the_journal_packages_own_objects"
    ],
    # The group commit of the Python Redis (redis-py client) and PostgreSQL journals: its
    # edges on the class itself (seconds; first, so that most mutants fail there), then its
    # batching, commit delay, fork reset and failures on real servers (about 20 s).
    "_group_commit.py": [
        "tests/python/journal/test_journal_group_commit_edges.py",
        "tests/python/journal/test_journal_group_commit.py",
    ],
    # The one fork registry: the fork tests of the journals, the Redis bucket and the token store
    # (9 s together; the bucket's other tests, which register buckets, are a second of it).
    "_forks.py": [
        "tests/python/journal/test_journal_fork_locks.py",
        "tests/python/journal/test_rate_limit_bucket.py",
        "tests/python/oauth/test_redis_store.py::test_a_child_forked_while_a_thread_holds_the_pools_lock_uses_a_pool_of_its_own",
        "tests/python/journal/test_journal_postgres.py::test_a_child_forked_while_a_thread_is_inside_a_call_has_its_own_connection",
    ],
    # RateLimit(redis=)'s bucket: its own tests (a pool per process, a fork with the pool's
    # lock held), then those that make one (types, keys, two processes, a fork, Redis down,
    # awaitable calls), not the sandbox's own limit (25 s, no bucket).
    "_rate_limit.py": [
        "tests/python/journal/test_rate_limit_bucket.py",
        "tests/python/journal/test_payout_pressure.py::test_an_unnamed_shared_rate_limit_keys_its_exact_rate",
        "tests/python/journal/test_payout_pacing.py::test_wrong_types_and_values",
        "tests/python/journal/test_payout_pacing.py::test_two_processes_sharing_a_redis_rate_limit_stay_within_it",
        "tests/python/journal/test_payout_pacing.py::test_a_forked_child_uses_the_shared_rate_limit",
        "tests/python/journal/test_payout_pacing.py::test_a_redis_that_is_down_falls_back_to_the_process_bucket",
        "tests/python/journal/test_payout_pacing.py::test_awaitable_calls_and_from_env_take_turns_too",
    ],
    "__init__.py": ["tests/python/client/test_lazy_import.py"],
    "_payouts.py": [
        "tests/python/journal/test_payout_tables.py",
        "tests/python/journal/test_payouts.py",
        "tests/python/client/test_twins.py",
    ],
    "contrib/receiver.py": [
        "tests/python/webhooks/test_webhooks.py",
        "tests/python/webhooks/test_receivers_once.py",
        "tests/python/webhooks/test_webhooks_e2e.py",
        "tests/python/journal/test_journal_receivers.py",
    ],
    "contrib/django.py": [
        "tests/python/webhooks/test_webhooks.py",
        "tests/python/webhooks/test_receivers_once.py",
        "tests/python/webhooks/test_webhooks_e2e.py",
        "tests/python/journal/test_journal_receivers.py",
    ],
    "contrib/fastapi.py": [
        "tests/python/webhooks/test_webhooks.py",
        "tests/python/webhooks/test_receivers_once.py",
        "tests/python/webhooks/test_webhooks_e2e.py",
        "tests/python/journal/test_journal_receivers.py",
    ],
}

FLIP: dict[type, type] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass
class Mutant:
    file: str
    line: int
    what: str
    source: str


def _nodes_in_functions(tree: ast.Module) -> Iterator[ast.AST]:
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from ast.walk(fn)


class _Replace(ast.NodeTransformer):
    """Puts `new` in the place of `old` (found by identity)."""

    def __init__(self, old: ast.AST, new: ast.AST) -> None:
        self.old, self.new = old, new

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.old:
            return self.new
        return self.generic_visit(node)


def mutants_of(path: Path) -> Iterator[Mutant]:
    text = path.read_text()
    tree = ast.parse(text)
    targets = list(_nodes_in_functions(tree))
    seen: set[str] = set()
    for i, node in enumerate(targets):
        for what, change in _changes(node):
            mutated = copy.deepcopy(tree)
            twin = list(_nodes_in_functions(mutated))[i]
            result = change(twin)  # type: ignore[operator]
            if result is False:
                continue
            if isinstance(result, ast.AST) and result is not twin:
                mutated = _Replace(twin, result).visit(mutated)
            ast.fix_missing_locations(mutated)
            source = ast.unparse(mutated)
            if source in seen:
                continue
            seen.add(source)
            yield Mutant(path.name, getattr(node, "lineno", 0), what, source)


def _changes(node: ast.AST) -> Iterator[tuple[str, object]]:  # one case per mutation
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            if type(op) in FLIP:

                def flip(n: ast.Compare, k: int = k) -> bool:
                    n.ops[k] = FLIP[type(n.ops[k])]()
                    return True

                yield f"{type(op).__name__} -> {FLIP[type(op)].__name__}", flip
    elif isinstance(node, ast.BoolOp):

        def swap(n: ast.BoolOp) -> bool:
            n.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
            return True

        yield ("and -> or" if isinstance(node.op, ast.And) else "or -> and"), swap
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):

        def drop_not(n: ast.UnaryOp) -> ast.AST:
            return n.operand

        yield "not x -> x", drop_not
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):

        def negate(n: ast.Constant) -> bool:
            n.value = not n.value
            return True

        yield f"{node.value} -> {not node.value}", negate
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
        for value in (True, False):

            def fix(n: ast.If, value: bool = value) -> bool:
                n.test = ast.Constant(value)
                return True

            yield f"condition -> {value}", fix
    elif (
        isinstance(node, ast.Return) and node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None)
    ):

        def none(n: ast.Return) -> bool:
            n.value = ast.Constant(None)
            return True

        yield "return x -> return None", none
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.While, ast.With, ast.Try)):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None) or []
            for k, stmt in enumerate(stmts):
                if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)) and not (
                    isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                ):

                    def to_pass(n: ast.AST, field: str = field, k: int = k) -> bool:
                        getattr(n, field)[k] = ast.Pass()
                        return True

                    yield f"line {stmt.lineno}: {ast.unparse(stmt).splitlines()[0][:60]!r} -> pass", to_pass


def _pytest(
    args: list[str], timeout: float, pythonpath: Path | None, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """One pytest process (None when it runs past `timeout`). A mutant that makes a test hang
    (a lock never released) fails that test after 60 s (pytest-timeout) rather than using up
    the whole run's time."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--timeout=60", *args]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env_extra or {})}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), os.environ.get("PYTHONPATH", "")]))
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None


def run_tests(tests: list[str], timeout: float, pythonpath: Path | None = None, failed: list[str] | None = None) -> str:
    """The outcome of one test run; a run that fails appends the test ids it names as failed
    to ``failed`` (so that a catch can be checked: a failure the mutant did not cause)."""
    r = _pytest(tests, timeout, pythonpath)
    if r is None:
        return "timeout"
    if _passed(r):
        return "missed"
    if failed is not None:
        failed.extend(re.findall(r"^(?:FAILED|ERROR) (\S+)", r.stdout, re.M))
    return "caught"


pytest_no_tests = 5


def _passed(r: subprocess.CompletedProcess[str]) -> bool:
    """Whether a pytest run passed: every test passed, or none was left to run (5: every one
    deselected, as already run on this mutant)."""
    return r.returncode in (0, pytest_no_tests)


def header_spans(text: str) -> list[tuple[int, int]]:
    """Each statement's lines: a simple statement's all, a compound one's header only (up to
    its body), as coverage counts a line run."""
    spans = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt):
            body = getattr(node, "body", None)
            end = body[0].lineno - 1 if isinstance(body, list) and body else node.end_lineno or node.lineno
            spans.append((node.lineno, max(end, node.lineno)))
    return spans


class Coverage:
    """Which tests run which line of one file, and how long each test takes: the file's
    tests run once in a job, under pytest-cov with a context per test."""

    def __init__(self, job: Job, name: str, tests: list[str], timeout: float) -> None:
        import coverage  # only here: --by-coverage needs pytest-cov

        data_file = job.dir / ".coverage"
        args = ["--cov", str(job.python / "fxpay"), "--cov-context=test", "--cov-report=", "--durations=0", "-vv"]
        r = _pytest([*args, *job.tests(tests)], timeout, job.python, {"COVERAGE_FILE": str(data_file)})
        if r is None or r.returncode != 0:
            tail = "timeout" if r is None else r.stdout[-3000:]
            raise SystemExit(f"pymutants: {name}'s tests fail under coverage:\n{tail}")
        out = r.stdout
        prefix = str(job.dir.relative_to(ROOT)) + "/"
        self.seconds: dict[str, float] = {}
        for line in out.splitlines():
            m = re.match(r"^([0-9.]+)s (setup|call|teardown) +(\S.*)$", line)
            if m:
                node = m.group(3).removeprefix(prefix)
                self.seconds[node] = self.seconds.get(node, 0.0) + float(m.group(1))
        cov = coverage.CoverageData(basename=str(data_file))
        cov.read()
        self.by_line: dict[int, set[str]] = {}
        for lineno, contexts in cov.contexts_by_lineno(str(job.path(name))).items():
            self.by_line[lineno] = {c.rsplit("|", 1)[0].removeprefix(prefix) if "|" in c else "" for c in contexts}
        self.spans = header_spans((PKG / name).read_text())
        print(f"{name}: {len(self.by_line)} lines run by {len(self.seconds)} tests", flush=True)

    def tests_for(self, line: int) -> list[str] | None:
        """The tests that run the statement of `line`, quickest first; None when one ran it
        outside any test (the whole list then)."""
        inside = [span for span in self.spans if span[0] <= line <= span[1]]
        first, last = min(inside, key=lambda s: s[1] - s[0]) if inside else (line, line)
        found: set[str] = set()
        for n in range(first, last + 1):
            found |= self.by_line.get(n, set())
        found.discard("")  # run outside a test (at import): the tests that run it too, if any
        return sorted(found, key=lambda t: (self.seconds.get(t, 0.0), t)) or None

    def not_again(self, ran: list[str], job: Job) -> list[str]:
        """`--deselect` for the whole list's run: the tests already run on this mutant (by
        exact node id: one that is the prefix of another, `t[a]` of `t[ab]`, is run again)."""
        prefix = str(job.dir.relative_to(ROOT)) + "/"
        out = []
        for t in ran:
            if not any(o != t and o.startswith(t) for o in self.seconds):
                out += ["--deselect", prefix + t]
        return out


CANARY = 'raise ImportError("pymutants canary: this copy of the file was imported")\n'


class Job:
    """A copy of the package for one job: `<dir>/python/fxpay`, imported through PYTHONPATH;
    and of `tests/python`, so that the tests stay as they were when the run began (`docs/`,
    which two tests read, is a link to the worktree's)."""

    def __init__(self, k: int) -> None:
        # One folder per run (its process id), so that two runs at once never share a copy.
        self.dir = ROOT / "target" / "pymutants-jobs" / str(os.getpid()) / f"job{k}"
        self.python = self.dir / "python"
        shutil.rmtree(self.dir, ignore_errors=True)
        skip = shutil.ignore_patterns("__pycache__")
        shutil.copytree(PKG, self.python / "fxpay", ignore=skip)
        shutil.copytree(ROOT / "tests" / "python", self.dir / "tests" / "python", ignore=skip)
        (self.dir / "docs").symlink_to(ROOT / "docs")

    def tests(self, tests: list[str]) -> list[str]:
        """The job's copies of the test files."""
        return [str(self.dir / t) if t.startswith("tests/") else t for t in tests]

    def check_import(self) -> None:
        """Stops the run unless `fxpay` and its extension load from this copy."""
        code = "import fxpay, fxpay._fxpay as e; print(fxpay.__file__); print(e.__file__)"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.python), os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, check=True)
        for line in out.stdout.split():
            if not Path(line).resolve().is_relative_to(self.python.resolve()):
                raise SystemExit(f"pymutants: {line} is not in the job's copy {self.python}; --jobs cannot run here")

    def path(self, name: str) -> Path:
        return self.python / "fxpay" / name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=sorted(TESTS), help="files of python/fxpay to mutate")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's test run")
    ap.add_argument("--jobs", type=int, default=0, help="mutants run at a time, each in its own copy of the package (0: in place)")
    ap.add_argument("--report", default=str(ROOT / "target" / "pymutants.json"))
    ap.add_argument("--list", action="store_true", help="only list the mutants")
    ap.add_argument("--missed-in", metavar="REPORT", help="only the mutants an earlier report (its JSON) lists as missed")
    ap.add_argument("--lines", nargs="*", default=[], metavar="FIRST-LAST", help="only the mutants of these lines (each range inclusive)")
    ap.add_argument("--by-coverage", action="store_true", help="each mutant first runs the tests that run its line (needs --jobs)")
    ap.add_argument("--done-in", nargs="*", default=[], metavar="LOG", help="leave out the mutants earlier runs logged")
    args = ap.parse_args()
    if args.by_coverage and args.jobs <= 0:
        ap.error("--by-coverage needs --jobs")
    again: set[tuple[object, object, object]] | None = None
    if args.missed_in:
        earlier = json.loads(Path(args.missed_in).read_text())["mutants"]
        again = {(r["file"], r["line"], r["mutation"]) for r in earlier if r["outcome"] == "missed"}
    spans = [tuple(int(n) for n in span.split("-", 1)) for span in args.lines]
    done: set[tuple[str, int, str]] = set()
    for log in args.done_in:  # the lines `_record` prints
        for line in Path(log).read_text().splitlines():
            got = re.match(r"^(?:caught|missed|timeout) +([^:]+):(\d+): (.*) \([0-9.]+ s[,)]", line)
            if got:
                done.add((got.group(1), int(got.group(2)), got.group(3)))

    def wanted(m: Mutant) -> bool:
        if spans and not any(first <= m.line <= last for first, last in spans):
            return False
        if (m.file, m.line, m.what) in done:
            return False
        return again is None or (m.file, m.line, m.what) in again

    if args.list:
        for name in args.only:
            for m in mutants_of(PKG / name):
                if wanted(m):
                    print(f"{m.file}:{m.line}: {m.what}")
        return 0

    results: list[dict[str, object]] = []
    for name in args.only:
        chosen = [m for m in mutants_of(PKG / name) if wanted(m)]
        ran = (
            run_in_place(name, chosen, args.timeout)
            if args.jobs <= 0
            else run_in_jobs(name, chosen, args.timeout, args.jobs, args.by_coverage)
        )
        if ran is None:
            return 2
        results.extend(ran)
    counts = {k: sum(1 for r in results if r["outcome"] == k) for k in ("caught", "missed", "timeout")}
    print(json.dumps(counts))
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps({"counts": counts, "mutants": results}, indent=1))
    return 1 if counts["missed"] else 0


def _record(m: Mutant, outcome: str, started: float, selected: int | None = None, failed: list[str] | None = None) -> dict[str, object]:
    by = "" if selected is None else f", {selected} tests run its line"
    by += f", failed: {' '.join(Path(t).name for t in failed[:3])}" if failed else ""
    print(f"{outcome:8} {m.file}:{m.line}: {m.what} ({time.monotonic() - started:.1f} s{by})", flush=True)
    return {"file": m.file, "line": m.line, "mutation": m.what, "outcome": outcome, "failed": failed or []}


def run_in_place(name: str, chosen: list[Mutant], timeout: float) -> list[dict[str, object]] | None:
    path = PKG / name
    original = path.read_text()
    tests = TESTS[name]
    baseline = run_tests(tests, timeout)
    if baseline != "missed":
        print(f"{name}: the tests fail without any mutant ({baseline}); skipped", file=sys.stderr)
        return None
    results = []
    try:
        for m in chosen:
            path.write_text(m.source)
            started = time.monotonic()
            outcome = run_tests(tests, timeout)
            path.write_text(original)
            results.append(_record(m, outcome, started))
    finally:
        path.write_text(original)
    return results


def run_in_jobs(name: str, chosen: list[Mutant], timeout: float, jobs: int, by_coverage: bool = False) -> list[dict[str, object]] | None:
    tests = TESTS[name]
    original = (PKG / name).read_text()
    pool = [Job(k) for k in range(jobs)]

    def check(job: Job) -> str | None:
        """None when the job is sound: its tests pass on the copy and fail with the canary."""
        job.check_import()
        r = _pytest(job.tests(tests), timeout, job.python)
        if r is None or not _passed(r):
            # What failed, so that a test that fails only sometimes shows its cause.
            said = "" if r is None else "\n" + (r.stdout + r.stderr)[-4000:]
            return f"the tests fail without any mutant ({'timeout' if r is None else 'caught'}){said}"
        job.path(name).write_text(CANARY)
        try:
            canary = run_tests(job.tests(tests), timeout, job.python)
        finally:
            job.path(name).write_text(original)
        if canary != "caught":
            return f"the tests did not import the job's copy of the file (canary {canary})"
        return None

    with ThreadPoolExecutor(jobs) as ex:
        problems = [p for p in ex.map(check, pool) if p is not None]
    if problems:
        print(f"{name}: {problems[0]}; skipped", file=sys.stderr)
        shutil.rmtree(pool[0].dir.parent, ignore_errors=True)
        return None

    covered = Coverage(pool[0], name, tests, timeout * 4) if by_coverage else None
    free: queue.Queue[Job] = queue.Queue()
    for job in pool:
        free.put(job)
    lock = threading.Lock()

    def one(m: Mutant) -> dict[str, object]:
        job = free.get()
        try:
            job.path(name).write_text(m.source)
            started = time.monotonic()
            # A statement replaced by `pass` is labelled with its body's holder's line; its own
            # line is in the label.
            at = re.match(r"line (\d+): ", m.what)
            first = covered.tests_for(int(at.group(1)) if at else m.line) if covered is not None else None
            failed: list[str] = []
            outcome = run_tests(job.tests(first), timeout, job.python, failed) if first else "missed"
            if outcome == "missed":  # only the whole list counts a mutant missed (less what ran)
                again = covered.not_again(first, job) if covered is not None and first else []
                outcome = run_tests([*again, *job.tests(tests)], timeout, job.python, failed)
            job.path(name).write_text(original)
            with lock:
                return _record(m, outcome, started, None if first is None else len(first), failed)
        finally:
            job.path(name).write_text(original)
            free.put(job)

    try:
        with ThreadPoolExecutor(jobs) as ex:
            return list(ex.map(one, chosen))  # in the order of the mutants
    finally:
        shutil.rmtree(pool[0].dir.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

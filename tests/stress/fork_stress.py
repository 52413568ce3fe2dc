"""The fork stress harness (tests/stress/README.md): forks while 8 threads make keyed calls.

    .venv/bin/python tests/stress/fork_stress.py [--forks N] [--journal NAME ...] [--threads 8]

For each journal (``MemoryJournal``, ``SqliteJournal`` on a file, ``RedisJournal`` on a
redis-server of its own with ``appendonly yes``, ``PostgresJournal`` on a PostgreSQL cluster
of its own made with ``initdb``; both servers on 127.0.0.1 only): the parent holds a
``Client`` on the embedded sandbox (``fxpay.testing.Sandbox``) with that journal; 8 threads
make keyed ``create_quote`` calls in a loop on it, and the main thread forks ``--forks``
times. Each child makes one keyed call with a fresh key on a fresh ``Client`` that uses the
journal object it inherited (API.md: journals work in a child forked while other threads of
the parent were inside a claim or a commit), checks that the journal holds its key as
``done``, and leaves with ``os._exit``. The parent waits for each child up to ``--deadline``
seconds (30); a child still running then is hung: its native stacks (gdb, where installed)
are added to the Python stacks that its own ``faulthandler`` wrote at ``--watchdog`` seconds
(20), the file is kept, and the child is killed with SIGKILL.

Per journal it prints forks, ok, failed (by reason), hung, slow (ok, but past the watchdog),
the parent threads' calls and errors, and the wall time. Exit status: 0 when no child hung or
failed and no parent call failed, 1 otherwise.

``--forks`` counts per journal: ``just stress`` runs 3,000 forks on each of the four journals
(12,000 in all). The full run of 2026-11-29 (`just stress --seed 55`, debug build, 28.6 min on
2 shared cores): 12,000 forks, 1 hung (a `MemoryJournal` child: its lock held by a parent
thread at the fork; 0 of 9,000 with SQLite, Redis, PostgreSQL), 0 failed; details in
tests/stress/README.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import faulthandler
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import fxpay
import fxpay.testing

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "chaos"))  # the chaos harness's redis-server and PostgreSQL
from chaos_support import Postgres, Redis  # noqa: E402

JOURNALS = ("memory", "sqlite", "redis", "postgres")


@dataclass
class Options:
    forks: int = 3000
    journals: tuple[str, ...] = JOURNALS
    threads: int = 8
    deadline: float = 30.0
    watchdog: float = 20.0
    pause: float = 0.02  # the most the main thread sleeps between forks (a random share of it)
    seed: int | None = None
    folder: Path | None = None  # where hung children's stacks are kept (a new temporary folder)
    log: Callable[[str], None] = print


@dataclass
class Result:
    journal: str
    forks: int = 0
    ok: int = 0
    failed: collections.Counter[str] = field(default_factory=collections.Counter)
    hung: list[Path] = field(default_factory=list)
    slow: int = 0
    slowest: float = 0.0
    parent_calls: int = 0
    parent_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    wall: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.failed and not self.hung and not self.parent_errors and self.ok == self.forks

    def line(self) -> str:
        failed = sum(self.failed.values())
        return (
            f"{self.journal:<9} forks {self.forks:>5}  ok {self.ok:>5}  failed {failed:>3}  hung {len(self.hung):>3}  "
            f"slow {self.slow:>3}  slowest child {self.slowest:5.2f} s  parent calls {self.parent_calls:>6} "
            f"(errors {sum(self.parent_errors.values())})  wall {self.wall:7.1f} s"
        )

    def details(self) -> list[str]:
        out = [f"  failed: {n} x {reason}" for reason, n in self.failed.most_common()]
        out += [f"  parent error: {n} x {reason}" for reason, n in self.parent_errors.most_common()]
        out += [f"  hung, stacks in {p}" for p in self.hung]
        return out


def quote(c: fxpay.Client, key: str) -> str:
    return c.create_quote(buy_currency="USD", buy_amount=Decimal("100"), sell_currency="AUD", idempotency_key=key)


@contextlib.contextmanager
def journal_of(kind: str, folder: Path) -> Iterator[Any]:
    """A journal of ``kind``, on a server of its own where it needs one, removed afterwards."""
    if kind == "memory":
        yield fxpay.MemoryJournal()
    elif kind == "sqlite":
        sqlite = fxpay.SqliteJournal(folder / "journal.db")
        try:
            yield sqlite
        finally:
            sqlite.close()
    elif kind == "redis":
        (folder / "redis").mkdir()
        server = Redis(folder / "redis")  # 127.0.0.1, appendonly yes, appendfsync always
        server.start()
        try:
            redis = fxpay.RedisJournal(server.url, prefix="stress:")
            redis.create()
            yield redis
        finally:
            server.kill()
    elif kind == "postgres":
        pg = Postgres()  # initdb, 127.0.0.1 only, no Unix socket
        try:
            pg.start()
            postgres = fxpay.PostgresJournal(pg.conninfo, table="stress")
            postgres.create()
            try:
                yield postgres
            finally:
                postgres.close()
        finally:
            pg.remove()
    else:
        raise ValueError(f"no journal named {kind!r} (one of {', '.join(JOURNALS)})")


def _child(sb: fxpay.testing.Sandbox, journal: Any, key: str, report: int, dump: Path, watchdog: float) -> None:
    """In the child: one keyed call on a fresh client with the inherited journal. Never returns."""
    code, message = 1, b"?"
    try:
        with open(dump, "w") as stacks:
            faulthandler.dump_traceback_later(watchdog, exit=False, file=stacks)
            c = sb.client(journal=journal)
            try:
                quote(c, key)
            finally:
                c.close()
            entry = journal.get(key)
            if entry is None or entry.state != "done":
                raise AssertionError(f"the journal holds {entry!r} for the child's key")
            faulthandler.cancel_dump_traceback_later()
        code, message = 0, b"ok"
    except BaseException as e:
        message = f"{type(e).__name__}: {e}".splitlines()[0][:300].encode()
    finally:
        with contextlib.suppress(BaseException):
            os.write(report, message)
        os._exit(code)


def _wait(pid: int, deadline: float) -> int | None:
    """The child's exit status, or None when it is still running at ``deadline`` (monotonic)."""
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if poller.poll(left * 1000):
                _, status = os.waitpid(pid, 0)
                return status
    finally:
        os.close(pidfd)


def _native_stacks(pid: int) -> str:
    gdb = shutil.which("gdb")
    if gdb is None:
        return "(gdb is not installed: no native stacks)\n"
    out = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"], capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr


def run_journal(kind: str, opts: Options, folder: Path, rng: random.Random) -> Result:
    result = Result(kind)
    (folder / kind).mkdir()
    started = time.monotonic()
    with fxpay.testing.Sandbox() as sb, journal_of(kind, folder / kind) as journal:
        c = sb.client(journal=journal)
        stop = threading.Event()
        made = [0] * opts.threads
        lock = threading.Lock()

        def work(t: int) -> None:
            n = 0
            while not stop.is_set():
                try:
                    quote(c, f"w{t}-{n}")
                except Exception as e:
                    with lock:
                        result.parent_errors[f"{type(e).__name__}: {e}".splitlines()[0][:200]] += 1
                n += 1
                made[t] = n

        workers = [threading.Thread(target=work, args=(t,), daemon=True, name=f"keyed-{t}") for t in range(opts.threads)]
        for w in workers:
            w.start()
        try:
            while min(made) == 0:  # every thread is making calls
                time.sleep(0.01)
            for i in range(opts.forks):
                time.sleep(rng.uniform(0, opts.pause))
                dump = folder / kind / f"child-{i}.stacks"
                rfd, wfd = os.pipe()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
                    pid = os.fork()
                if pid == 0:
                    os.close(rfd)
                    _child(sb, journal, f"child-{i}", wfd, dump, opts.watchdog)
                os.close(wfd)
                forked = time.monotonic()
                result.forks += 1
                status = _wait(pid, forked + opts.deadline)
                took = time.monotonic() - forked
                if status is None:
                    with open(dump, "a") as f:
                        f.write(f"\n--- pid {pid}, child {i} of the {kind} journal, hung {took:.1f} s: native stacks\n")
                        f.write(_native_stacks(pid))
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    result.hung.append(dump)
                    opts.log(f"{kind}: child {i} (pid {pid}) hung; stacks in {dump}")
                else:
                    message = os.read(rfd, 1024).decode(errors="replace")
                    code = os.waitstatus_to_exitcode(status)
                    result.slowest = max(result.slowest, took)
                    if code == 0 and message == "ok":
                        result.ok += 1
                        if took >= opts.watchdog:
                            result.slow += 1  # its stacks were dumped: keep them
                        else:
                            dump.unlink(missing_ok=True)
                    else:
                        result.failed[f"exit {code}: {message or '(nothing reported)'}"] += 1
                os.close(rfd)
                if (i + 1) % 500 == 0:
                    opts.log(f"{kind}: {i + 1} forks, {len(result.hung)} hung, {sum(result.failed.values())} failed")
        finally:
            stop.set()
            for w in workers:
                w.join(60)
            result.parent_calls = sum(made)
            c.close()
    result.wall = time.monotonic() - started
    return result


def run(opts: Options) -> list[Result]:
    seed = opts.seed if opts.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    folder = opts.folder or Path(tempfile.mkdtemp(prefix="fxpay-stress-"))
    folder.mkdir(parents=True, exist_ok=True)
    opts.log(
        f"fork stress: {opts.forks} forks per journal, {opts.threads} threads making keyed calls, "
        f"journals {', '.join(opts.journals)}, seed {seed}, folder {folder}"
    )
    results = []
    for kind in opts.journals:
        result = run_journal(kind, opts, folder, rng)
        opts.log(result.line())
        for line in result.details():
            opts.log(line)
        results.append(result)
    if all(r.clean and r.slow == 0 for r in results):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        opts.log(f"kept {folder}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--forks", type=int, default=3000, help="forks per journal (3000)")
    parser.add_argument("--journal", action="append", choices=JOURNALS, help="run this journal only (repeatable)")
    parser.add_argument("--threads", type=int, default=8, help="parent threads making keyed calls (8)")
    parser.add_argument("--deadline", type=float, default=30.0, help="seconds before a child counts as hung (30)")
    parser.add_argument("--watchdog", type=float, default=20.0, help="seconds before a child dumps its stacks (20)")
    parser.add_argument("--seed", type=int, help="the seed of the pauses between forks")
    parser.add_argument("--folder", type=Path, help="where hung children's stacks are kept")
    args = parser.parse_args(argv)
    opts = Options(
        forks=args.forks,
        journals=tuple(args.journal or JOURNALS),
        threads=args.threads,
        deadline=args.deadline,
        watchdog=args.watchdog,
        seed=args.seed,
        folder=args.folder,
    )
    started = time.monotonic()
    results = run(opts)
    forks = sum(r.forks for r in results)
    hung = sum(len(r.hung) for r in results)
    failed = sum(sum(r.failed.values()) for r in results)
    print(f"total: {forks} forks, {hung} hung, {failed} failed, wall {time.monotonic() - started:.1f} s")
    return 0 if all(r.clean for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

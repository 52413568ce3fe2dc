#!/usr/bin/env python3
"""The price of a keyed call, per journal (issue 56 item 4): ``create_quote(...,
idempotency_key=...)`` with no journal (the unkeyed baseline: no key), ``MemoryJournal``,
``SqliteJournal``, ``RedisJournal`` and ``PostgresJournal``, at concurrency 1 (a loop), 8
threads and async 64 (``create_quote_async``, 64 tasks under ``asyncio.gather`` sharing the
calls), against the served sandbox (``python -m fxpay.sandbox`` in a process of its own, so
that the client process is measured alone).

Per cell:

- **instructions per call**: the client process (every thread) under ``valgrind
  --tool=callgrind``, run twice after the same warm-up, with N = 100 and N = 500 calls
  (``--n``); (total at 500 - total at 100) / 400, as bench/instructions.py counts.
- **client CPU µs per call**: a client process (not under valgrind) warms up, then makes
  ``--rounds`` rounds of ``--calls`` calls; each round's ``resource.getrusage(RUSAGE_SELF)``
  (user + system, every thread) over its calls; the median of the rounds. The host has 2 cores
  shared with other work: CPU time moves with its load, instructions do not.
- **flushes per call**: ``fsync``/``fdatasync`` system calls made during the rounds by the
  process that makes the journal durable, counted by ``strace -f --seccomp-bpf -ttt -e
  trace=fsync,fdatasync`` started with that process and kept to the rounds' wall-clock window:
  the client process for SQLite, ``redis-server`` (``appendonly yes``, ``appendfsync always``)
  for Redis, the whole PostgreSQL cluster (``postgres`` started by the bench under strace, its
  backends and WAL writer followed) for PostgreSQL. **calls per flush** is the inverse.
- **the disk's own flush rate**, measured in the same run on the same filesystem: 1 writer,
  and 8 writers (threads, a file each), each appending 4 KiB and calling ``fsync`` in a loop.

Redis (127.0.0.1, a free port) and PostgreSQL (``initdb`` in a temporary folder, 127.0.0.1,
``fsync`` and ``synchronous_commit`` on, as tests/python/journal/postgres_support.py makes
it) are servers of the bench's own; their journals are made once with ``python -m fxpay
journal create URL`` (an empty store is refused as not a journal).

    python bench/journal.py                                   # every journal; bench/results/journal.{md,json}
    python bench/journal.py --quick --journals memory,sqlite  # a smoke test; bench/results/quick/journal.md
    python bench/journal.py --journals redis --shapes loop --no-callgrind

Writes ``<out>.md`` and ``<out>.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

JOURNALS = ("none", "memory", "sqlite", "redis", "postgres")
JOURNAL_LABEL = {
    "none": "none (unkeyed)",
    "memory": "MemoryJournal",
    "sqlite": "SqliteJournal",
    "redis": "RedisJournal",
    "postgres": "PostgresJournal",
}
# Who makes the journal's flushes: the process strace counts them in.
FLUSHED_BY = {"sqlite": "client", "redis": "redis-server", "postgres": "postgres"}
SHAPES = ("loop", "8 threads", "async 64")
THREADS = 8
TASKS = 64
DEFAULT_N = (100, 500)
QUICK_N = (10, 30)
DEFAULT_WARMUP = 64
QUICK_WARMUP = 8
DEFAULT_CALLS = 500
QUICK_CALLS = 24
DEFAULT_ROUNDS = 5
QUICK_ROUNDS = 1
DISK_SECONDS = 2.0
QUICK_DISK_SECONDS = 0.3


# -- the client process ----------------------------------------------------------------------------


def _open_journal(cfg: dict[str, Any]) -> Any:
    import fxpay

    kind = cfg["journal"]
    if kind == "none":
        return None
    if kind == "memory":
        return fxpay.MemoryJournal()
    if kind == "sqlite":
        return fxpay.SqliteJournal(Path(cfg["folder"]) / f"journal-{os.getpid()}.db")
    if kind == "redis":
        return fxpay.RedisJournal(cfg["redis_url"], prefix=cfg["redis_prefix"])
    if kind == "postgres":
        return fxpay.PostgresJournal(cfg["postgres_url"], table=cfg["postgres_table"])
    raise SystemExit(f"unknown journal {kind!r}")


class Calls:
    """One client with the cell's journal; ``run(n)`` makes ``n`` calls in the cell's shape."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        import fxpay

        self.shape: str = cfg["shape"]
        self.keyed = cfg["journal"] != "none"
        self.journal = _open_journal(cfg)
        self.client = fxpay.Client(cfg["client_id"], cfg["client_secret"], base_url=cfg["base_url"], journal=self.journal)
        self.tag = f"{os.getpid()}-{time.monotonic_ns()}"
        self.counter = itertools.count()
        self.loop = asyncio.new_event_loop() if self.shape.startswith("async") else None

    def _key(self) -> str | None:
        return f"{self.tag}-{next(self.counter)}" if self.keyed else None

    def one(self) -> None:
        k = self._key()
        if k is None:
            self.client.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        else:
            self.client.create_quote(buy_currency="USD", buy_amount=100, sell_currency="AUD", idempotency_key=k)

    async def one_async(self) -> None:
        k = self._key()
        if k is None:
            await self.client.create_quote_async(buy_currency="USD", buy_amount=100, sell_currency="AUD")
        else:
            await self.client.create_quote_async(buy_currency="USD", buy_amount=100, sell_currency="AUD", idempotency_key=k)

    def run(self, n: int) -> None:
        if self.shape == "loop":
            for _ in range(n):
                self.one()
        elif self.shape == f"{THREADS} threads":
            self._threads(n)
        else:
            assert self.loop is not None
            self.loop.run_until_complete(self._tasks(n))

    def _threads(self, n: int) -> None:
        shares = [n // THREADS + (1 if i < n % THREADS else 0) for i in range(THREADS)]
        errors: list[BaseException] = []

        def work(share: int) -> None:
            try:
                for _ in range(share):
                    self.one()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(s,)) for s in shares]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    async def _tasks(self, n: int) -> None:
        shares = [n // TASKS + (1 if i < n % TASKS else 0) for i in range(TASKS)]

        async def work(share: int) -> None:
            for _ in range(share):
                await self.one_async()

        await asyncio.gather(*(work(s) for s in shares))

    def close(self) -> None:
        self.client.close()
        if self.loop is not None:
            self.loop.close()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker(argv: list[str]) -> None:
    """``--worker CONFIG_JSON [N]``: warms up; with N makes N calls and exits (the callgrind
    runs), without it serves ``run M`` lines from stdin, answering each with a JSON line (the
    CPU and wall-clock seconds of those M calls) until ``quit``."""
    cfg = json.loads(argv[0])
    calls = Calls(cfg)
    calls.run(cfg["warmup"])
    if len(argv) > 1:
        calls.run(int(argv[1]))
        calls.close()
        return
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] != ["run"]:
            break
        n = int(cmd[1])
        c0, t0 = _cpu(), time.time()
        calls.run(n)
        t1, c1 = time.time(), _cpu()
        print(json.dumps({"calls": n, "cpu": c1 - c0, "t0": t0, "t1": t1}), flush=True)
    calls.close()


# -- flushes: strace started with the flushing process -------------------------------------------


def strace_prefix(log: Path) -> list[str]:
    """strace following every thread and child, stopping only on the two flush calls (a
    seccomp filter: the other system calls run at full speed), with wall-clock timestamps."""
    return ["strace", "-f", "--seccomp-bpf", "-qq", "-ttt", "-e", "trace=fsync,fdatasync", "-e", "signal=none", "-o", str(log)]


_FLUSH = re.compile(r"^\d+\s+(\d+\.\d+)\s+(?:fsync|fdatasync)\(")


def flushes_between(log: Path, t0: float, t1: float) -> int:
    """The flush calls strace logged as started between ``t0`` and ``t1`` (wall clock)."""
    n = 0
    with contextlib.suppress(FileNotFoundError), log.open() as f:
        for line in f:
            m = _FLUSH.match(line)
            if m and t0 <= float(m.group(1)) <= t1:
                n += 1
    return n


# -- the servers -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait(check: Callable[[], object], proc: subprocess.Popen[bytes], what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            check()
            return
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
                raise SystemExit(f"{what} did not start{': ' + tail if tail else ''}") from None
            time.sleep(0.05)


def _journal_create(url: str, *extra: str) -> None:
    p = subprocess.run([sys.executable, "-m", "fxpay", "journal", "create", url, *extra], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"fxpay journal create {url}: {p.stdout}{p.stderr}")


class Redis:
    """redis-server on 127.0.0.1 (a free port), AOF with ``appendfsync always``, under strace."""

    def __init__(self, folder: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("redis-server is not installed (scripts/setup installs it)")
        folder.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.strace = folder / "strace.log"
        args = [exe, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(folder), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"]
        self.proc = _start_traced([*strace_prefix(self.strace), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.prefix = "fxpay-bench:"
        try:
            import redis

            def ping() -> None:
                r = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)
                try:
                    r.ping()
                finally:
                    r.close()

            _wait(ping, self.proc, "redis-server")
            _journal_create(self.url, "--prefix", self.prefix)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        # SIGTERM to redis-server (a shutdown that fsyncs the AOF and exits); strace ends with it.
        _stop_traced(self.proc, signal.SIGTERM)


class Postgres:
    """A PostgreSQL cluster of the bench's own: ``initdb`` as tests/python/journal/postgres_support.py
    does it (127.0.0.1, a free port, ``fsync`` and ``synchronous_commit`` on, run as ``nobody``
    when the bench runs as root), but ``postgres`` started directly, under strace."""

    def __init__(self) -> None:
        sys.path.insert(0, str(ROOT / "tests" / "python"))
        sys.path.insert(0, str(ROOT / "tests" / "python" / "journal"))
        from postgres_support import PostgresServer, _bin  # type: ignore[import-not-found]  # the tests' helper, off mypy's path

        self.server = PostgresServer()  # initdb, postgresql.conf
        self.strace: Path = self.server.folder / "strace.log"
        self.log: Path = self.server.folder / "server.log"
        cmd = [*strace_prefix(self.strace), *self.server._as, _bin("postgres"), "-D", str(self.server.data)]
        self.url = self.server.url
        self.table = "fxpay_bench_journal"
        try:
            with self.log.open("wb") as out:
                self.proc = _start_traced(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.server.folder)
            import psycopg

            _wait(lambda: psycopg.connect(self.server.conninfo, connect_timeout=2).close(), self.proc, "postgres", self.log)
            _journal_create(self.url, "--table", self.table)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if hasattr(self, "proc"):
            # SIGINT, a fast shutdown, to the postmaster (its backends are process groups of their
            # own); strace and runuser end with it.
            postmaster = None
            with contextlib.suppress(OSError, ValueError, IndexError):
                postmaster = int((self.server.data / "postmaster.pid").read_text().split()[0])
            _stop_traced(self.proc, signal.SIGINT, postmaster, timeout=60)
        shutil.rmtree(self.server.folder, ignore_errors=True)


def _start_traced(cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``cmd`` (strace running a server) as the leader of a process group of its own: the group
    is what :func:`_stop_traced` signals."""
    return subprocess.Popen(cmd, start_new_session=True, **kwargs)


def _stop_traced(proc: subprocess.Popen[bytes], sig: signal.Signals, pid: int | None = None, timeout: float = 30) -> None:
    """Stops a server started by :func:`_start_traced` under strace, and strace.

    strace running a program with ``-o`` blocks the fatal signals (its ``-I 3``), so a signal to
    strace alone would never reach the server (and a SIGKILL to strace would leave the server
    running, detached: how redis-server outlived the bench). So ``sig`` goes to the server: to
    ``pid``, or else to the whole group strace leads (strace ignores it); strace exits when the
    server has (strace -f waits for every process it traces). If strace is still running after
    ``timeout`` seconds, the whole group gets SIGKILL."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        if pid is not None:
            os.kill(pid, sig)
        else:
            os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # strace still runs, so its group exists
        proc.wait()


# -- the disk --------------------------------------------------------------------------------------


def disk_flush_rate(folder: Path, writers: int, seconds: float) -> dict[str, float]:
    """``writers`` threads, each appending 4 KiB to a file of its own and ``fsync``-ing it, for
    ``seconds``: flushes per second in all, and the median flush's latency in µs."""
    block = os.urandom(4096)
    stop_at = [0.0]
    lat: list[list[float]] = [[] for _ in range(writers)]
    barrier = threading.Barrier(writers + 1)

    def work(i: int) -> None:
        fd = os.open(folder / f"disk-{writers}-{i}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            barrier.wait()
            while time.perf_counter() < stop_at[0]:
                os.write(fd, block)
                t = time.perf_counter()
                os.fsync(fd)
                lat[i].append(time.perf_counter() - t)
        finally:
            os.close(fd)
            os.unlink(folder / f"disk-{writers}-{i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    stop_at[0] = t0 + seconds
    barrier.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    every = [x for xs in lat for x in xs]
    return {"writers": writers, "flushes": len(every), "per_second": len(every) / wall, "median_us": statistics.median(every) * 1e6}


# -- the run ---------------------------------------------------------------------------------------


@dataclass
class Env:
    base: dict[str, Any]  # the sandbox's address and credentials, the folders, the servers' URLs
    redis: Redis | None
    postgres: Postgres | None
    sandbox: Any = None  # measure.SandboxProcess: its count of the connections it accepted

    def cfg(self, journal: str, shape: str, warmup: int) -> dict[str, Any]:
        return {**self.base, "journal": journal, "shape": shape, "warmup": warmup}

    def strace_log(self, journal: str) -> Path | None:
        if journal == "redis" and self.redis:
            return self.redis.strace
        if journal == "postgres" and self.postgres:
            return self.postgres.strace
        return None


def _pin() -> None:
    import measure

    measure.pin_client()


def callgrind_total(cmd: list[str], timeout: float) -> int:
    import instructions

    return instructions.callgrind(cmd, timeout)


def count_instructions(env: Env, journal: str, shape: str, args: argparse.Namespace) -> tuple[float, float | None]:
    """Instructions per call, and the connections per call the client opened to the sandbox
    under callgrind (the difference of the two runs over the difference of their calls).
    Creating calls reuse a connection only within 250 ms of its last answer (fxpay's ``FRESH``),
    and callgrind runs the client some 50 times slower: a cell whose connections idle past
    that window under callgrind pays for new connections there that it need not pay outside."""
    import instructions

    n_lo, n_hi = args.n
    cfg = json.dumps(env.cfg(journal, shape, args.warmup))
    me = [sys.executable, str(Path(__file__).resolve()), "--worker", cfg]
    if env.sandbox is None:
        totals = [callgrind_total([*me, str(n)], args.timeout) for n in (n_lo, n_hi)]
        return float(instructions.per_call((totals[0], totals[1]), (n_lo, n_hi))), None
    runs = [instructions.counted(env.sandbox, [*me, str(n)], args.timeout) for n in (n_lo, n_hi)]
    ins = float(instructions.per_call((runs[0][0], runs[1][0]), (n_lo, n_hi)))
    return ins, (runs[1][1] - runs[0][1]) / (n_hi - n_lo)


@contextlib.contextmanager
def client_process(
    env: Env, journal: str, shape: str, args: argparse.Namespace, strace_log: Path | None
) -> Iterator[subprocess.Popen[str]]:
    cfg = json.dumps(env.cfg(journal, shape, args.warmup))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", cfg]
    if strace_log is not None:
        cmd = [*strace_prefix(strace_log), *cmd]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=_pin)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != "ready":
            p.wait(30)
            raise RuntimeError(f"the client process did not start (exit {p.returncode})")
        yield p
    finally:
        if p.poll() is None:
            assert p.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                p.stdin.write("quit\n")
                p.stdin.close()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def connections_opened(env: Env) -> int | None:
    """The connections the sandbox has accepted so far (None without its process)."""
    import instructions

    return None if env.sandbox is None else instructions.connections_opened(env.sandbox)


def measure_rounds(env: Env, journal: str, shape: str, args: argparse.Namespace) -> dict[str, Any]:
    """Client CPU per call (median of the rounds) and the flushes the rounds made."""
    own_log = Path(env.base["folder"]) / f"strace-client-{journal}-{shape.replace(' ', '')}.log" if journal == "sqlite" else None
    log = own_log or env.strace_log(journal)
    cpu_us: list[float] = []
    flushes = calls = 0
    opened = connections_opened(env)
    with client_process(env, journal, shape, args, own_log) as p:
        assert p.stdin is not None
        assert p.stdout is not None
        for _ in range(args.rounds):
            p.stdin.write(f"run {args.calls}\n")
            p.stdin.flush()
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("the client process ended in a round")
            r = json.loads(line)
            cpu_us.append(r["cpu"] / r["calls"] * 1e6)
            calls += r["calls"]
            if log is not None:
                time.sleep(0.05)  # strace writes a line when the call returns; let it reach the file
                flushes += flushes_between(log, r["t0"], r["t1"])
    out: dict[str, Any] = {"cpu_us_rounds": cpu_us, "cpu_us": statistics.median(cpu_us), "calls": calls}
    if opened is not None:
        # The client's opening connections and its warm-up's are in it too: at least the
        # connections per call of the rounds alone.
        after = connections_opened(env)
        out["connections_per_call"] = None if after is None else (after - opened) / calls
    if log is not None:
        out["flushes"] = flushes
        out["flushes_per_call"] = flushes / calls
        out["calls_per_flush"] = calls / flushes if flushes else None
        out["flushed_by"] = FLUSHED_BY[journal]
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    import measure

    for tool in ("strace",) + (() if args.no_callgrind else ("valgrind",)):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install {tool})")
    journals = ["none", *(j for j in args.journals if j != "none")]
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="fxpay-bench-journal-"))
    doc: dict[str, Any] = {
        "quick": args.quick,
        "n": list(args.n),
        "warmup": args.warmup,
        "calls": args.calls,
        "rounds": args.rounds,
        "journals": journals,
        "shapes": args.shapes,
        "host": {
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "python": platform.python_version(),
            "fxpay_build": measure.fxpay_build(),
            "folder": str(folder),
        },
        "cells": {},
        "errors": {},
    }
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
    doc["host"]["bench_commit"] = git.stdout.strip() if git.returncode == 0 else ""
    sb = measure.SandboxProcess("http")
    redis = postgres = None
    try:
        redis = Redis(folder / "redis") if "redis" in journals else None
        postgres = Postgres() if "postgres" in journals else None
        t = sb.target
        base: dict[str, Any] = {"base_url": t.base_url, "client_id": t.client_id, "client_secret": t.client_secret, "folder": str(folder)}
        if redis:
            base |= {"redis_url": redis.url, "redis_prefix": redis.prefix}
        if postgres:
            base |= {"postgres_url": postgres.url, "postgres_table": postgres.table}
        env = Env(base, redis, postgres, sb)
        disk = [disk_flush_rate(folder, w, args.disk_seconds) for w in (1, THREADS)]
        doc["disk"] = disk
        rates = ", ".join(f"{d['writers']} writer(s) {d['per_second']:,.0f} flushes/s" for d in disk)
        print(f"  disk: {rates}", flush=True)
        for journal in journals:
            for shape in args.shapes:
                name = f"{journal} / {shape}"
                cell: dict[str, Any] = {"journal": journal, "shape": shape}
                try:
                    if not args.no_callgrind:
                        cell["instructions"], cell["connections_per_call_callgrind"] = count_instructions(env, journal, shape, args)
                    cell |= measure_rounds(env, journal, shape, args)
                except Exception as e:
                    doc["errors"][name] = f"{type(e).__name__}: {e}"
                    print(f"  {name:<24} ERROR {doc['errors'][name]}", flush=True)
                    continue
                doc["cells"][name] = cell
                ins = cell.get("instructions")
                fl = cell.get("flushes_per_call")
                print(
                    f"  {name:<24} {'' if ins is None else f'{ins:>10,.0f} instructions/call'}"
                    f"  {cell['cpu_us']:>8,.1f} µs CPU/call{'' if fl is None else f'  {fl:.2f} flushes/call'}",
                    flush=True,
                )
        # The disk again, after the cells: the host's load moves it.
        doc["disk_after"] = [disk_flush_rate(folder, w, args.disk_seconds) for w in (1, THREADS)]
    finally:
        sb.close()
        for server in (redis, postgres):
            if server is not None:
                server.close()
        shutil.rmtree(folder, ignore_errors=True)
    doc["seconds"] = time.perf_counter() - started
    return doc


# -- the table -------------------------------------------------------------------------------------


def _num(v: float | None, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def markdown(doc: dict[str, Any]) -> str:
    h = doc["host"]
    lines = [
        f"# Keyed calls per journal{' (--quick)' if doc.get('quick') else ''}",
        "",
        f"`create_quote(..., idempotency_key=...)` against the served sandbox (plain http/1.1), fxpay {h.get('fxpay_build')} build, "
        f"bench at {h.get('bench_commit')}, Python {h.get('python')}, {h.get('cpus')} cores (load average "
        f"{', '.join(f'{x:.2f}' for x in h.get('load_average') or [])} at the start).",
        "",
        f"- instructions per call: callgrind, the client process only; (total at N = {doc['n'][1]:,} - total at N = "
        f"{doc['n'][0]:,}) / {doc['n'][1] - doc['n'][0]:,}, after a warm-up of {doc['warmup']:,} calls",
        f"- client CPU µs per call: `getrusage` of the client process, median of {doc['rounds']} round(s) of "
        f"{doc['calls']:,} calls (noisy: a 2-core host shared with other work; instructions are the judged figure)",
        "- flushes per call: `fsync`/`fdatasync` calls counted by strace (`-f --seccomp-bpf`) in the rounds' window, "
        "in the process that flushes: the client (SQLite), redis-server (AOF `appendfsync always`), the PostgreSQL "
        "cluster (every backend and the WAL writer)",
        "",
        "| journal | shape | instructions per call | x unkeyed | client CPU µs per call | flushes per call | calls per flush |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    cells = doc["cells"]
    for journal in JOURNALS:
        for shape in SHAPES:
            c = cells.get(f"{journal} / {shape}")
            if c is None:
                continue
            base = cells.get(f"none / {shape}", {}).get("instructions")
            ins = c.get("instructions")
            ratio = f"{ins / base:.2f}x" if ins is not None and base else "n/a"
            flushes = _num(c.get("flushes_per_call"), ".2f") if "flushes_per_call" in c else "-"
            per = _num(c.get("calls_per_flush"), ".2f") if "flushes_per_call" in c else "-"
            lines.append(f"| {JOURNAL_LABEL[journal]} | {shape} | {_num(ins, ',.0f')} | {ratio} | {c['cpu_us']:,.1f} | {flushes} | {per} |")
    counted = ("connections_per_call", "connections_per_call_callgrind")
    conns = [
        (f"{JOURNAL_LABEL[j]} / {sh}", cells[f"{j} / {sh}"])
        for j in JOURNALS
        for sh in SHAPES
        if any(k in cells.get(f"{j} / {sh}", {}) for k in counted)
    ]
    if conns:
        lines += [
            "",
            "New connections to the sandbox per call (a creating call reuses a connection only within 250 ms of its last "
            "answer; callgrind runs the client some 50 times slower, so more of them idle past that window there; "
            "the CPU rounds' figure includes the client's warm-up):",
            "",
            "| cell | under callgrind | in the CPU rounds |",
            "|---|---:|---:|",
        ]
        for name, c in conns:
            under, rounds = (_num(c.get(k), ".3f") for k in reversed(counted))
            lines.append(f"| {name} | {under} | {rounds} |")
    lines += ["", "The disk's own flush rate (append 4 KiB + `fsync`, a file per writer, the same filesystem as the journals):", ""]
    lines += ["| when | writers | flushes per second | median flush µs |", "|---|---:|---:|---:|"]
    for when, key in (("before the cells", "disk"), ("after the cells", "disk_after")):
        for d in doc.get(key) or []:
            lines.append(f"| {when} | {d['writers']} | {d['per_second']:,.0f} | {d['median_us']:,.0f} |")
    for k, v in (doc.get("errors") or {}).items():
        lines.append(f"- {k}: {v}")
    for m in doc.get("merged") or []:
        lines += ["", f"Measured in another run ({m['from']}, `--merge`; the disk there: {m['disk']}): {', '.join(m['cells'])}."]
    if doc.get("seconds"):
        lines += ["", f"Run took {doc['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def merge(doc: dict[str, Any], path: Path) -> None:
    """Takes the cells of an earlier run (its journal.json) that this run did not measure or
    failed to, and lists them (``merged``) with that run's disk flush rates: a cell that failed
    (callgrind's own crash, a full disk) can be measured again alone and set beside the rest."""
    old = json.loads(path.read_text())
    if old.get("n") != doc["n"]:
        raise SystemExit(f"--merge {path}: counted with N = {old.get('n')}, this run with {doc['n']}")
    taken = []
    for name, cell in (old.get("cells") or {}).items():
        if name not in doc["cells"]:
            doc["cells"][name] = cell
            doc["errors"].pop(name, None)
            taken.append(name)
    disk = ", ".join(f"{d['writers']} writer(s) {d['per_second']:,.0f} flushes/s" for d in old.get("disk") or [])
    doc.setdefault("merged", []).append({"from": str(path), "cells": taken, "disk": disk})


def write(doc: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    md = markdown(doc)
    Path(f"{out}.md").write_text(md)
    Path(f"{out}.json").write_text(json.dumps(doc, indent=2) + "\n")
    print()
    print(md)
    print(f"wrote {out}.md and {out}.json")


def _list(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        got = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in got if x not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; known: {', '.join(choices)}")
        return got

    return parse


def _exit_on_signal(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP: leave through ``run``'s ``finally``, which stops the servers the bench
    started (SIGINT does it already, as KeyboardInterrupt). A second signal while they stop is
    ignored. SIGKILL cannot be caught: servers it leaves run on (in a process group of their own)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(argv[1:])
        return 0
    import instructions

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke test: small N, one short round; written to bench/results/quick/")
    p.add_argument("--journals", type=_list(JOURNALS), default=list(JOURNALS), help="comma-separated, of: " + ", ".join(JOURNALS))
    p.add_argument("--shapes", type=_list(SHAPES), default=list(SHAPES), help="comma-separated, of: " + ", ".join(SHAPES))
    p.add_argument("--n", type=instructions._n_pair, help=f"the two values of N for callgrind (default {DEFAULT_N[0]},{DEFAULT_N[1]})")
    p.add_argument("--warmup", type=int, help=f"warm-up calls per client process (default {DEFAULT_WARMUP})")
    p.add_argument("--calls", type=int, help=f"calls per CPU round (default {DEFAULT_CALLS})")
    p.add_argument("--rounds", type=int, help=f"CPU rounds per cell (default {DEFAULT_ROUNDS})")
    p.add_argument("--disk-seconds", type=float, help=f"seconds per disk flush-rate measurement (default {DISK_SECONDS})")
    p.add_argument("--no-callgrind", action="store_true", help="no instructions column (no valgrind)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per callgrind run")
    p.add_argument(
        "--out", type=Path, help="output path without suffix (default bench/results/journal; --quick bench/results/quick/journal)"
    )
    p.add_argument("--merge", type=Path, action="append", help="an earlier journal.json: its cells this run did not measure (repeatable)")
    args = p.parse_args(argv)
    q = args.quick
    args.n = args.n or (QUICK_N if q else DEFAULT_N)
    args.warmup = args.warmup if args.warmup is not None else (QUICK_WARMUP if q else DEFAULT_WARMUP)
    args.calls = args.calls or (QUICK_CALLS if q else DEFAULT_CALLS)
    args.rounds = args.rounds or (QUICK_ROUNDS if q else DEFAULT_ROUNDS)
    args.disk_seconds = args.disk_seconds or (QUICK_DISK_SECONDS if q else DISK_SECONDS)
    out = args.out or (HERE / "results" / "quick" / "journal" if q else HERE / "results" / "journal")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    doc = run(args)
    for path in args.merge or []:
        merge(doc, path)
    write(doc, out)
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The chaos harness: real parts, a nemesis, a history checker (tests/chaos/README.md).

    .venv/bin/python tests/chaos/chaos_support.py --keys 10000 --faults 50 [--seed N]

Parts: the sandbox served in its own process (driven with ``fxpay.testing.RemoteSandbox``), a
redis-server (appendonly yes, appendfsync always), a PostgreSQL cluster, an SQLite file, a TCP
proxy between the clients and the sandbox, a notification receiver process, and client worker
processes (client_worker.py) that make keyed payments and write their history.

The nemesis (seeded; the seed is printed) SIGKILLs workers, kills and restarts redis-server and
PostgreSQL on their data, flushes Redis, restarts it from an empty data dir, truncates the
PostgreSQL table, drops and forges notifications, redelivers them, and makes the proxy close
idle connections or stall. Keys a fault cut short are run again by later workers; after the
faults every key is run once more (the final pass), as a retrying job would.

The checker reads the truth from the sandbox: no payment reference may be booked twice, and no
second deal may be asked for a quote that a booked deal used (the sandbox refuses it with
``business:deal:2002``: a second request for a booked payment). It reports unknowns and
refusals by cause."""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import glob
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fxpay
import fxpay.testing

from client_worker import create_journal, open_journal
from proxy_support import ChaosProxy

HERE = Path(__file__).parent
PY = sys.executable
STORES = ("redis", "postgres", "sqlite")
KINDS = ("deal", "spot", "payout")
QUOTE_USED = "business:deal:2002"

# Fault kinds and their weights. The destroying ones (a store that forgets) come once each,
# in the second half of the run, so the stores work under the other faults first.
FAULTS = {
    "kill-client": 6,
    "kill-redis": 2,
    "kill-postgres": 2,
    "kill-receiver": 1,
    "drop-notifications": 2,
    "forge-fail": 2,
    "redeliver": 1,
    "stale-connections": 3,
    "stall": 1,
    "lose-answers": 1,
}
DESTROYING = ("flushall", "redis-empty", "truncate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def program(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(Path(p).parts[-3]))
        if not versions:
            raise FileNotFoundError(f"{name} is not installed (scripts/setup installs it)")
        found = versions[-1]
    return found


class Redis:
    """A redis-server on 127.0.0.1 at a port of its own, durable (AOF, fsync always)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dirs = 0
        self.dir = self._new_dir()
        self.proc: subprocess.Popen[bytes] | None = None

    def _new_dir(self) -> Path:
        self.dirs += 1
        d = self.root / f"redis-data-{self.dirs}"
        d.mkdir()
        return d

    def start(self) -> None:
        import redis

        args = [program("redis-server"), "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 60
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        # A server that is still loading its AOF answers LOADING; wait for it.
        while True:
            try:
                probe.dbsize()
                break
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.05)
        probe.close()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            self.proc = None

    def restart_empty(self) -> None:
        """A restart from an empty data dir: a container that came back without its volume."""
        self.kill()
        self.dir = self._new_dir()
        self.start()

    def flushall(self) -> None:
        import redis

        r = redis.Redis.from_url(self.url)
        r.flushall()
        r.close()


class Postgres:
    """A PostgreSQL cluster of its own on 127.0.0.1 (run by ``nobody`` when we are root)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="fxpay-chaos-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self.conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        self._as: list[str] = []
        if os.getuid() == 0:
            user = pwd.getpwnam("nobody")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "nobody", "--"]
        self._run(program("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = ''\n")
            conf.write("fsync = on\nsynchronous_commit = on\nmax_connections = 300\n")

    def _run(self, *args: str) -> None:
        out = subprocess.run([*self._as, *args], cwd=self.folder, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
        if out.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {out.stdout}{out.stderr}\n{log[-3000:]}")

    def start(self) -> None:
        import psycopg

        self._run(program("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "120", "start")
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(self.conninfo, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError("postgres did not accept connections") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL to the postmaster and every backend at once (a machine that lost the
        server); the next start replays the WAL."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        family = [pid] + [int(p) for p in _children(pid)]
        for p in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.05)
        # A killed postmaster may linger as a zombie (a container's init need not reap it),
        # and postgres takes a lock file naming a pid that still exists for a live server. A
        # machine that lost the server has no such process: the lock file goes with it.
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run(program("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop")

    def truncate(self, table: str) -> None:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(f'TRUNCATE "{table}"')

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _children(pid: int) -> list[str]:
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(stat.split("/")[2])
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextmanager
def served_sandbox() -> Iterator[tuple[fxpay.testing.RemoteSandbox, subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FXPAY_")}
    proc = subprocess.Popen([PY, "-m", "fxpay.sandbox", "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        want = {"FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_ADMIN_TOKEN"}
        out: dict[str, str] = {}
        while not want <= out.keys():
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the sandbox exited early ({proc.poll()})")
            key, _, value = line.strip().partition("=")
            out[key] = value
        sb = fxpay.testing.RemoteSandbox(
            out["FXPAY_BASE_URL"],
            client_id=out["FXPAY_CLIENT_ID"],
            client_secret=out["FXPAY_CLIENT_SECRET"],
            admin_token=out["FXPAY_ADMIN_TOKEN"],
        )
        yield sb, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Receiver:
    """receiver_worker.py in its own process, on a port kept across restarts."""

    def __init__(self, cfg_path: Path) -> None:
        self.cfg_path = cfg_path
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        for _ in range(50):
            proc = subprocess.Popen(
                [PY, str(HERE / "receiver_worker.py"), str(self.cfg_path), str(self.port)], stdout=subprocess.PIPE, text=True
            )
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.startswith("port "):
                self.port = int(line.split()[1])
                self.proc = proc
                return
            proc.wait(30)  # the old one's port not free yet
            time.sleep(0.2)
        raise RuntimeError("the receiver did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            self.proc = None

    def drop(self, n: int) -> None:
        import httpx

        httpx.post(f"{self.url}/_drop?n={n}", timeout=10)


@dataclasses.dataclass
class Key:
    key: str
    store: str
    kind: str
    amount: str
    ref: str
    attempts: int = 0
    outcome: str | None = None  # the last completed call's outcome
    finished: bool = False
    not_before: float = 0.0
    retries: int = 0
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    process_id: str | None = None
    nonce: str | None = None

    def task(self) -> dict[str, Any]:
        return {"key": self.key, "store": self.store, "kind": self.kind, "amount": self.amount, "ref": self.ref, "attempt": self.attempts}


# Outcomes that end a key; the rest are tried again later (at most RETRIES times, then kept).
FINAL = {"booked", "replayed", "refused", "unknown", "key-reused", "crash", "journal-lost"}
# A JournalError saying the store holds no journal, or another one: the journal was lost.
LOST = re.compile(r"found no journal|identity|another journal", re.IGNORECASE)
RETRIES = {"journal-error": 3, "in-progress": 12, "error": 4, "cut": 12}
WAIT = {"journal-error": 1.0, "in-progress": 4.0, "error": 0.5, "cut": 0.0}


@dataclasses.dataclass
class Options:
    keys: int = 300
    faults: int = 10
    seed: int | None = None
    workers: int = 3
    batch: int = 20
    timeout: float = 5.0
    plant: str | None = None
    quiet_workers: bool = True
    kinds: tuple[str, ...] | None = None  # only these fault kinds (the default: all)
    folder: Path | None = None
    log: Callable[[str], None] = print


@dataclasses.dataclass
class Report:
    seed: int
    keys: int
    faults: collections.Counter[str]
    final: collections.Counter[str]
    before_final: collections.Counter[str]
    booked: int
    booked_twice: list[str]
    resent: list[str]
    unknown_by_cause: collections.Counter[str]
    refused_by_cause: collections.Counter[str]
    unknown_booked: int
    unknown_not_booked: int
    journal_lies: collections.Counter[str]
    calls: int
    seconds: float
    twice_after: collections.Counter[str]

    @property
    def failed(self) -> bool:
        return bool(self.booked_twice or self.resent)

    def table(self) -> str:
        rows = [
            ("seed", str(self.seed)),
            ("keys", str(self.keys)),
            ("calls (attempts, final pass included)", str(self.calls)),
            ("seconds", f"{self.seconds:.0f}"),
            ("faults", ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"),
            ("keys' outcome before the final pass", ", ".join(f"{k} {v}" for k, v in sorted(self.before_final.items()))),
            ("keys' outcome in the final pass", ", ".join(f"{k} {v}" for k, v in sorted(self.final.items()))),
            ("deals booked (sandbox)", str(self.booked)),
            ("BOOKED TWICE (references)", str(len(self.booked_twice))),
            ("SENT AGAIN for a booked quote (2002)", str(len(self.resent))),
            ("unknown, booked by the sandbox", str(self.unknown_booked)),
            ("unknown, never booked (false unknown)", str(self.unknown_not_booked)),
        ]
        out = [f"{k:<40} {v}" for k, v in rows]
        if self.twice_after:
            out.append("booked twice / sent again, by the faults between its first send and its second:")
            out += [f"    {v:>6}  {k}" for k, v in self.twice_after.most_common()]
        out.append("unknown by cause (every attempt):")
        out += [f"    {v:>6}  {k}" for k, v in self.unknown_by_cause.most_common()] or ["    none"]
        out.append("refused by cause (every attempt: a store's JournalError, the service's 4xx):")
        out += [f"    {v:>6}  {k}" for k, v in self.refused_by_cause.most_common()] or ["    none"]
        out.append("journal entries the truth contradicts (spot keys):")
        out += [f"    {v:>6}  {k}" for k, v in self.journal_lies.most_common()] or ["    none"]
        return "\n".join(out)


def family(text: str) -> str:
    """An error text's family: ids, numbers and addresses blotted out, cut short."""
    text = re.sub(r"[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}", "<id>", text)
    text = re.sub(r"'[^'\s]{20,}'", "<key>", text)
    text = re.sub(r"\b[dps]-\d+/\w+", "<key>", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r'^the outcome of (\w+) under idempotency key "[^"]*" is unknown \((.*)\)', r"\1: \2", text)
    return text[:220]


class Harness:
    def __init__(self, opts: Options) -> None:
        self.o = opts
        self.seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)
        self.rng = random.Random(self.seed)
        self.lock = threading.RLock()
        self.running: dict[int, tuple[subprocess.Popen[bytes], list[Key], Path]] = {}
        self.faults: collections.Counter[str] = collections.Counter()
        self.fault_log: list[tuple[float, str, str]] = []  # (time, kind, store)
        self.calls = 0
        self.n_batches = 0
        self.stop_faults = threading.Event()

    # -- the keys ------------------------------------------------------------------------

    def make_keys(self) -> None:
        self.keys: dict[str, Key] = {}
        run = f"{self.seed:x}"
        for i in range(self.o.keys):
            store = STORES[i % 3]
            kind = KINDS[(i // 3) % 3]
            k = f"{kind[0]}-{i}"
            self.keys[k] = Key(k, store, kind, str(50 + i % 200), f"R{run}-{i}")
        self.queue: collections.deque[Key] = collections.deque(self.keys.values())

    def progress(self) -> float:
        with self.lock:
            return sum(k.finished for k in self.keys.values()) / max(1, len(self.keys))

    def take_batch(self) -> list[Key]:
        """The next keys due, all of one store and kind (a worker's batch)."""
        now = time.monotonic()
        with self.lock:
            first = next((k for k in self.queue if k.not_before <= now), None)
            if first is None:
                return []
            batch = [k for k in self.queue if k.store == first.store and k.kind == first.kind and k.not_before <= now][: self.o.batch]
            for k in batch:
                self.queue.remove(k)
                k.attempts += 1
            return batch

    def requeue(self, k: Key, *, wait: float = 0.0) -> None:
        with self.lock:
            k.finished = False
            k.not_before = time.monotonic() + wait
            self.queue.append(k)

    # -- the workers ---------------------------------------------------------------------

    def spawn(self, batch: list[Key]) -> None:
        self.n_batches += 1
        n = self.n_batches
        hist = self.folder / "history" / f"batch-{n}.jsonl"
        cfg = dict(self.worker_cfg, tasks=[k.task() for k in batch], history=str(hist))
        cfg_path = self.folder / "batches" / f"batch-{n}.json"
        cfg_path.write_text(json.dumps(cfg))
        proc = subprocess.Popen(
            [PY, str(HERE / "client_worker.py"), str(cfg_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if self.o.quiet_workers else None,
        )
        with self.lock:
            self.running[n] = (proc, batch, hist)

    def reap(self) -> None:
        with self.lock:
            done = [(n, v) for n, v in self.running.items() if v[0].poll() is not None]
            for n, _ in done:
                del self.running[n]
        for _n, (_proc, batch, hist) in done:
            self.absorb(batch, hist)

    def absorb(self, batch: list[Key], hist: Path) -> None:
        """Reads a finished worker's history into its keys' state."""
        completes: dict[str, dict[str, Any]] = {}
        invoked: dict[str, float] = {}
        lines = hist.read_text().splitlines() if hist.exists() else []
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut by a SIGKILL
            if ev.get("ev") == "complete":
                ev["t0"] = invoked.get(ev["key"], ev.get("t"))
                completes[ev["key"]] = ev
            elif ev.get("ev") == "invoke":
                invoked[ev["key"]] = ev["t"]
        with self.lock:
            for k in batch:
                ev = completes.get(k.key)
                self.calls += 1
                if ev is None:
                    outcome = "cut"
                    # A call cut short (its worker killed) may have sent: it counts as a send
                    # from the moment it started.
                    cut: dict[str, Any] = {"outcome": "cut", "attempt": k.attempts}
                    if k.key in invoked:
                        cut["t"] = cut["t0"] = invoked[k.key]
                    k.history.append(cut)
                else:
                    outcome = ev["outcome"]
                    k.history.append(ev)
                    if ev.get("process_id"):
                        k.process_id, k.nonce = ev["process_id"], ev.get("nonce")
                if outcome == "journal-error" and LOST.search(str(ev and ev.get("error"))):
                    # A store that lost its journal refuses until a person acts: trying again
                    # would only be refused again.
                    outcome = "journal-lost"
                    if ev is not None:
                        ev["outcome"] = outcome
                k.outcome = outcome
                if outcome in FINAL or k.retries >= RETRIES.get(outcome, 0):
                    k.finished = True
                else:
                    k.retries += 1
                    k.finished = False
                    k.not_before = time.monotonic() + WAIT.get(outcome, 0.5)
                    self.queue.append(k)

    def drive(self, until: Callable[[], bool]) -> None:
        """Keeps ``workers`` worker processes busy until ``until()`` (and none is left)."""
        while True:
            self.reap()
            with self.lock:
                free = self.o.workers - len(self.running)
            if until() and not self.running:
                return
            for _ in range(free):
                batch = self.take_batch()
                if not batch:
                    break
                self.spawn(batch)
            time.sleep(0.05)

    # -- the nemesis ---------------------------------------------------------------------

    def schedule(self) -> list[tuple[float, str]]:
        n = self.o.faults
        if self.o.kinds:
            # Only the kinds asked for, one after another: a fault kind's own failures.
            return sorted((self.rng.uniform(0.1, 0.9), self.o.kinds[i % len(self.o.kinds)]) for i in range(n))
        destroying = list(DESTROYING)[: min(len(DESTROYING), n // 3)]
        others = self.rng.choices(list(FAULTS), weights=list(FAULTS.values()), k=n - len(destroying))
        plan = [(self.rng.uniform(0.05, 0.9), kind) for kind in others]
        plan += [(self.rng.uniform(0.5, 0.9), kind) for kind in destroying]
        return sorted(plan)

    def nemesis(self, plan: list[tuple[float, str]]) -> None:
        for at, kind in plan:
            while self.progress() < at:
                if self.stop_faults.wait(0.05):
                    return
            t0 = time.time()
            try:
                store = self.fault(kind)
            except Exception as e:
                self.o.log(f"nemesis: {kind} failed: {type(e).__name__}: {e}")
                kind, store = f"{kind} (failed)", ""
            with self.lock:
                self.faults[kind] += 1
                self.fault_log.append((t0, kind, store))
            self.o.log(f"nemesis: {kind} at {self.progress():.0%}")

    def rerun_some(self, store: str, n: int) -> None:
        """A retrying job runs some finished keys of ``store`` again."""
        with self.lock:
            done = [k for k in self.keys.values() if k.store == store and k.finished and k not in self.queue]
            for k in self.rng.sample(done, min(n, len(done))):
                self.requeue(k)

    def booked_spot(self) -> Key | None:
        with self.lock:
            spots = [k for k in self.keys.values() if k.kind == "spot" and k.process_id and k.nonce and k.finished]
            return self.rng.choice(spots) if spots else None

    def fault(self, kind: str) -> str:
        r = self.rng
        if kind == "kill-client":
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with self.lock:
                    live = [v[0] for v in self.running.values() if v[0].poll() is None]
                if live:
                    time.sleep(r.uniform(0.0, 0.3))
                    victim = r.choice(live)
                    if victim.poll() is None:
                        victim.send_signal(signal.SIGKILL)
                    return ""
                time.sleep(0.05)
            return ""
        if kind == "kill-redis":
            self.redis.kill()
            time.sleep(r.uniform(0.2, 1.5))
            self.redis.start()
            return "redis"
        if kind == "redis-empty":
            self.redis.kill()
            time.sleep(r.uniform(0.2, 1.0))
            self.redis.dir = self.redis._new_dir()
            self.redis.start()
            self.rerun_some("redis", 30)
            return "redis"
        if kind == "flushall":
            self.redis.flushall()
            self.rerun_some("redis", 30)
            return "redis"
        if kind == "kill-postgres":
            self.pg.kill()
            time.sleep(r.uniform(0.2, 1.5))
            self.pg.start()
            return "postgres"
        if kind == "truncate":
            self.pg.truncate(self.pg_table)
            self.rerun_some("postgres", 30)
            return "postgres"
        if kind == "kill-receiver":
            self.receiver.kill()
            time.sleep(r.uniform(0.3, 2.0))
            self.receiver.start()
            return ""
        if kind == "drop-notifications":
            self.receiver.drop(r.randint(4, 12))
            return ""
        if kind == "forge-fail":
            k = self.booked_spot()
            if k is None:
                return ""
            # A `fail` carrying the booked deal's own nonce and processId (issue 52).
            self.sb.send_deal_created(f"{self.receiver.url}/hook/{k.store}", status="fail", nonce=k.nonce, process_id=k.process_id)
            self.requeue(k)
            return k.store
        if kind == "redeliver":
            k = self.booked_spot()
            if k is None:
                return ""
            self.sb.redeliver(k.process_id or "")
            self.requeue(k)
            return k.store
        if kind == "stale-connections":
            # Several times over a second: each pooled connection left idle is closed under
            # the client that would use it next.
            for _ in range(10):
                self.proxy.close_idle(r.uniform(0.0, 0.05))
                time.sleep(0.1)
            return ""
        if kind == "stall":
            self.proxy.stall(r.uniform(self.o.timeout + 1, self.o.timeout + 4))  # past the clients' timeout
            return ""
        if kind == "lose-answers":
            self.proxy.hold_answers(r.uniform(self.o.timeout + 1, self.o.timeout + 4))
            return ""
        raise ValueError(kind)

    # -- the run -------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        self.o.log(f"chaos: seed {self.seed} ({self.o.keys} keys, {self.o.faults} faults, {self.o.workers} workers, plant {self.o.plant})")
        self.folder = self.o.folder or Path(tempfile.mkdtemp(prefix="fxpay-chaos-"))
        for sub in ("history", "batches"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.redis = Redis(self.folder)
        self.redis.start()
        self.pg = Postgres()
        self.pg_table = "chaos_journal"
        try:
            self.pg.start()
            with served_sandbox() as (sb, _sandbox_proc):
                self.sb = sb
                return self._run(sb, started)
        finally:
            self.redis.kill()
            self.pg.remove()

    def _run(self, sb: fxpay.testing.RemoteSandbox, started: float) -> Report:
        host, port = sb.base_url.removeprefix("http://").split(":")
        self.proxy = ChaosProxy(host, int(port.rstrip("/")))
        self.proxy.start()
        stores = {
            "redis_url": self.redis.url,
            "redis_prefix": "chaos:",
            "pg_conninfo": self.pg.conninfo,
            "pg_table": self.pg_table,
            "sqlite_path": str(self.folder / "journal.sqlite"),
        }
        for store in ("redis", "postgres"):
            j = open_journal(store, stores)
            create_journal(j)  # once, at set-up (the contract: never at every start-up)
            close = getattr(j, "close", None)
            if close is not None:
                close()
        with sb.client() as c:
            beneficiary_id = c.create_beneficiary(_beneficiary())
        rcfg = self.folder / "receiver.json"
        rcfg.write_text(json.dumps({"stores": stores, "receiver_log": str(self.folder / "receiver.jsonl")}))
        self.receiver = Receiver(rcfg)
        self.receiver.start()
        self.worker_cfg: dict[str, Any] = {
            "base_url": f"http://127.0.0.1:{self.proxy.port}",
            "client_id": sb.client_id,
            "client_secret": sb.client_secret,
            "stores": stores,
            "receiver_url": self.receiver.url,
            "beneficiary_id": beneficiary_id,
            "timeout": self.o.timeout,
            "plant": self.o.plant,
        }
        self.make_keys()
        plan = self.schedule()
        self.o.log("nemesis plan: " + ", ".join(f"{k}@{a:.0%}" for a, k in plan))
        nem = threading.Thread(target=self.nemesis, args=(plan,), name="nemesis", daemon=True)
        nem.start()
        try:
            self.drive(lambda: self.progress() >= 1.0 and not nem.is_alive())
        finally:
            self.stop_faults.set()
            nem.join(120)
        # Heal: every part up again (a fault's own restart did that already), then the final
        # pass: every key once more, as a job that retries everything would.
        self.proxy.stall(0)
        self.proxy.hold_answers(0)
        time.sleep(2)  # deliveries still owed land (the sandbox tries 4 times in 1.4 s)
        self.o.log(f"final pass ({self.progress():.0%} finished; {time.monotonic() - started:.0f} s)")
        with self.lock:
            self.before_final = collections.Counter(k.outcome or "none" for k in self.keys.values())
            for k in self.keys.values():
                k.retries = 0
                self.requeue(k)
        self.drive(lambda: self.progress() >= 1.0)
        time.sleep(3)
        report = self.check(sb, time.monotonic() - started)
        self.receiver.kill()
        self.proxy.stop()
        return report

    # -- the checker ---------------------------------------------------------------------

    def check(self, sb: fxpay.testing.RemoteSandbox, seconds: float) -> Report:
        deals = sb.deals()
        refs: collections.Counter[str] = collections.Counter()
        by_ref: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for d in deals:
            for b in d.get("beneficiaries", []):
                ref = b.get("payReference") or b.get("pay_reference")
                refs[ref] += 1
                by_ref[ref].append(d)
        mine = {k.ref: k for k in self.keys.values()}
        twice = sorted(r for r, n in refs.items() if n > 1 and r in mine)
        # A second deal asked for a quote that a booked deal used: refused by the sandbox with
        # 2002, so not booked twice there, but sent twice all the same.
        resent: list[str] = []
        for k in self.keys.values():
            for ev in k.history:
                if ev.get("outcome") == "refused" and QUOTE_USED in (ev.get("error") or ""):
                    resent.append(f"{k.key} attempt {ev.get('attempt')}")
        quote_fail_pids = set()
        for dl in sb.deliveries():
            text = json.dumps(dl)
            if '"fail"' in text and QUOTE_USED in text:
                quote_fail_pids.add(_process_id(dl))
        resent += [f"spot fail {pid}" for pid in sorted(p for p in quote_fail_pids if p)]
        unknown: collections.Counter[str] = collections.Counter()
        refused: collections.Counter[str] = collections.Counter()
        for k in self.keys.values():
            for ev in k.history:
                o = ev.get("outcome")
                if o == "unknown":
                    unknown[f"{ev.get('error_class')}: {family(ev.get('error') or '(no text)')}"] += 1
                elif o in ("refused", "journal-error", "journal-lost", "error", "key-reused", "crash"):
                    refused[f"{o} {ev.get('error_class')}: {family(ev.get('error') or '')}"] += 1
        final = collections.Counter(k.outcome or "none" for k in self.keys.values())
        unk = [k for k in self.keys.values() if k.outcome == "unknown"]
        unknown_booked = sum(1 for k in unk if refs.get(k.ref))
        lies = self.journal_lies(by_ref)
        twice_after = self.attribute(twice, resent, by_ref)
        return Report(
            seed=self.seed,
            keys=len(self.keys),
            faults=self.faults,
            final=final,
            before_final=self.before_final,
            booked=sum(refs[r] for r in refs if r in mine),
            booked_twice=twice,
            resent=resent,
            unknown_by_cause=unknown,
            refused_by_cause=refused,
            unknown_booked=unknown_booked,
            unknown_not_booked=len(unk) - unknown_booked,
            journal_lies=lies,
            calls=self.calls,
            seconds=seconds,
            twice_after=twice_after,
        )

    def journal_lies(self, by_ref: dict[str, list[dict[str, Any]]]) -> collections.Counter[str]:
        """Spot keys whose journal entry the sandbox contradicts: done with no deal booked for
        its reference, or done with another deal's processId."""
        out: collections.Counter[str] = collections.Counter()
        stores = self.worker_cfg["stores"]
        for store in STORES:
            try:
                j = open_journal(store, stores)
                for k in self.keys.values():
                    if k.kind != "spot" or k.store != store:
                        continue
                    e = j.get(f"{k.key}/spot")
                    if e is None or e.state != "done":
                        continue
                    pids = {d.get("processId") for d in by_ref.get(k.ref, [])}
                    if not pids:
                        out[f"{store}: done, no deal booked"] += 1
                    elif e.result not in pids:
                        out[f"{store}: done with another deal's processId"] += 1
            except fxpay.FxPayError as e:
                out[f"{store}: not read ({type(e).__name__})"] += 1
        return out

    def attribute(self, twice: list[str], resent: list[str], by_ref: dict[str, list[dict[str, Any]]]) -> collections.Counter[str]:
        """Which fault kinds surfaced which failures: for each payment sent twice, the faults
        (on its store, or on every store) made between its first send and its second."""
        out: collections.Counter[str] = collections.Counter()
        by_ref_key = {k.ref: k for k in self.keys.values()}
        by_pid = {ev["process_id"]: k for k in self.keys.values() for ev in k.history if ev.get("process_id")}
        cases: list[tuple[Key, str]] = [(by_ref_key[r], "booked twice") for r in twice]
        for item in resent:
            first = item.split()[0]
            k = self.keys.get(first) or by_pid.get(item.split()[-1])
            if k is not None:
                cases.append((k, "sent again, refused 2002"))
            else:
                out["sent again, refused 2002: a process the histories do not name"] += 1
        for k, what in cases:
            sent = [ev for ev in k.history if ev.get("outcome") in ("booked", "unknown", "refused", "cut") and ev.get("t")]
            # From the start of the first call that may have sent to the end of the last.
            start = min((ev.get("t0") or ev["t"] for ev in sent), default=0.0)
            end = max((ev["t"] for ev in sent), default=time.time()) if len(sent) > 1 else time.time()
            window = [f for f in self.fault_log if start <= f[0] <= end]
            # The faults on the key's own store name the cause; faults on no store in
            # particular (a client killed, a stale connection) only when there were none.
            kinds = sorted({f[1] for f in window if f[2] == k.store}) or sorted({f[1] for f in window if f[2] == ""})
            out[f"{what} ({k.store}, {k.kind}) after {' + '.join(kinds) or 'no fault'}"] += 1
        return out


def _process_id(delivery: dict[str, Any]) -> str | None:
    for v in (delivery.get("body"), delivery):
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError:
                continue
        if isinstance(v, dict) and v.get("processId"):
            return str(v["processId"])
    m = re.search(r'"processId":\s*"([^"]+)"', json.dumps(delivery))
    return m.group(1) if m else None


def _beneficiary() -> fxpay.Beneficiary:
    address = fxpay.Address(address_line="1 George St", city_suburb="Sydney", state_province="NSW", post_code="2000", country="AU")
    return fxpay.Beneficiary(
        currency="AUD",
        name="Chaos Payee Pty Ltd",
        classification="Business",
        payment_reason="Invoice 42",
        bank_details=fxpay.BankDetails(
            bank_name="Bank of Sydney", bank_branch_name="George St", branch_code="062000", account="12345678", bank_address=address
        ),
        address=address,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests/chaos/chaos_support.py", description="fxpay's chaos harness (tests/chaos/README.md)")
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--faults", type=int, default=50)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--batch", type=int, default=40)
    p.add_argument("--plant", choices=("no-journal", "resend-unknown", "recreate"), default=None)
    p.add_argument("--kinds", default=None, help="only these fault kinds, comma-separated: " + ", ".join([*FAULTS, *DESTROYING]))
    p.add_argument("--keep", action="store_true", help="keep the run's folder (histories, logs)")
    a = p.parse_args(argv)
    kinds = tuple(a.kinds.split(",")) if a.kinds else None
    for kind in kinds or ():
        if kind not in FAULTS and kind not in DESTROYING:
            p.error(f"no fault kind {kind!r}")
    folder = Path(tempfile.mkdtemp(prefix="fxpay-chaos-"))
    h = Harness(
        Options(keys=a.keys, faults=a.faults, seed=a.seed, workers=a.workers, batch=a.batch, plant=a.plant, folder=folder, kinds=kinds)
    )
    try:
        report = h.run()
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"chaos: histories in {folder}")
    print(report.table())
    if report.failed:
        print(f"chaos: FAILED: {len(report.booked_twice)} references booked twice, {len(report.resent)} sent again (seed {report.seed})")
        return 1
    print(f"chaos: ok, 0 booked twice (seed {report.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The measurements of the benchmark: sandbox processes, cells, rounds, CPU shares, the ceiling,
cold start, tracing cost, the sandbox's own throughput, import time and RSS.

Nothing here knows a client's API (that is ``bench/clients.py``) or how results are shown
(``bench/report.py``).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clients import CELLS, COLD, TASKS, THREADS, Cell, Get, Target

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# -- the sandbox processes ----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` so far (all its threads), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# The sandbox gets a core of its own and the clients the others (with at least two cores).
# Left to the scheduler, the two sides share cores or not as load comes and goes, and the
# blocking loop's rate jumps between two modes (on 2 cores: about 9,500 req/s at 50 us of
# client CPU per call, or about 34,000 at 19 us) for seconds at a time, while 8 threads stay
# near 36,000-47,000: "8 threads >= 1.5x one thread" then read 1.04x in one --quick run and
# 4.89x in a full one (issue 23 item 12). Pinned, each cell runs in one arrangement.
# FXPAY_BENCH_NO_PIN=1 leaves the placement to the scheduler (to compare).
_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") and not os.environ.get("FXPAY_BENCH_NO_PIN") else []
SERVER_CPUS = set(_CPUS[-1:]) if len(_CPUS) >= 2 else set()
CLIENT_CPUS = set(_CPUS[:-1]) if len(_CPUS) >= 2 else set()


def pin_client() -> None:
    """Keeps this process (and the threads it starts from now on) off the sandbox's core."""
    if CLIENT_CPUS:
        os.sched_setaffinity(0, CLIENT_CPUS)


def _pin_server() -> None:
    if SERVER_CPUS:
        os.sched_setaffinity(0, SERVER_CPUS)


# FXPAY_BENCH_SERVER_PYTHON=/path/to/python runs the sandbox with that interpreter (and so the
# fxpay installed beside it) instead of this one's. By default an A/B that swaps fxpay builds
# swaps the sandbox too, and a change to the sandbox then moves every cell (bench/README.md,
# "Run of 2026-11-25"); with one server interpreter for both builds, only the clients differ.
SERVER_PYTHON = os.environ.get("FXPAY_BENCH_SERVER_PYTHON") or sys.executable


class SandboxProcess:
    """``python -m fxpay.sandbox --port 0 [--tls]`` in its own process, for the whole run: its
    CPU time is read from /proc around every timed measurement. ``transport``: ``http``,
    ``https`` (TLS offering only HTTP/1.1 by ALPN, ``FXPAY_SANDBOX_ALPN=http/1.1``) or ``h2``
    (TLS offering h2 and HTTP/1.1)."""

    def __init__(self, transport: str = "http") -> None:
        tls = transport != "http"
        cmd = [SERVER_PYTHON, "-m", "fxpay.sandbox", "--port", "0"] + (["--tls"] if tls else [])
        env = {**os.environ, "FXPAY_SANDBOX_ALPN": "http/1.1" if transport == "https" else "h2"}
        self.transport = transport
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, preexec_fn=_pin_server)
        need = {"FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_ADMIN_TOKEN"} | ({"FXPAY_CA_BUNDLE"} if tls else set())
        values: dict[str, str] = {}
        deadline = time.monotonic() + 30
        assert self.proc.stdout is not None
        while not need <= values.keys():
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the sandbox did not print its address and credentials")
            if "=" in line:
                k, _, v = line.strip().partition("=")
                values[k] = v
        self.pid = self.proc.pid
        self.admin_token = values["FXPAY_ADMIN_TOKEN"]  # the admin API: /_sandbox/stats counts connections
        self.target = Target(
            values["FXPAY_BASE_URL"], values["FXPAY_CLIENT_ID"], values["FXPAY_CLIENT_SECRET"], ca_bundle=values.get("FXPAY_CA_BUNDLE")
        )

    def cpu(self) -> float | None:
        return cpu_seconds(self.pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- one measurement ----------------------------------------------------------------------------


@dataclass
class Sample:
    """One timed measurement: ``n`` calls in ``seconds``; the server's and this process's CPU time meanwhile."""

    n: int
    seconds: float
    server_cpu: float | None = None
    client_cpu: float | None = None

    @property
    def rate(self) -> float:
        return self.n / self.seconds

    @property
    def server_share(self) -> float | None:
        """The server's CPU time per wall second (1.0 = one core busy all the time)."""
        return None if self.server_cpu is None else self.server_cpu / self.seconds


class Meter:
    """Around the timed part of a cell: wall time, the server's CPU time, this process's CPU time."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid

    def time(self, n: int, run: Callable[[], None]) -> Sample:
        s0 = cpu_seconds(self.server_pid) if self.server_pid else None
        c0 = time.process_time()
        t0 = time.perf_counter()
        run()
        seconds = time.perf_counter() - t0
        c1 = time.process_time()
        s1 = cpu_seconds(self.server_pid) if self.server_pid else None
        server = s1 - s0 if s0 is not None and s1 is not None else None
        return Sample(n, seconds, server, c1 - c0)

    async def atime(self, n: int, run: Callable[[], Awaitable[None]]) -> Sample:
        s0 = cpu_seconds(self.server_pid) if self.server_pid else None
        c0 = time.process_time()
        t0 = time.perf_counter()
        await run()
        seconds = time.perf_counter() - t0
        c1 = time.process_time()
        s1 = cpu_seconds(self.server_pid) if self.server_pid else None
        server = s1 - s0 if s0 is not None and s1 is not None else None
        return Sample(n, seconds, server, c1 - c0)


@dataclass(frozen=True)
class Plan:
    requests: int  # calls per timed measurement, at most
    warmup: int
    cell_seconds: float  # ... and no more than the warm-up's rate makes in this many seconds
    # ... but at least this many seconds of calls, whatever ``requests`` says. A fast cell
    # capped at ``requests`` lasts only milliseconds (--quick: 2,000 calls of fxpay's 8
    # threads took 45 ms), and so short a window measures scheduling luck, not the client:
    # a loop window of 54 ms ran at 37,000 req/s against its usual 9,500, which made
    # "8 threads >= 1.5x one thread" read 1.04x (issue 23 item 12).
    min_seconds: float = 0.5

    def count(self, warm_n: int, warm_seconds: float) -> int:
        """Slow clients get fewer calls (a cell takes about ``cell_seconds``), never fewer than
        1,000; fast ones at least ``min_seconds`` of calls."""
        rate = warm_n / warm_seconds if warm_seconds > 0 else float("inf")
        n = min(self.requests, max(1_000, rate * self.cell_seconds))
        if rate != float("inf"):
            n = max(n, rate * self.min_seconds)
        return int(n)


def _loop(get: Get, n: int) -> None:
    for _ in range(n):
        get()


def _threads(gets: list[Get], n: int) -> Callable[[], None]:
    """A run of ``len(gets)`` threads sharing ``n`` calls; started when the run is called."""
    k = len(gets)
    shares = [n // k + (1 if i < n % k else 0) for i in range(k)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(k + 1)

    def work(get: Get, share: int) -> None:
        barrier.wait()
        try:
            _loop(get, share)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(g, s)) for g, s in zip(gets, shares, strict=False)]
    for t in threads:
        t.start()

    def run() -> None:
        barrier.wait()  # the threads exist and wait: only the calls are timed
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    return run


async def _tasks(aget: Callable[[], Awaitable[object]], n: int) -> None:
    shares = [n // TASKS + (1 if i < n % TASKS else 0) for i in range(TASKS)]

    async def work(share: int) -> None:
        for _ in range(share):
            await aget()

    await asyncio.gather(*(work(s) for s in shares))


def run_cell(cell: Cell, t: Target, plan: Plan, meter: Meter) -> Sample:
    """Opens the client (authenticates), warms up in the cell's shape, then times its calls."""
    c = cell.client
    if cell.shape.startswith("async"):
        assert c.asynchronous is not None

        async def main() -> Sample:
            assert c.asynchronous is not None
            async with c.asynchronous(t, cell.protocol) as aget:
                w0 = time.perf_counter()
                await _tasks(aget, plan.warmup)
                n = plan.count(plan.warmup, time.perf_counter() - w0)
                return await meter.atime(n, lambda: _tasks(aget, n))

        return asyncio.run(main())
    assert c.blocking is not None
    with c.blocking(t, cell.protocol) as make_get:
        if cell.shape == "loop":
            get = make_get()
            w0 = time.perf_counter()
            _loop(get, plan.warmup)
            n = plan.count(plan.warmup, time.perf_counter() - w0)
            return meter.time(n, lambda: _loop(get, n))
        gets = [make_get() for _ in range(THREADS)]
        warm = _threads(gets, plan.warmup)
        w0 = time.perf_counter()
        warm()
        n = plan.count(plan.warmup, time.perf_counter() - w0)
        return meter.time(n, _threads(gets, n))


# -- the ceiling --------------------------------------------------------------------------------


def ceiling_binary() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return target / "release" / "examples" / "ceiling"


def build_ceiling() -> None:
    print("building the ceiling (cargo build --release --example ceiling) ...", flush=True)
    subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "ceiling"], cwd=ROOT, check=False)


def ceiling_args(t: Target, transport: str) -> list[str]:
    extra: list[str] = []
    if t.ca_bundle:
        extra += ["--ca", t.ca_bundle]
    if transport == "https":
        extra.append("--http1")
    return extra


def run_ceiling(t: Target, transport: str, n: int, server_pid: int | None) -> dict[str, float] | str:
    """Runs the built example; returns its rates (and the server's CPU shares), or why not."""
    if not ceiling_binary().exists():
        return "not built (cargo build --release --example ceiling)"
    # --self-stats: the ceiling's own CPU ticks in each measurement, for CPU per call.
    cmd = [str(ceiling_binary()), t.base_url, t.client_id, t.client_secret, t.quote_id, str(n), *ceiling_args(t, transport), "--self-stats"]
    if server_pid:
        cmd += ["--server-pid", str(server_pid)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        return f"failed: {p.stderr.strip()[-300:]}"
    raw: dict[str, float] = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        if v and not k.endswith("_self"):
            raw[k.strip()] = float(v)
    out = {k: v for k, v in raw.items() if k.endswith("_rps")}
    for line in p.stdout.splitlines():
        # `<name>_self=utime,stime,...` (clock ticks of the whole process during the measurement)
        k, _, v = line.partition("=")
        if k.endswith("_self") and v:
            name = k.removesuffix("_self")
            utime, stime = (float(x) for x in v.split(",")[:2])
            out[f"{name}_cpu_us"] = (utime + stime) / CLK_TCK / n * 1e6
    # The server's share of each measurement: its ticks over the measurement's wall time.
    for name in ("loop_mt", "loop_ct", "async64"):
        ticks, rps = raw.get(f"{name}_server_ticks"), raw.get(f"{name}_rps")
        if ticks is not None and rps:
            out[f"{name}_server_share"] = ticks / CLK_TCK / (n / rps)
    if "loop_mt_rps" in out and "loop_ct_rps" in out:
        best = "loop_mt" if out["loop_mt_rps"] >= out["loop_ct_rps"] else "loop_ct"
        if f"{best}_server_share" in out:
            out["loop_server_share"] = out[f"{best}_server_share"]
        if f"{best}_cpu_us" in out:
            out["loop_cpu_us"] = out[f"{best}_cpu_us"]
    return out


# -- cold start ---------------------------------------------------------------------------------


def cold_start(t: Target, reps: int) -> dict[str, Any]:
    """Median seconds from import to the first answered call of a fresh process, over https."""
    assert t.ca_bundle
    samples: dict[str, list[float]] = {}
    phases: dict[str, dict[str, list[float]]] = {}
    errors: dict[str, str] = {}
    runners: dict[str, list[str]] = {}
    for name, code in COLD.items():
        mod = name
        if importlib.util.find_spec(mod) is None:
            errors[name] = f"{mod} not installed"
            continue
        runners[name] = [sys.executable, "-c", code]
    if ceiling_binary().exists():
        runners["ceiling"] = [str(ceiling_binary())]
    else:
        errors["ceiling"] = "not built"
    args = [t.base_url, t.client_id, t.client_secret, t.quote_id, t.ca_bundle]
    for _ in range(reps):
        for name, cmd in runners.items():  # alternate, so drifting load hits all alike
            if name in errors:
                continue
            if name == "ceiling":
                full = [*cmd, t.base_url, t.client_id, t.client_secret, t.quote_id, "1", "--ca", t.ca_bundle, "--cold"]
            else:
                full = [*cmd, *args]
            p = subprocess.run(full, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            if p.returncode != 0:
                errors[name] = f"failed: {p.stderr.strip()[-300:]}"
                continue
            out = p.stdout.strip().splitlines()[-1]
            if out.startswith("cold_s="):
                samples.setdefault(name, []).append(float(out.partition("=")[2]))
                continue
            d = json.loads(out)
            samples.setdefault(name, []).append(float(d["total"]))
            for part in ("import", "client", "first_call"):
                phases.setdefault(name, {}).setdefault(part, []).append(float(d[part]))
    return {
        "median_s": {k: statistics.median(v) for k, v in samples.items()},
        "phases_median_s": {k: {part: statistics.median(v) for part, v in d.items()} for k, d in phases.items()},
        "samples_s": samples,
        "errors": errors,
        "processes": reps,
    }


# -- tracing cost (bench/tracing_cost.py's workers) ---------------------------------------------


def tracing_cost(t: Target, rounds: int, calls: int) -> dict[str, Any]:
    """The workers of bench/tracing_cost.py (off, off-again, api, hooks, sdk), each a process with
    its own fxpay client, against the plain sandbox; interleaved rounds of blocking and async
    loops. Returns the median per-call wall and CPU time of each, and their ratios to ``off``."""
    sys.path.insert(0, str(HERE))
    import tracing_cost as tc

    modes: list[str] = list(tc.MODES)
    shapes: list[str] = list(getattr(tc, "SHAPES", ["blocking"]))
    procs = {
        m: subprocess.Popen(
            [sys.executable, str(HERE / "tracing_cost.py"), "--worker", m, t.base_url, t.client_id, t.client_secret],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for m in modes
    }
    try:
        for m, p in procs.items():
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                return {"error": f"worker {m} did not start (opentelemetry-sdk installed?)"}

        def round_of(m: str, shape: str, n: int) -> dict[str, float]:
            p = procs[m]
            assert p.stdin is not None
            assert p.stdout is not None
            p.stdin.write(f"{shape} {n}\n")
            p.stdin.flush()
            return dict(json.loads(p.stdout.readline()))

        for m in modes:
            for shape in shapes:
                round_of(m, shape, max(20, calls // 10))
        wall: dict[str, dict[str, list[float]]] = {s: {m: [] for m in modes} for s in shapes}
        cpu: dict[str, dict[str, list[float]]] = {s: {m: [] for m in modes} for s in shapes}
        rng = random.Random(1)
        for _ in range(rounds):
            for shape in shapes:
                order = modes[:]
                rng.shuffle(order)
                for m in order:
                    r = round_of(m, shape, calls)
                    if m == "sdk" and r.get("spans", calls) != calls:
                        return {"error": f"the sdk worker made {r.get('spans')} spans for {calls} calls"}
                    wall[shape][m].append(r["seconds"] / calls)
                    cpu[shape][m].append(r["cpu"] / calls)
        # The hooks worker's tracer alone, no HTTP: the part of `hooks` any instrumentation pays.
        stubs = [round_of("hooks", "stub", 20 * calls).get("stub") for _ in range(5)] if hasattr(tc, "stub_cost") else []
    finally:
        for p in procs.values():
            if p.stdin:
                p.stdin.close()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    out: dict[str, Any] = {"rounds": rounds, "calls": calls, "modes": modes, "shapes": {}}
    if stubs and all(isinstance(x, float) for x in stubs):
        out["stub_tracer_us"] = statistics.median(x for x in stubs if x is not None) * 1e6
    for shape in shapes:
        base_w = statistics.median(wall[shape]["off"])
        base_c = statistics.median(cpu[shape]["off"])
        out["shapes"][shape] = {
            m: {
                "wall_us": statistics.median(wall[shape][m]) * 1e6,
                "cpu_us": statistics.median(cpu[shape][m]) * 1e6,
                "wall_ratio": statistics.median(wall[shape][m]) / base_w,
                "cpu_ratio": statistics.median(cpu[shape][m]) / base_c,
            }
            for m in modes
        }
    return out


# -- the sandbox's own throughput (wrk) ---------------------------------------------------------


def _bearer(t: Target) -> str:
    import httpx

    verify: Any = t.ssl_context() if t.tls else True
    with httpx.Client(verify=verify, trust_env=False) as c:
        r = c.post(t.token_url, data=t.form())
        r.raise_for_status()
        return str(r.json()["access_token"])


def sandbox_throughput(sb: SandboxProcess, seconds: int, connections: int = 64) -> dict[str, Any]:
    """wrk against the quote (http/1.1; over https wrk does not verify the certificate), with
    the server's CPU share. wrk and the sandbox share the machine's cores."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return {"error": "wrk not installed"}
    t = sb.target
    auth = f"Authorization: Bearer {_bearer(t)}"
    subprocess.run([wrk, "-t2", "-c16", "-d1s", "-H", auth, t.quote_url], capture_output=True, check=True)
    s0 = sb.cpu()
    t0 = time.perf_counter()
    out = subprocess.run(
        [wrk, "-t2", f"-c{connections}", f"-d{seconds}s", "-H", auth, t.quote_url], capture_output=True, text=True, check=True
    ).stdout
    wall = time.perf_counter() - t0
    s1 = sb.cpu()
    m = re.search(r"^Requests/sec:\s*([0-9.]+)", out, re.MULTILINE)
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    res: dict[str, Any] = {
        "rps": float(m.group(1)) if m else None,
        "command": f"wrk -t2 -c{connections} -d{seconds}s",
        "server_share": (s1 - s0) / wall if s0 is not None and s1 is not None else None,
    }
    if bad:
        res["error"] = f"{bad.group(1)} non-2xx answers"
    return res


# -- import time, memory, webhooks --------------------------------------------------------------


def _importtime_us(module: str) -> int:
    """Cumulative µs of the top-level import lines that ``import module`` adds."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    total = 0
    seen_target = False
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s*(\d+)\s*\|\s*(\d+)\s*\|( *)(\S+)", line)
        if not m:
            continue
        name, indent = m.group(4), len(m.group(3))
        # Lines are printed when an import finishes, children first: the top-level lines of
        # `import module` end with the line of `module` itself; earlier top-level lines that
        # belong to interpreter start-up (site, encodings, ...) come before `-c` runs.
        if indent == 1 and name == module:
            total += int(m.group(2))
            seen_target = True
    if not seen_target:
        raise RuntimeError(f"no import line for {module}")
    return total


def import_times(reps: int = 5) -> dict[str, float]:
    samples: dict[str, list[int]] = {"fxpay": [], "httpx": []}
    for _ in range(reps):
        for m in samples:  # alternate, so drifting load hits both alike
            samples[m].append(_importtime_us(m))
    return {m: statistics.median(v) for m, v in samples.items()}


def rss_child(args: list[str]) -> None:
    """Runs in a fresh process (``run.py --rss-child``): RSS after `first` get_quote calls and after `total`."""
    import psutil

    import fxpay

    base_url, client_id, secret, qid, first, total = args
    proc = psutil.Process()
    with fxpay.Client(client_id, secret, base_url=base_url) as c:
        for _ in range(int(first)):
            c.get_quote(qid)
        gc.collect()
        rss_first = proc.memory_info().rss
        for _ in range(int(total) - int(first)):
            c.get_quote(qid)
        gc.collect()
        rss_total = proc.memory_info().rss
    print(json.dumps({"rss_first": rss_first, "rss_total": rss_total}))


def rss_growth(t: Target, first: int, total: int) -> dict[str, float]:
    p = subprocess.run(
        [sys.executable, str(HERE / "run.py"), "--rss-child", t.base_url, t.client_id, t.client_secret, t.quote_id, str(first), str(total)],
        capture_output=True,
        text=True,
        check=True,
    )
    d = json.loads(p.stdout.strip().splitlines()[-1])
    mib = 1024 * 1024
    return {
        "calls_first": first,
        "calls_total": total,
        "rss_first_mib": d["rss_first"] / mib,
        "rss_total_mib": d["rss_total"] / mib,
        "growth_mib": (d["rss_total"] - d["rss_first"]) / mib,
    }


def webhook_rate(quick: bool) -> tuple[float | None, str]:
    """Calls bench/webhook_bench.py if present: ``run(quick=...)`` -> notifications/s."""
    path = HERE / "webhook_bench.py"
    if not path.exists():
        return None, "n/a (bench/webhook_bench.py not present)"
    try:
        spec = importlib.util.spec_from_file_location("webhook_bench", path)
        assert spec
        assert spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules["webhook_bench"] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        fn = next((getattr(mod, n) for n in ("run", "bench", "main") if callable(getattr(mod, n, None))), None)
        if fn is None:
            return None, "n/a (bench/webhook_bench.py has no run())"
        try:
            out = fn(quick=quick)
        except TypeError:
            out = fn()
        if isinstance(out, dict):
            rate = next((float(v) for k, v in out.items() if "per_s" in k or "rate" in k or k.endswith("/s")), None)
            return rate, json.dumps(out, default=str)
        if isinstance(out, (int, float)):
            return float(out), f"{float(out):,.0f} parses/s"
        return None, f"n/a (run() returned {out!r})"
    except Exception as e:
        return None, f"n/a (bench/webhook_bench.py failed: {type(e).__name__}: {e})"


# -- the environment ----------------------------------------------------------------------------


def fxpay_build() -> str:
    """``release`` or ``debug``: a debug extension carries DWARF sections."""
    spec = importlib.util.find_spec("fxpay._fxpay")
    if spec is None or not spec.origin:
        return "unknown"
    data = Path(spec.origin).read_bytes()
    return "debug" if b".debug_info" in data and len(data) > 30_000_000 else "release"


def fxpay_extension_sha256() -> str | None:
    """The SHA-256 of the installed fxpay extension (bench/instructions.py records it too)."""
    spec = importlib.util.find_spec("fxpay._fxpay") if importlib.util.find_spec("fxpay") else None
    if spec is None or not spec.origin:
        return None
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("fxpay", "httpx", "h2", "requests", "aiohttp", "pyreqwest", "wreq", "pyqwest", "opentelemetry-sdk", "psutil", "matplotlib"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    rustc = ""
    if shutil.which("rustc"):
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    wrk = ""
    if shutil.which("wrk"):
        first = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[0:1]
        wrk = first[0] if first else ""
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "pinning": {"sandbox": sorted(SERVER_CPUS), "clients": sorted(CLIENT_CPUS)},
        "sandbox_python": SERVER_PYTHON if sys.executable != SERVER_PYTHON else "the same as the clients'",
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "rustc": rustc,
        "wrk": wrk,
        "fxpay_build": fxpay_build(),
        "packages": versions,
    }


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Results:
    quick: bool
    requests: int
    rounds: int
    cell_seconds: float = 10.0
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # every round of every cell
    rps: dict[str, float] = field(default_factory=dict)  # best round
    server_share: dict[str, float] = field(default_factory=dict)  # of the best round
    cpu_us: dict[str, float] = field(default_factory=dict)  # the client's CPU µs per call, of the best round
    errors: dict[str, str] = field(default_factory=dict)
    ceiling: dict[str, dict[str, float]] = field(default_factory=dict)  # transport -> best of each value
    ceiling_note: str = ""
    cold: dict[str, Any] = field(default_factory=dict)
    tracing: dict[str, Any] = field(default_factory=dict)
    sandbox: dict[str, dict[str, Any]] = field(default_factory=dict)  # transport -> wrk result
    imports: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    webhook: str = ""
    webhook_rate: float | None = None
    env: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def select_cells(only: list[str] | None, quick: bool) -> list[Cell]:
    cells = CELLS
    if quick and not only:
        # --quick: the plain cells and one TLS pair: the loops of fxpay and httpx.Client over TLS (http/1.1).
        cells = [c for c in cells if c.transport == "http" or c.key in ("fxpay / loop / https", "httpx.Client / loop / https")]
    if only:
        cells = [c for c in cells if any(o.lower() in c.key.lower() for o in only)]
    return cells


def measure(args: Any) -> Results:
    import fxpay

    started = time.perf_counter()
    pin_client()
    plan = Plan(args.requests, args.warmup, args.cell_seconds, getattr(args, "min_cell_seconds", 0.5))
    res = Results(quick=args.quick, requests=args.requests, rounds=args.rounds, cell_seconds=args.cell_seconds, env=machine())
    if res.env["fxpay_build"] == "debug":
        print("WARNING: fxpay is a debug build; run `maturin develop --release` for numbers", file=sys.stderr)
    cells = select_cells(args.only, args.quick)
    for c in list(cells):
        if importlib.util.find_spec(c.client.module) is None:
            res.errors[c.key] = f"{c.client.module} not installed"
    # The ceiling runs on the transports of the measured cells (https: with HTTP/1.1 only).
    transports = [tr for tr in ("http", "https", "h2") if any(c.transport == tr for c in cells)]
    extras = not args.no_extras
    if not args.no_ceiling and not args.quick and shutil.which("cargo"):
        build_ceiling()
    servers: dict[str, SandboxProcess] = {}
    try:
        for tr in ("http", "https", "h2"):
            # the plain one always (RSS, tracing); h2 also for the cold start (a client's default)
            if tr == "http" or tr in transports or (tr == "h2" and extras and not args.quick):
                servers[tr] = SandboxProcess(tr)
        for server in servers.values():
            t = server.target
            with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as fx:
                t.quote_id = fx.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
            print(f"sandbox {t.base_url} (pid {server.pid}), quote {t.quote_id}", flush=True)
        print(
            f"{len(cells)} cells; up to {plan.requests:,} requests per cell "
            f"(about {plan.cell_seconds:g} s at most); {args.rounds} round(s)",
            flush=True,
        )

        def server_for(transport: str) -> SandboxProcess:
            return servers[transport]

        for r in range(args.rounds):
            order = cells if r % 2 == 0 else list(reversed(cells))
            for cell in order:
                if cell.key in res.errors:
                    continue
                sb = server_for(cell.transport)
                try:
                    gc.collect()
                    s = run_cell(cell, sb.target, plan, Meter(sb.pid))
                except Exception as e:
                    res.errors[cell.key] = f"{type(e).__name__}: {e}"
                    print(f"  {cell.key:<40} ERROR {res.errors[cell.key]}", flush=True)
                    continue
                res.samples.setdefault(cell.key, []).append({**asdict(s), "rate": s.rate, "server_share": s.server_share})
                share = f"server {s.server_share:.2f} cores" if s.server_share is not None else ""
                cpu = f"; client CPU {s.client_cpu / s.n * 1e6:.1f} µs/call" if s.client_cpu is not None else ""
                print(f"  round {r + 1}: {cell.key:<40} {s.rate:>10,.0f} req/s  ({s.n:,} calls; {share}{cpu})", flush=True)
            if not args.no_ceiling:
                for tr in transports:
                    sb = server_for(tr)
                    out = run_ceiling(sb.target, tr, plan.requests, sb.pid)
                    if isinstance(out, str):
                        res.ceiling_note = out
                        print(f"  ceiling ({tr}): {out}", flush=True)
                        break
                    best = res.ceiling.setdefault(tr, {})
                    for k, v in out.items():
                        if k.endswith("_rps") and v > best.get(k, 0.0):
                            best[k] = v
                            for suffix in ("_server_share", "_cpu_us"):  # of the round with the best rate
                                other = k.replace("_rps", suffix)
                                if other in out:
                                    best[other] = out[other]
                    rates = ", ".join(f"{k}={v:,.0f}" for k, v in out.items() if k.endswith("_rps"))
                    print(f"  round {r + 1}: ceiling ({tr}): {rates}", flush=True)
        for cell_key, samples in res.samples.items():
            best_s = max(samples, key=lambda d: float(d["rate"]))
            res.rps[cell_key] = best_s["rate"]
            if best_s["server_share"] is not None:
                res.server_share[cell_key] = best_s["server_share"]
            if best_s.get("client_cpu") is not None:
                res.cpu_us[cell_key] = best_s["client_cpu"] / best_s["n"] * 1e6

        if extras and not args.quick:  # --quick: only RSS and import time, as before
            res.cold = cold_start(servers["h2"].target, args.cold_processes)
            print(
                f"  cold start (median of {args.cold_processes}): "
                + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in res.cold["median_s"].items()),
                flush=True,
            )
            if importlib.util.find_spec("opentelemetry.sdk") is not None and (HERE / "tracing_cost.py").exists():
                try:
                    res.tracing = tracing_cost(servers["http"].target, 15, 400)
                except Exception as e:
                    res.tracing = {"error": f"{type(e).__name__}: {e}"}
                print(f"  tracing: {json.dumps(res.tracing.get('shapes', res.tracing))[:300]}", flush=True)
            else:
                res.tracing = {"error": "opentelemetry-sdk not installed"}
            for name in ("http", "https"):  # wrk speaks HTTP/1.1 only
                wrk_on = servers.get("http") if name == "http" else (servers.get("https") or servers.get("h2"))
                if wrk_on is None:
                    continue
                res.sandbox[name] = sandbox_throughput(wrk_on, 10)
                print(f"  sandbox ({name}) with wrk: {res.sandbox[name]}", flush=True)
            if importlib.util.find_spec("psutil") is None:
                print("  RSS: skipped (psutil not installed)", flush=True)
            else:
                first, total = (1_000, 20_000) if args.quick else (1_000, 100_000)
                res.rss = rss_growth(servers["http"].target, first, total)
                print(f"  RSS growth {first:,} -> {total:,} calls: {res.rss['growth_mib']:.2f} MiB", flush=True)
    finally:
        for sb in servers.values():
            sb.close()
    if not args.no_extras:
        res.imports = import_times(5)
        print(f"  import: fxpay {res.imports['fxpay'] / 1000:.1f} ms, httpx {res.imports['httpx'] / 1000:.1f} ms", flush=True)
    res.webhook_rate, res.webhook = webhook_rate(args.quick)
    res.seconds = time.perf_counter() - started
    return res

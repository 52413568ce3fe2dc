#!/usr/bin/env python3
"""fxpay benchmark: fxpay against the usual Python HTTP clients and a pure-Rust ceiling.

    python bench/run.py            # full run (report only, exit code 0)
    python bench/run.py --quick    # CI: small counts; exit 1 only if blocking fxpay < httpx.Client

Every client does the same work against one sandbox process (``python -m fxpay.sandbox``):
one client-credentials token, then ``GET /v1/payments/quotes/<id>`` with the bearer token, each
answer turned into exact ``Decimal`` values (baselines: ``json.loads(body, parse_float=Decimal)``
into a small frozen dataclass; fxpay: ``client.get_quote(id)``, an ``fxpay.Quote``).

Shapes: a blocking loop; 8 threads sharing the same total count; asyncio with 64 concurrent
tasks. Every cell is warmed up, then timed with ``time.perf_counter``; with ``--rounds R`` the
cells are measured R times, interleaved, and the best round is kept (other load on the machine
only ever slows a round down). See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

THREADS = 8
TASKS = 64


# -- the baselines' model: a small frozen dataclass of exact values ----------------------------


@dataclass(frozen=True)
class BFreebies:
    total: Decimal | int
    claimed: Decimal | int
    remaining: Decimal | int


@dataclass(frozen=True)
class BQuote:
    id: str
    buy_currency: str
    buy_amount: Decimal
    sell_currency: str
    sell_amount: Decimal
    customer_rate: Decimal
    inverse_customer_rate: Decimal
    fee: Decimal
    fee_currency: str
    freebies: BFreebies

    @classmethod
    def from_body(cls, body: bytes | str) -> BQuote:
        d = json.loads(body, parse_float=Decimal)
        f = d["freebies"]
        return cls(
            d["id"],
            d["buyCurrency"],
            Decimal(d["buyAmount"]),
            d["sellCurrency"],
            Decimal(d["sellAmount"]),
            Decimal(d["customerRate"]),
            Decimal(d["inverseCustomerRate"]),
            Decimal(d["fee"]),
            d["feeCurrency"],
            BFreebies(f["total"], f["claimed"], f["remaining"]),
        )


# -- the sandbox process ------------------------------------------------------------------------


@dataclass
class Target:
    base_url: str
    client_id: str
    client_secret: str
    quote_id: str = ""

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/v1/oauth/token"

    @property
    def quote_url(self) -> str:
        return f"{self.base_url}/v1/payments/quotes/{self.quote_id}"

    def form(self) -> dict[str, str]:
        return {
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "scope": "payments",
        }


class SandboxProcess:
    """``python -m fxpay.sandbox --port 0`` in its own process, for the whole run."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fxpay.sandbox", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        values: dict[str, str] = {}
        deadline = time.monotonic() + 30
        assert self.proc.stdout is not None
        while not {"FXPAY_BASE_URL", "FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET"} <= values.keys():
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the sandbox did not print its address and credentials")
            if "=" in line:
                k, _, v = line.strip().partition("=")
                values[k] = v
        self.target = Target(values["FXPAY_BASE_URL"], values["FXPAY_CLIENT_ID"], values["FXPAY_CLIENT_SECRET"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- shapes -------------------------------------------------------------------------------------


def time_loop(get: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        get()
    return time.perf_counter() - t0


def time_threads(gets: list[Callable[[], object]], n: int) -> float:
    """``len(gets)`` threads share ``n`` calls; each thread uses its own callable."""
    k = len(gets)
    shares = [n // k + (1 if i < n % k else 0) for i in range(k)]
    barrier = threading.Barrier(k + 1)
    errors: list[BaseException] = []

    def work(get: Callable[[], object], share: int) -> None:
        barrier.wait()
        try:
            for _ in range(share):
                get()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            errors.append(e)

    threads = [threading.Thread(target=work, args=(g, s)) for g, s in zip(gets, shares)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return elapsed


async def time_tasks(aget: Callable[[], Awaitable[object]], n: int, tasks: int = TASKS) -> float:
    shares = [n // tasks + (1 if i < n % tasks else 0) for i in range(tasks)]

    async def work(share: int) -> None:
        for _ in range(share):
            await aget()

    t0 = time.perf_counter()
    await asyncio.gather(*(work(s) for s in shares))
    return time.perf_counter() - t0


# -- clients: each cell sets up, authenticates once, warms up, then is timed --------------------


def _check(status: int) -> None:
    if status != 200:
        raise RuntimeError(f"GET answered HTTP {status}")


def fxpay_blocking(t: Target, shape: str, n: int, warm: int) -> float:
    import fxpay

    with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url) as c:
        qid = t.quote_id

        def get() -> object:
            return c.get_quote(qid)

        if shape == "loop":
            time_loop(get, warm)  # the first call fetches the token
            return time_loop(get, n)
        time_threads([get] * THREADS, warm)
        return time_threads([get] * THREADS, n)


def fxpay_async(t: Target, shape: str, n: int, warm: int) -> float:
    import fxpay

    async def main() -> float:
        async with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url) as c:
            qid = t.quote_id

            def aget() -> Awaitable[object]:
                return c.get_quote_async(qid)

            await time_tasks(aget, warm)
            return await time_tasks(aget, n)

    return asyncio.run(main())


def httpx_blocking(t: Target, shape: str, n: int, warm: int) -> float:
    import httpx

    with httpx.Client() as c:
        r = c.post(t.token_url, data=t.form())
        r.raise_for_status()
        headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
        url = t.quote_url

        def get() -> object:
            r = c.get(url, headers=headers)
            _check(r.status_code)
            return BQuote.from_body(r.content)

        if shape == "loop":
            time_loop(get, warm)
            return time_loop(get, n)
        time_threads([get] * THREADS, warm)
        return time_threads([get] * THREADS, n)


def httpx_async(t: Target, shape: str, n: int, warm: int) -> float:
    import httpx

    async def main() -> float:
        async with httpx.AsyncClient() as c:
            r = await c.post(t.token_url, data=t.form())
            r.raise_for_status()
            headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
            url = t.quote_url

            async def aget() -> object:
                r = await c.get(url, headers=headers)
                _check(r.status_code)
                return BQuote.from_body(r.content)

            await time_tasks(aget, warm)
            return await time_tasks(aget, n)

    return asyncio.run(main())


def requests_blocking(t: Target, shape: str, n: int, warm: int) -> float:
    import requests

    with requests.Session() as auth:
        r = auth.post(t.token_url, data=t.form())
        r.raise_for_status()
        headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
    url = t.quote_url
    sessions: list[requests.Session] = []

    def getter() -> Callable[[], object]:
        s = requests.Session()  # one session per thread: Session is not thread-safe
        s.headers.update(headers)
        sessions.append(s)

        def get() -> object:
            r = s.get(url)
            _check(r.status_code)
            return BQuote.from_body(r.content)

        return get

    try:
        if shape == "loop":
            get = getter()
            time_loop(get, warm)
            return time_loop(get, n)
        gets = [getter() for _ in range(THREADS)]
        time_threads(gets, warm)
        return time_threads(gets, n)
    finally:
        for s in sessions:
            s.close()


def aiohttp_async(t: Target, shape: str, n: int, warm: int) -> float:
    import aiohttp

    async def main() -> float:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as s:
            async with s.post(t.token_url, data=t.form()) as r:
                r.raise_for_status()
                token = (await r.json())["access_token"]
            headers = {"Authorization": f"Bearer {token}"}
            url = t.quote_url

            async def aget() -> object:
                async with s.get(url, headers=headers) as r:
                    _check(r.status)
                    return BQuote.from_body(await r.read())

            await time_tasks(aget, warm)
            return await time_tasks(aget, n)

    return asyncio.run(main())


def _form_body(t: Target) -> str:
    from urllib.parse import urlencode

    return urlencode(t.form())


def pyreqwest_blocking(t: Target, shape: str, n: int, warm: int) -> float:
    from pyreqwest.client import SyncClientBuilder

    with SyncClientBuilder().build() as c:
        r = (
            c.post(t.token_url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body_text(_form_body(t))
            .build()
            .send()
        )
        _check(r.status)
        auth = f"Bearer {json.loads(r.text())['access_token']}"
        url = t.quote_url

        def get() -> object:
            r = c.get(url).header("Authorization", auth).build().send()
            _check(r.status)
            return BQuote.from_body(r.text())

        if shape == "loop":
            time_loop(get, warm)
            return time_loop(get, n)
        time_threads([get] * THREADS, warm)
        return time_threads([get] * THREADS, n)


def pyreqwest_async(t: Target, shape: str, n: int, warm: int) -> float:
    from pyreqwest.client import ClientBuilder

    async def main() -> float:
        async with ClientBuilder().build() as c:
            r = await (
                c.post(t.token_url)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body_text(_form_body(t))
                .build()
                .send()
            )
            _check(r.status)
            auth = f"Bearer {json.loads(await r.text())['access_token']}"
            url = t.quote_url

            async def aget() -> object:
                r = await c.get(url).header("Authorization", auth).build().send()
                _check(r.status)
                return BQuote.from_body(await r.text())

            await time_tasks(aget, warm)
            return await time_tasks(aget, n)

    return asyncio.run(main())


@dataclass(frozen=True)
class Cell:
    client: str
    shape: str  # "loop", "8 threads", "async 64"
    run: Callable[[Target, str, int, int], float]
    module: str  # what must be importable

    @property
    def key(self) -> str:
        return f"{self.client} / {self.shape}"


CELLS = [
    Cell("fxpay", "loop", fxpay_blocking, "fxpay"),
    Cell("fxpay", "8 threads", fxpay_blocking, "fxpay"),
    Cell("fxpay", "async 64", fxpay_async, "fxpay"),
    Cell("httpx.Client", "loop", httpx_blocking, "httpx"),
    Cell("httpx.Client", "8 threads", httpx_blocking, "httpx"),
    Cell("httpx.AsyncClient", "async 64", httpx_async, "httpx"),
    Cell("requests.Session", "loop", requests_blocking, "requests"),
    Cell("requests.Session", "8 threads", requests_blocking, "requests"),
    Cell("aiohttp", "async 64", aiohttp_async, "aiohttp"),
    Cell("pyreqwest", "loop", pyreqwest_blocking, "pyreqwest"),
    Cell("pyreqwest", "8 threads", pyreqwest_blocking, "pyreqwest"),
    Cell("pyreqwest", "async 64", pyreqwest_async, "pyreqwest"),
]

SHAPES = ["loop", "8 threads", "async 64"]
# The baseline each row's ratio is taken against: httpx in the same shape.
BASELINE = {"loop": "httpx.Client / loop", "8 threads": "httpx.Client / 8 threads", "async 64": "httpx.AsyncClient / async 64"}
CEILING = "pure-Rust reqwest (ceiling)"


# -- the ceiling --------------------------------------------------------------------------------


def ceiling_binary() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return target / "release" / "examples" / "ceiling"


def run_ceiling(t: Target, n: int, quick: bool) -> dict[str, float] | str:
    """Runs the cargo example; returns its rates, or why it was not run."""
    if shutil.which("cargo") is None:
        return "cargo not found"
    args = [t.base_url, t.client_id, t.client_secret, t.quote_id, str(n)]
    if quick:
        # No build in --quick (it would take minutes): the binary as last built, if any.
        if not ceiling_binary().exists():
            return "not built (cargo build --release --example ceiling); skipped in --quick"
        cmd = [str(ceiling_binary()), *args]
    else:
        cmd = ["cargo", "run", "--quiet", "--release", "--example", "ceiling", "--", *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        return f"failed: {p.stderr.strip()[-300:]}"
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        if v:
            out[k.strip()] = float(v)
    return out


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
        if indent == 1:
            if name == module:
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


def _rss_child(args: list[str]) -> None:
    """Runs in a fresh process: RSS after `first` get_quote calls and after `total`."""
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
        [sys.executable, __file__, "--rss-child", t.base_url, t.client_id, t.client_secret, t.quote_id, str(first), str(total)],
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
        assert spec and spec.loader
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
    except Exception as e:  # noqa: BLE001 - another developer's file: report, never fail
        return None, f"n/a (bench/webhook_bench.py failed: {type(e).__name__}: {e})"


# -- the environment ----------------------------------------------------------------------------


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
    for pkg in ("fxpay", "httpx", "requests", "aiohttp", "pyreqwest", "psutil", "matplotlib"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    rustc = ""
    if shutil.which("rustc"):
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "rustc": rustc,
        "fxpay_build": fxpay_build(),
        "packages": versions,
    }


def fxpay_build() -> str:
    """``release`` or ``debug``: a debug extension carries DWARF sections."""
    spec = importlib.util.find_spec("fxpay._fxpay")
    if spec is None or not spec.origin:
        return "unknown"
    data = Path(spec.origin).read_bytes()
    return "debug" if b".debug_info" in data and len(data) > 30_000_000 else "release"


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Results:
    quick: bool
    requests: int
    rounds: int
    rps: dict[str, float] = field(default_factory=dict)
    rounds_rps: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    ceiling: dict[str, float] = field(default_factory=dict)
    ceiling_note: str = ""
    imports: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    webhook: str = ""
    webhook_rate: float | None = None
    env: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def measure(args: argparse.Namespace) -> Results:
    import fxpay

    started = time.perf_counter()
    n, rounds, warm = args.requests, args.rounds, args.warmup
    res = Results(quick=args.quick, requests=n, rounds=rounds, env=machine())
    if res.env["fxpay_build"] == "debug":
        print("WARNING: fxpay is a debug build; run `maturin develop --release` for numbers", file=sys.stderr)
    cells = [c for c in CELLS if importlib.util.find_spec(c.module) is not None]
    for c in CELLS:
        if c not in cells:
            res.errors[c.key] = f"{c.module} not installed"
    if args.only:
        cells = [c for c in cells if any(o.lower() in c.key.lower() for o in args.only)]
    if not args.no_ceiling and not args.quick and shutil.which("cargo"):
        print("building the ceiling (cargo build --release --example ceiling) ...", flush=True)
        subprocess.run(["cargo", "build", "--quiet", "--release", "--example", "ceiling"], cwd=ROOT, check=False)
    sb = SandboxProcess()
    try:
        t = sb.target
        with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url) as c:
            t.quote_id = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
        print(f"sandbox {t.base_url}, quote {t.quote_id}; {n:,} requests per cell, {rounds} round(s)", flush=True)
        for r in range(rounds):
            order = cells if r % 2 == 0 else list(reversed(cells))
            for cell in order:
                if cell.key in res.errors:
                    continue
                shape = "loop" if cell.shape == "loop" else "threads"
                try:
                    gc.collect()
                    elapsed = cell.run(t, shape, n, warm)
                except Exception as e:  # noqa: BLE001 - a broken client is reported, not fatal
                    res.errors[cell.key] = f"{type(e).__name__}: {e}"
                    print(f"  {cell.key:<34} ERROR {res.errors[cell.key]}", flush=True)
                    continue
                rate = n / elapsed
                res.rounds_rps.setdefault(cell.key, []).append(rate)
                print(f"  round {r + 1}: {cell.key:<34} {rate:>10,.0f} req/s", flush=True)
            if not args.no_ceiling:
                out = run_ceiling(t, n, args.quick)
                if isinstance(out, str):
                    res.ceiling_note = out
                    print(f"  ceiling: {out}", flush=True)
                else:
                    for k, v in out.items():
                        res.ceiling[k] = max(res.ceiling.get(k, 0.0), v)
                    print(f"  round {r + 1}: {CEILING}: {out}", flush=True)
        res.rps = {k: max(v) for k, v in res.rounds_rps.items()}
        if not args.no_extras and importlib.util.find_spec("psutil") is None:
            print("  RSS: skipped (psutil not installed)", flush=True)
        elif not args.no_extras:
            first, total = (1_000, 20_000) if args.quick else (1_000, 100_000)
            res.rss = rss_growth(t, first, total)
            print(f"  RSS growth {first:,} -> {total:,} calls: {res.rss['growth_mib']:.2f} MiB", flush=True)
    finally:
        sb.close()
    if not args.no_extras:
        res.imports = import_times(5)
        print(f"  import: fxpay {res.imports['fxpay'] / 1000:.1f} ms, httpx {res.imports['httpx'] / 1000:.1f} ms", flush=True)
    res.webhook_rate, res.webhook = webhook_rate(args.quick)
    res.seconds = time.perf_counter() - started
    return res


# -- targets ------------------------------------------------------------------------------------


@dataclass
class Check:
    name: str
    ratio: float | None  # measured
    need: str  # e.g. ">= 2.0"
    ok: bool | None

    @property
    def verdict(self) -> str:
        return "n/a" if self.ok is None else ("PASS" if self.ok else "FAIL")


def checks(res: Results) -> list[Check]:
    rps = res.rps

    def ratio(a: str, b: str) -> float | None:
        return rps[a] / rps[b] if a in rps and b in rps and rps[b] > 0 else None

    def at_least(name: str, r: float | None, k: float) -> Check:
        return Check(name, r, f">= {k:g}x", None if r is None else r >= k)

    out = [
        at_least("blocking fxpay >= 2x httpx.Client", ratio("fxpay / loop", "httpx.Client / loop"), 2),
        at_least("blocking fxpay >= 2x requests", ratio("fxpay / loop", "requests.Session / loop"), 2),
        at_least("async fxpay (64) >= 1.5x aiohttp", ratio("fxpay / async 64", "aiohttp / async 64"), 1.5),
        at_least("async fxpay (64) >= 5x httpx.AsyncClient", ratio("fxpay / async 64", "httpx.AsyncClient / async 64"), 5),
    ]
    for label, key, ck in (("blocking", "fxpay / loop", "loop_rps"), ("async 64", "fxpay / async 64", "async64_rps")):
        r = rps[key] / res.ceiling[ck] if key in rps and res.ceiling.get(ck) else None
        # "within 1.5x of the ceiling": fxpay's rate at least the ceiling's divided by 1.5.
        out.append(Check(f"{label} fxpay within 1.5x of the Rust ceiling", r, ">= 0.667x", None if r is None else r >= 1 / 1.5))
    out.append(at_least("fxpay 8 threads >= 1.5x one thread", ratio("fxpay / 8 threads", "fxpay / loop"), 1.5))
    if res.imports:
        r = res.imports["fxpay"] / res.imports["httpx"]
        out.append(Check("import fxpay <= 1/2 import httpx", r, "<= 0.5x", r <= 0.5))
    if res.rss:
        g = res.rss["growth_mib"]
        label = f"RSS growth < 5 MiB ({res.rss['calls_first']:,} -> {res.rss['calls_total']:,} calls)"
        out.append(Check(label, g, "< 5 MiB", g < 5))
    return out


# -- the report ---------------------------------------------------------------------------------


def rows(res: Results) -> list[tuple[str, str, float | None, float | None, str]]:
    """(client, shape, requests/s, ratio vs httpx in the same shape, note)."""
    out = []
    for shape in SHAPES:
        base = res.rps.get(BASELINE[shape])
        for c in CELLS:
            if c.shape != shape:
                continue
            v = res.rps.get(c.key)
            note = res.errors.get(c.key, "")
            out.append((c.client, shape, v, v / base if v and base else None, note))
        ck = {"loop": "loop_rps", "async 64": "async64_rps"}.get(shape)
        if ck:
            v = res.ceiling.get(ck)
            out.append((CEILING, shape, v, v / base if v and base else None, "" if v else res.ceiling_note))
    return out


def fmt_rate(v: float | None) -> str:
    return f"{v:,.0f}" if v else "n/a"


def markdown(res: Results, cks: list[Check]) -> str:
    e = res.env
    pk = e["packages"]
    lines = [
        f"# fxpay benchmark{' (--quick)' if res.quick else ''}",
        "",
        f"- machine: {e['cpu']}, {e['cores']} cores; load average at start {', '.join(f'{x:.2f}' for x in e['load_average'] or [])}",
        f"- {e['os']}; Python {e['python']}; {e['rustc']}; fxpay build: {e['fxpay_build']}",
        "- packages: " + ", ".join(f"{k} {v}" for k, v in pk.items()),
        f"- {res.requests:,} requests per cell after a warm-up; best of {res.rounds} interleaved round(s); "
        f"one sandbox process for all; run took {res.seconds:.0f} s",
        "",
        "| client | shape | requests/s | vs httpx (same shape) |",
        "|---|---|---:|---:|",
    ]
    for client, shape, v, r, note in rows(res):
        name = f"**{client}**" if client == "fxpay" else client
        ratio = f"{r:.2f}x" if r else ("n/a" + (f" ({note})" if note else ""))
        lines.append(f"| {name} | {shape} | {fmt_rate(v)} | {ratio} |")
    lines += ["", "| target | measured | needed | result |", "|---|---:|---:|---|"]
    for c in cks:
        m = "n/a" if c.ratio is None else (f"{c.ratio:.2f} MiB" if "MiB" in c.need else f"{c.ratio:.2f}x")
        lines.append(f"| {c.name} | {m} | {c.need} | {c.verdict} |")
    lines.append("")
    if res.imports:
        lines.append(
            f"- import time (median of 5 fresh processes, `-X importtime` cumulative): "
            f"fxpay {res.imports['fxpay'] / 1000:.1f} ms, httpx {res.imports['httpx'] / 1000:.1f} ms"
        )
    if res.rss:
        q = " (--quick: 1,000 vs 20,000 calls, not 100,000)" if res.quick else ""
        lines.append(
            f"- RSS of a fresh process: {res.rss['rss_first_mib']:.1f} MiB after {res.rss['calls_first']:,} get_quote calls, "
            f"{res.rss['rss_total_mib']:.1f} MiB after {res.rss['calls_total']:,}: growth {res.rss['growth_mib']:.2f} MiB{q}"
        )
    if res.ceiling.get("loop_mt_rps") and res.ceiling.get("loop_ct_rps"):
        lines.append(
            f"- the ceiling's loop is the faster of two arrangements: `block_on` on a multi-threaded runtime "
            f"(as `#[tokio::main]`) {fmt_rate(res.ceiling['loop_mt_rps'])} req/s, everything on one "
            f"`current_thread` runtime {fmt_rate(res.ceiling['loop_ct_rps'])} req/s"
        )
    lines.append(f"- webhook parse rate: {res.webhook}")
    if res.ceiling_note and not res.ceiling:
        lines.append(f"- ceiling: {res.ceiling_note}")
    for k, v in res.errors.items():
        lines.append(f"- {k}: {v}")
    return "\n".join(lines) + "\n"


def chart(res: Results, path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        print("chart: skipped (matplotlib not installed)")
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [(f"{c} ({s})", v) for c, s, v, _, _ in rows(res) if v]
    if not data:
        return
    labels, values = zip(*data)
    colors = ["#d62728" if lbl.startswith("fxpay") else "#7f7f7f" if lbl.startswith("pure-Rust") else "#1f77b4" for lbl in labels]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(labels) + 1.5))
    y = range(len(labels))[::-1]
    ax.barh(list(y), values, color=colors)
    ax.set_yticks(list(y), labels)
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:,.0f}", va="center", fontsize=8)
    ax.set_xlabel("requests/s (GET quote + exact Decimal parse), higher is better")
    e = res.env
    ax.set_title(f"fxpay benchmark{' (--quick)' if res.quick else ''}: {e['cpu']}, {e['cores']} cores, Python {e['python']}", fontsize=10)
    ax.set_xlim(0, max(values) * 1.18)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rss-child"]:
        _rss_child(argv[1:])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CI mode: small counts; exit 1 only if blocking fxpay is slower than httpx.Client")
    p.add_argument("--requests", type=int, help="requests per cell (default 20000; --quick 2000)")
    p.add_argument("--rounds", type=int, help="interleaved rounds, best kept (default 3; --quick 1)")
    p.add_argument("--warmup", type=int, help="warm-up requests per cell (default 1000; --quick 200)")
    p.add_argument("--out", type=Path, help="output folder (default bench/results, --quick bench/results/quick)")
    p.add_argument("--only", action="append", help="measure only cells whose name contains this (repeatable)")
    p.add_argument("--no-ceiling", action="store_true", help="skip the pure-Rust ceiling")
    p.add_argument("--no-extras", action="store_true", help="skip import time and RSS")
    args = p.parse_args(argv)
    args.requests = args.requests or (2_000 if args.quick else 20_000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (200 if args.quick else 1_000)
    out = args.out or (HERE / "results" / "quick" if args.quick else HERE / "results")

    res = measure(args)
    cks = checks(res)
    md = markdown(res, cks)
    print()
    print(md)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(md)
    chart(res, out / "results.png")
    doc = {
        "quick": res.quick,
        "requests_per_cell": res.requests,
        "rounds": res.rounds,
        "env": res.env,
        "rps": res.rps,
        "rounds_rps": res.rounds_rps,
        "ceiling": res.ceiling,
        "ceiling_note": res.ceiling_note,
        "errors": res.errors,
        "import_us": res.imports,
        "rss": res.rss,
        "webhook": {"rate": res.webhook_rate, "note": res.webhook},
        "targets": [{"name": c.name, "measured": c.ratio, "needed": c.need, "result": c.verdict} for c in cks],
        "seconds": res.seconds,
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    for c in cks:
        print(f"{c.verdict:<4}  {c.name}")
    print(f"wrote {out / 'results.md'}, results.png, results.json")

    if args.quick:
        fx, hx = res.rps.get("fxpay / loop"), res.rps.get("httpx.Client / loop")
        if fx is None:
            print("CI gate: FAIL (blocking fxpay could not be measured)")
            return 1
        if hx is None:
            print("CI gate: skipped (httpx.Client could not be measured)")
            return 0
        ok = fx >= hx
        print(f"CI gate (blocking fxpay >= httpx.Client): {'PASS' if ok else 'FAIL'} ({fx / hx:.2f}x)")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

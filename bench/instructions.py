#!/usr/bin/env python3
"""Instructions per call, counted by callgrind: fxpay, the pure-Rust ceiling and each peer, per cell.

The figure an A/B is judged by (bench/README.md, "What is measured"): unlike a rate or a CPU
time, it does not move with the host's load. Each cell's work (the client opened: a token and
one call; a warm-up of ``--warmup`` calls in the cell's shape; then ``N`` calls in that shape)
runs in a fresh client process under ``valgrind --tool=callgrind``, twice, with ``N`` = the two
values of ``--n``. The difference of the two totals over the difference of the calls is the
instructions per call: start-up, imports, the token and the warm-up cancel out. Only the client
process is counted (every thread of it: fxpay's and the peers' Rust runtimes included); the
sandbox runs in a process of its own (``python -m fxpay.sandbox``, as bench/run.py starts it),
one per transport.

    python bench/instructions.py                     # every client; loop and async 64; plain, TLS http/1.1, TLS h2
    python bench/instructions.py --quick             # small N: a smoke test (minutes), written to bench/results/quick/
    python bench/instructions.py --clients fxpay,ceiling --only "/ h2"
    python bench/instructions.py --label main --out bench/results/instructions-main   # another build, side by side
    python bench/instructions.py --compare bench/results/instructions-main.json bench/results/instructions.json
    python bench/instructions.py --clients none --merge A.json --merge B.json   # tables counted apart, as one

Writes ``<out>.md`` and ``<out>.json`` (default ``bench/results/instructions``): the table of
instructions per call per client and cell, the judged entries ``fxpay instructions per call <=
1.15x the Rust ceiling's: <cell>``, the build measured (fxpay's version, its extension's
SHA-256, the ceiling binary's), N and the warm-up. The ceiling
(``target/release/examples/ceiling``, ``CARGO_TARGET_DIR`` honoured; bench/measure.py builds
it) runs its own measurements (``--only loop_ct``, ``loop_mt``, ``async64``), whose warm-ups
grow with ``n``: its calls are counted exactly (see :func:`ceiling_calls`). Its loop is the
fewer instructions of its two arrangements (``loop_ct``: one thread; ``loop_mt``:
``block_on`` on the multi-threaded runtime). Without the binary the ceiling's column, and the
judged entries, are ``n/a``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402 - after the path is set
import report  # noqa: E402
from clients import CEILING, CELLS, FXPAY_CLIENTS, FXPAY_FIELDS, TRANSPORT_LABEL, Target, key, label  # noqa: E402

SHAPES = ("loop", "async 64")  # the cells the ceiling has (8 threads: --shape "8 threads")
DEFAULT_N = (256, 1280)
DEFAULT_WARMUP = 256
QUICK_N = (64, 192)
QUICK_WARMUP = 64
# The ceiling's measurements per shape (its ``--only``); a shape's figure is the fewest of them.
CEILING_RUNS = {"loop": ("loop_ct", "loop_mt"), "async 64": ("async64",)}
CEILING_TASKS = 64


def cell_label(shape: str, transport: str) -> str:
    """``loop, TLS h2``: how the targets of bench/report.py name a cell."""
    return f"{shape}, {TRANSPORT_LABEL[transport]}"


# -- the worker: one client process, run under callgrind -----------------------------------------


def worker(argv: list[str]) -> None:
    """``--worker CLIENT SHAPE TRANSPORT N WARMUP TARGET_JSON``: opens the client, warms up, makes N calls."""
    name, shape, transport, n_s, warm_s, target_json = argv
    n, warm = int(n_s), int(warm_s)
    (cell,) = [c for c in CELLS if c.client.name == name and c.shape == shape and c.transport == transport]
    t = Target(**json.loads(target_json))
    c = cell.client
    if shape.startswith("async"):

        async def main() -> None:
            assert c.asynchronous is not None
            async with c.asynchronous(t, cell.protocol) as aget:
                await measure._tasks(aget, warm)
                await measure._tasks(aget, n)

        asyncio.run(main())
        return
    assert c.blocking is not None
    with c.blocking(t, cell.protocol) as make_get:
        if shape == "loop":
            get = make_get()
            measure._loop(get, warm)
            measure._loop(get, n)
            return
        gets = [make_get() for _ in range(measure.THREADS)]
        measure._threads(gets, warm)()
        measure._threads(gets, n)()


# -- callgrind -----------------------------------------------------------------------------------


def _named(arg: str) -> list[str]:
    """An argument as it names a kept callgrind file: a JSON object (bench/journal.py's worker
    configuration) by its ``journal`` and ``shape``, so that two cells' files do not collide."""
    if not arg.startswith("{"):
        return [arg]
    try:
        cfg = json.loads(arg)
    except ValueError:
        return []
    return [str(cfg[k]) for k in ("journal", "shape") if isinstance(cfg, dict) and k in cfg]


def callgrind(cmd: list[str], timeout: float) -> int:
    """The instructions callgrind counted in ``cmd``'s process (all its threads), or raises.
    With ``FXPAY_BENCH_KEEP_CALLGRIND=<folder>`` in the environment, each run's callgrind file
    is kept there, named by its command's arguments (for ``callgrind_annotate``: a profile of
    where a cell's instructions go)."""
    with tempfile.TemporaryDirectory(prefix="fxpay-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "FXPAY_BENCH_UNDER_VALGRIND": "1"}
        p = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--trace-children=no", *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=measure.pin_client,
        )
        if p.returncode != 0:
            own = [ln for ln in (p.stdout + p.stderr).strip().splitlines() if ln.strip() and not re.match(r"==\d+==", ln)]
            tail = " / ".join(own[-3:])  # the client's last words, not valgrind's summary
            raise RuntimeError(f"exit {p.returncode}: {tail}")
        keep = os.environ.get("FXPAY_BENCH_KEEP_CALLGRIND")
        if keep:
            name = "_".join(re.sub(r"[^\w.-]+", "-", a) for a in cmd[1:7] for a in _named(a))
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(out, Path(keep) / f"{name}.callgrind")
        for line in out.read_text().splitlines():
            m = re.match(r"^(?:summary|totals):\s*(\d+)", line)
            if m:
                return int(m.group(1))
        raise RuntimeError("callgrind wrote no totals")


def connections_opened(sb: measure.SandboxProcess) -> int:
    """How many connections the sandbox has accepted so far (its ``/_sandbox/stats``, which
    counts no admin request's connection)."""
    import urllib.request

    t = sb.target
    req = urllib.request.Request(f"{t.base_url}/_sandbox/stats", headers={"Authorization": f"Bearer {sb.admin_token}"})
    with urllib.request.urlopen(req, timeout=30, context=t.ssl_context() if t.tls else None) as r:
        return int(json.loads(r.read())["connections"])


def counted(sb: measure.SandboxProcess, cmd: list[str], timeout: float) -> tuple[int, int]:
    """callgrind's total for ``cmd``, and the connections it opened to the sandbox. Each run
    opens the same number when the client reuses its connections; more at the larger N means
    that TLS handshakes are in the difference (a pool that let connections go)."""
    before = connections_opened(sb)
    total = callgrind(cmd, timeout)
    return total, connections_opened(sb) - before


def per_call(totals: tuple[int, int], calls: tuple[int, int]) -> float:
    """(total at the larger N - total at the smaller) / (the difference of the calls)."""
    dc = calls[1] - calls[0]
    if dc <= 0:
        raise ValueError("the two runs must differ in calls")
    return (totals[1] - totals[0]) / dc


def ceiling_calls(run: str, n: int) -> int:
    """The GETs the ceiling makes with ``--only run`` and ``n``: its warm-up of
    ``clamp(n / 10, 50, 1000)`` calls (async 64: at least 64) and then ``n``
    (crates/fxpay-core/examples/ceiling.rs)."""
    warm = min(max(n // 10, 50), 1000)
    if run == "async64":
        warm = max(warm, CEILING_TASKS)
    return warm + n


# -- the build ---------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_info() -> dict[str, Any]:
    """What was measured: fxpay's version, where it came from and its extension's hash; the ceiling's binary."""
    info: dict[str, Any] = {}
    try:
        dist = importlib.metadata.distribution("fxpay")
        info["fxpay_version"] = dist.version
        direct = dist.read_text("direct_url.json")
        if direct:
            info["fxpay_installed_from"] = json.loads(direct).get("url", "")
    except importlib.metadata.PackageNotFoundError:
        info["fxpay_version"] = "not installed"
    spec = importlib.util.find_spec("fxpay._fxpay") if importlib.util.find_spec("fxpay") else None
    if spec is not None and spec.origin:
        info["fxpay_extension"] = spec.origin
        info["fxpay_extension_sha256"] = _sha256(Path(spec.origin))
    info["fxpay_build"] = measure.fxpay_build() if spec is not None else "not installed"
    c = measure.ceiling_binary()
    if c.exists():
        info["ceiling_binary"] = str(c)
        info["ceiling_sha256"] = _sha256(c)
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
    info["bench_commit"] = git.stdout.strip() if git.returncode == 0 else ""
    for pkg in ("pyreqwest", "wreq", "pyqwest", "httpx", "requests", "aiohttp"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            info.setdefault("packages", {})[pkg] = importlib.metadata.version(pkg)
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True) if shutil.which("valgrind") else None
    info["valgrind"] = vg.stdout.strip() if vg else "not installed"
    info["python"] = sys.version.split()[0]
    return info


# -- the run -------------------------------------------------------------------------------------


_QUOTE = """
import sys, fxpay
base, cid, secret, ca = sys.argv[1:5]
with fxpay.Client(cid, secret, base_url=base, ca_bundle=ca or None) as c:
    print(c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD"))
"""


def _create_quote(t: Target) -> str:
    """One quote, made through fxpay by the sandbox's interpreter (so that a run of the peers
    alone needs no fxpay beside them)."""
    p = subprocess.run(
        [measure.SERVER_PYTHON, "-c", _QUOTE, t.base_url, t.client_id, t.client_secret, t.ca_bundle or ""],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return p.stdout.strip().splitlines()[-1]


def _target_json(t: Target) -> str:
    return json.dumps(dataclasses.asdict(t))


def measure_all(args: argparse.Namespace) -> dict[str, Any]:
    n_lo, n_hi = args.n
    clients = set(args.clients) if args.clients else None
    known = {c.client.name for c in CELLS} | {"ceiling", "none"}
    if clients is not None and clients - known:
        raise SystemExit(f"--clients: unknown {sorted(clients - known)}; known: {sorted(known)}")
    shapes = args.shape or list(SHAPES)
    trs = args.transport or ["http", "https", "h2"]
    cells = [c for c in CELLS if c.shape in shapes and c.transport in trs and (clients is None or c.client.name in clients)]
    if args.only:
        cells = [c for c in cells if any(o.lower() in c.key.lower() for o in args.only)]
    ceiling_cells: list[tuple[str, str]] = []
    if clients is None or "ceiling" in clients:
        ceiling_cells = [
            (shape, tr)
            for tr in trs
            for shape in shapes
            if shape in CEILING_RUNS and (not args.only or any(o.lower() in key(CEILING, shape, tr).lower() for o in args.only))
        ]
    transports = [tr for tr in ("http", "https", "h2") if any(c.transport == tr for c in cells) or any(t == tr for _, t in ceiling_cells)]
    doc: dict[str, Any] = {
        "tool": "callgrind (valgrind --tool=callgrind), the client process only",
        "method": "(total at N_hi - total at N_lo) / (calls at N_hi - calls at N_lo), after the client's opening call and a warm-up",
        "label": args.label,
        "quick": args.quick,
        "n": [n_lo, n_hi],
        "warmup": args.warmup,
        "build": build_info(),
        "per_call": {},
        "runs": {},
        "ceiling": {},
        "errors": {},
        # cells whose two runs opened a different number of connections: the larger N's minus the smaller's
        "churned": {},
        "notes": args.note or [],
    }
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    started = time.perf_counter()
    servers: dict[str, measure.SandboxProcess] = {}
    try:
        for tr in transports:
            servers[tr] = measure.SandboxProcess(tr)
            servers[tr].target.quote_id = _create_quote(servers[tr].target)
        for cell in cells:
            if importlib.util.find_spec(cell.client.module) is None:
                doc["errors"][cell.key] = f"{cell.client.module} not installed"
                print(f"  {cell.key:<40} n/a ({doc['errors'][cell.key]})", flush=True)
                continue
            t = servers[cell.transport].target
            totals, conns = [], []
            try:
                for n in (n_lo, n_hi):
                    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", cell.client.name, cell.shape, cell.transport]
                    total, opened = counted(servers[cell.transport], [*cmd, str(n), str(args.warmup), _target_json(t)], args.timeout)
                    totals.append(total)
                    conns.append(opened)
            except Exception as e:
                doc["errors"][cell.key] = f"{type(e).__name__}: {e}"
                print(f"  {cell.key:<40} ERROR {doc['errors'][cell.key]}", flush=True)
                continue
            v = per_call((totals[0], totals[1]), (n_lo, n_hi))
            doc["per_call"][cell.key] = v
            doc["runs"][cell.key] = {"totals": totals, "calls": [n_lo, n_hi], "connections": conns}
            if conns[0] != conns[1]:
                doc["churned"][cell.key] = conns[1] - conns[0]
            print(f"  {cell.key:<40} {v:>12,.0f} instructions/call (connections opened: {conns[0]}, {conns[1]})", flush=True)
        binary = measure.ceiling_binary()
        if ceiling_cells and not binary.exists():
            doc["ceiling_note"] = f"not built ({binary}: cargo build --release --example ceiling)"
            print(f"  ceiling: {doc['ceiling_note']}", flush=True)
        for shape, tr in ceiling_cells if binary.exists() else []:
            t = servers[tr].target
            for run in CEILING_RUNS[shape]:
                name = _arrangement(shape, tr, run)
                cmd = [str(binary), t.base_url, t.client_id, t.client_secret, t.quote_id]
                extra = [*measure.ceiling_args(t, tr), "--only", run]
                try:
                    results = [counted(servers[tr], [*cmd, str(n), *extra], args.timeout) for n in (n_lo, n_hi)]
                    totals, conns = [r[0] for r in results], [r[1] for r in results]
                except Exception as e:
                    doc["errors"][name] = f"{type(e).__name__}: {e}"
                    print(f"  {name:<40} ERROR {doc['errors'][name]}", flush=True)
                    continue
                calls = (ceiling_calls(run, n_lo), ceiling_calls(run, n_hi))
                v = per_call((totals[0], totals[1]), calls)
                doc["ceiling"].setdefault(tr, {})[run] = v
                doc["runs"][name] = {"totals": totals, "calls": list(calls), "connections": conns}
                print(f"  {name:<40} {v:>12,.0f} instructions/call (connections opened: {conns[0]}, {conns[1]})", flush=True)
            # The fewest of its arrangements whose two runs opened as many connections (calls
            # only); if none did, the fewest, marked as churned.
            got = {r: v for r in CEILING_RUNS[shape] if (v := doc["ceiling"].get(tr, {}).get(r)) is not None}
            even = [v for r, v in got.items() if _even(doc, _arrangement(shape, tr, r))]
            if got:
                doc["per_call"][key(CEILING, shape, tr)] = min(even or got.values())
                if not even:
                    r = min(got, key=lambda r: got[r])
                    c = doc["runs"][_arrangement(shape, tr, r)]["connections"]
                    doc["churned"][key(CEILING, shape, tr)] = c[1] - c[0]
    finally:
        for sb in servers.values():
            sb.close()
    for path in args.merge or []:
        merge(doc, path)
    doc["targets"] = targets(doc)
    doc["seconds"] = time.perf_counter() - started
    return doc


def _arrangement(shape: str, transport: str, run: str) -> str:
    """The key of one of the ceiling's measurements: ``<ceiling> / loop / h2 (loop_ct)``."""
    return key(CEILING, shape, transport) + ("" if run == "async64" else f" ({run})")


def _even(doc: dict[str, Any], name: str) -> bool:
    c = (doc["runs"].get(name) or {}).get("connections") or []
    return len(set(c)) <= 1


def _churn(table: dict[str, Any], k: str) -> int:
    """The larger N's connections minus the smaller's for cell ``k`` of a table; tables written
    before that was kept list the cell only, and their runs hold the counts."""
    churned = table.get("churned")
    if isinstance(churned, dict):
        return int(churned[k])
    c = (table.get("runs", {}).get(k) or {}).get("connections") or [0, 0]
    return int(c[1] - c[0])


def merge(doc: dict[str, Any], path: Path) -> None:
    """Adds the cells of an earlier table that this run did not count (``--merge``): the peers
    and the ceiling do not change with fxpay's build, so an A/B need count only fxpay again.
    The merged cells are listed (``merged``), with the file and the N they were counted with."""
    old = json.loads(path.read_text())
    if old.get("n") != doc["n"]:
        raise SystemExit(f"--merge {path}: counted with N = {old.get('n')}, this run with {doc['n']}")
    counted = set(doc["per_call"]) | set(doc["errors"])
    taken = []
    for k, v in old.get("per_call", {}).items():
        if k not in counted:
            doc["per_call"][k] = v
            taken.append(k)
            if k in old.get("runs", {}):
                doc["runs"][k] = old["runs"][k]
            if k in (old.get("churned") or {}):
                doc.setdefault("churned", {})[k] = _churn(old, k)
    for k, v in old.get("runs", {}).items():  # the ceiling's arrangements
        doc["runs"].setdefault(k, v)
    for tr, runs in (old.get("ceiling") or {}).items():
        for r, v in runs.items():
            doc["ceiling"].setdefault(tr, {}).setdefault(r, v)
    for k, v in (old.get("errors") or {}).items():
        if k not in counted and k not in doc["per_call"]:
            doc["errors"][k] = v
    if not doc["build"].get("ceiling_sha256") and old.get("build", {}).get("ceiling_sha256"):
        doc["build"]["ceiling_binary"] = old["build"].get("ceiling_binary")
        doc["build"]["ceiling_sha256"] = old["build"]["ceiling_sha256"]
    doc.setdefault("merged", []).append(
        {"from": str(path), "label": old.get("label", ""), "bench_commit": old.get("build", {}).get("bench_commit"), "cells": taken}
    )


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The judged entries, as bench/report.py names and judges them (``fxpay instructions per
    call <= 1.15x the Rust ceiling's: <cell>``, ``measured`` the ratio; ``n/a`` where a side is
    missing), in results.json's form."""
    checks = report.instruction_checks({"instructions": doc})
    return [{"name": c.name, "measured": c.measured, "needed": c.need, "result": c.verdict} for c in checks]


# -- the report ----------------------------------------------------------------------------------


def _clients_in(doc: dict[str, Any]) -> list[str]:
    """fxpay (lazy, then every field read), the ceiling, then the peers in bench/clients.py's
    order: those the document has."""
    seen = {k.split(" / ")[0] for k in [*doc.get("per_call", {}), *doc.get("errors", {})]}
    peers = [n for n in dict.fromkeys(c.client.name for c in CELLS) if n in seen and n not in FXPAY_CLIENTS]
    return [n for n in (*FXPAY_CLIENTS, CEILING) if n in seen] + peers


def _cells_in(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The (shape, transport) of every cell measured or failed, in the order of bench/run.py."""
    keys = {re.sub(r" \((loop_ct|loop_mt)\)$", "", k) for k in [*doc.get("per_call", {}), *doc.get("errors", {})]}
    names = _clients_in(doc)
    return [
        (shape, tr)
        for tr in ("http", "https", "h2")
        for shape in ("loop", "8 threads", "async 64")
        if any(key(n, shape, tr) in keys for n in names)
    ]


def markdown(doc: dict[str, Any]) -> str:
    b = doc["build"]
    pc: dict[str, float] = doc["per_call"]
    clients = _clients_in(doc)
    cells = _cells_in(doc)
    fields = FXPAY_FIELDS in clients
    lines = [
        f"# Instructions per call{' (--quick)' if doc.get('quick') else ''}: {doc.get('label') or 'this build'}",
        "",
        f"- {doc['tool']}; {doc['method']}; N = {doc['n'][0]:,} and {doc['n'][1]:,}, warm-up {doc['warmup']:,} calls",
        f"- fxpay {b.get('fxpay_version')} ({b.get('fxpay_build')} build; extension SHA-256 "
        f"{str(b.get('fxpay_extension_sha256', 'n/a'))[:16]}; from {b.get('fxpay_installed_from') or b.get('fxpay_extension', 'n/a')})",
        f"- ceiling: {b.get('ceiling_binary', 'not built')}"
        + (f" (SHA-256 {b['ceiling_sha256'][:16]})" if b.get("ceiling_sha256") else "")
        + "; its loop is the fewer of `loop_ct` (one thread) and `loop_mt` (`block_on`, multi-threaded)",
        f"- bench at {b.get('bench_commit')}; {b.get('valgrind')}; Python {b.get('python')}; "
        + ", ".join(f"{k} {v}" for k, v in (b.get("packages") or {}).items()),
        "",
        "| cell | "
        + " | ".join(f"**{label(c)}**" if c in FXPAY_CLIENTS else c for c in clients)
        + " | fxpay / ceiling |"
        + (" fxpay (every field read) / ceiling |" if fields else ""),
        "|---|" + "---:|" * (len(clients) + 1 + int(fields)),
    ]
    for shape, tr in cells:
        row = []
        for c in clients:
            v = pc.get(key(c, shape, tr))
            row.append(f"{v:,.0f}" if v is not None else "")
        c_v = pc.get(key(CEILING, shape, tr))
        ratios = []
        for fx in FXPAY_CLIENTS if fields else ("fxpay",):
            f = pc.get(key(fx, shape, tr))
            ratios.append(f"{f / c_v:.2f}x" if f and c_v else "n/a")
        lines.append(f"| {cell_label(shape, tr)} | " + " | ".join(row) + " | " + " | ".join(ratios) + " |")
    churn = [(k, r["connections"]) for k, r in (doc.get("runs") or {}).items() if len(set(r.get("connections") or [0])) > 1]
    if churn:
        lines += [
            "",
            "Runs that opened a different number of connections to the sandbox (the sandbox's count; TLS handshakes "
            "and connection set-up are then in the figure, not only calls):",
            "",
        ]
        lines += [f"- {k}: {c[0]} at N = {doc['n'][0]:,}, {c[1]} at N = {doc['n'][1]:,}" for k, c in churn]
    ceiling = doc.get("ceiling") or {}
    if ceiling:
        lines += ["", "The ceiling's measurements (`--only`; instructions per call):", ""]
        for tr, runs in ceiling.items():
            lines.append(f"- {TRANSPORT_LABEL[tr]}: " + ", ".join(f"`{r}` {v:,.0f}" for r, v in runs.items()))
    if doc.get("ceiling_note"):
        lines += ["", f"- ceiling: {doc['ceiling_note']}"]
    lines += ["", "| target | measured | needed | result |", "|---|---:|---:|---|"]
    for t in doc.get("targets") or []:
        m = "n/a" if t["measured"] is None else f"{t['measured']:.2f}x"
        lines.append(f"| {t['name']} | {m} | {t['needed']} | {t['result']} |")
    for k, v in (doc.get("errors") or {}).items():
        own = [ln.strip() for ln in v.splitlines() if ln.strip() and not re.match(r"==\d+==", ln)]
        lines.append(f"- {k}: {' / '.join(own)}")
    for note in doc.get("notes") or []:
        lines += ["", f"Note: {note}"]
    for m in doc.get("merged") or []:
        lines += ["", f"Counted earlier, in {m['from']} (bench at {m.get('bench_commit')}, the same N): {', '.join(m['cells'])}."]
    if doc.get("seconds"):
        lines += ["", f"Run took {doc['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def compare(a_path: Path, b_path: Path) -> str:
    """Two tables side by side (e.g. today's main and a branch): every cell both measured, B / A."""
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    la, lb = a.get("label") or a_path.stem, b.get("label") or b_path.stem
    lines = [
        f"| client / cell | {la} | {lb} | {lb} / {la} |",
        "|---|---:|---:|---:|",
    ]
    for k, va in a["per_call"].items():
        vb = b["per_call"].get(k)
        if vb is None:
            continue
        flag = " (rises > 10%)" if vb / va > 1.10 else ""
        lines.append(f"| {k} | {va:,.0f} | {vb:,.0f} | {vb / va:.3f}x{flag} |")
    return "\n".join(lines) + "\n"


def write(doc: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    md = markdown(doc)
    Path(f"{out}.md").write_text(md)
    Path(f"{out}.json").write_text(json.dumps(doc, indent=2) + "\n")
    print()
    print(md)
    print(f"wrote {out}.md and {out}.json")


def _n_pair(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition(",")
    a, b = int(lo), int(hi)
    if not 0 < a < b:
        raise argparse.ArgumentTypeError("--n LO,HI with 0 < LO < HI")
    return a, b


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(argv[1:])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"a smoke test: N = {QUICK_N}, warm-up {QUICK_WARMUP}")
    p.add_argument("--n", type=_n_pair, help=f"the two values of N, LO,HI (default {DEFAULT_N[0]},{DEFAULT_N[1]})")
    p.add_argument("--warmup", type=int, help=f"warm-up calls before the N (default {DEFAULT_WARMUP})")
    p.add_argument(
        "--clients", type=lambda s: [x.strip() for x in s.split(",") if x.strip()], help="comma-separated: fxpay, ceiling, wreq, ..."
    )
    p.add_argument("--shape", action="append", help="loop, async 64 or 8 threads (repeatable; default loop and async 64)")
    p.add_argument("--transport", action="append", choices=["http", "https", "h2"], help="http, https or h2 (repeatable; default all)")
    p.add_argument("--only", action="append", help="only cells whose name contains this (repeatable)")
    p.add_argument("--label", default="", help="the build's name in the table (e.g. main)")
    p.add_argument(
        "--out", type=Path, help="output path without suffix (default bench/results/instructions; --quick bench/results/quick/instructions)"
    )
    p.add_argument("--merge", type=Path, action="append", help="an earlier table (.json) to take uncounted cells from (repeatable)")
    p.add_argument("--note", action="append", help="a line for the table's page and JSON (repeatable)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per callgrind run")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("A_JSON", "B_JSON"), help="print two tables side by side and exit")
    args = p.parse_args(argv)
    if args.compare:
        print(compare(*args.compare), end="")
        return 0
    args.n = args.n or (QUICK_N if args.quick else DEFAULT_N)
    args.warmup = args.warmup if args.warmup is not None else (QUICK_WARMUP if args.quick else DEFAULT_WARMUP)
    out = args.out or (HERE / "results" / "quick" / "instructions" if args.quick else HERE / "results" / "instructions")
    doc = measure_all(args)
    write(doc, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

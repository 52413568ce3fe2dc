#!/usr/bin/env python3
"""Where the time goes: fxpay against the pure-Rust ceiling, per call, in the loop and with 64
asyncio tasks, over plain http, TLS http/1.1 and TLS h2.

    python bench/profile.py [--calls 5000]

For each cell it counts, over the timed calls and divided by their number: the calling
process's CPU time (user, system) and context switches summed over its threads (voluntary,
involuntary; ``/proc``), its system calls (``perf stat -e raw_syscalls:sys_enter``) and the
sandbox process's CPU time. fxpay is measured in this process (perf attached during the timed
calls only); the ceiling (``target/release/examples/ceiling --self-stats --only <name>``, built
by ``bench/run.py``) reads the same /proc counters of its own process around its timed calls,
and perf counts its whole process, so its syscalls per call include its warm-up calls (n/10)
and its start (a few hundred). Syscall and context-switch counts do not depend on the build's
optimisation; CPU times compare only when fxpay and the sandbox are a release build (the
output says which).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402

# /proc counters: CPU ticks (user, system), context switches (voluntary, involuntary), I/O syscalls (read-like, write-like)
FIELDS = ["utime", "stime", "vcsw", "ivcsw", "syscr", "syscw"]


def self_counters() -> list[float]:
    stat = Path("/proc/self/stat").read_text()
    f = stat[stat.rfind(")") + 2 :].split()
    vcsw = ivcsw = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    vcsw += int(line.split()[-1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    ivcsw += int(line.split()[-1])
        except OSError:
            pass
    io = dict(line.split(":", 1) for line in Path("/proc/self/io").read_text().splitlines())
    return [int(f[11]), int(f[12]), vcsw, ivcsw, int(io["syscr"]), int(io["syscw"])]


PERF_EVENTS = "raw_syscalls:sys_enter"


def perf_syscalls(stderr: str) -> float | None:
    """The count of ``perf stat -x,`` output."""
    for line in stderr.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] == PERF_EVENTS and parts[0].strip().isdigit():
            return float(parts[0])
    return None


class PerfAttach:
    """``perf stat`` attached to this process while a block runs (None if perf is missing)."""

    def __enter__(self) -> PerfAttach:
        self.proc = None
        self.syscalls: float | None = None
        if shutil.which("perf"):
            self.proc = subprocess.Popen(
                ["perf", "stat", "-x,", "-e", PERF_EVENTS, "-p", str(os.getpid())],
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            time.sleep(0.5)  # perf attaches to every thread; the calls start after it has
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            _, err = self.proc.communicate(timeout=30)
            self.syscalls = perf_syscalls(err)


def per_call(delta: list[float], n: int, seconds: float, server_s: float | None, syscalls: float | None) -> dict[str, float]:
    tick = 1e6 / measure.CLK_TCK
    out = {
        "syscalls": float("nan") if syscalls is None else syscalls / n,
        "rps": n / seconds,
        "user_us": delta[0] * tick / n,
        "sys_us": delta[1] * tick / n,
        "vcsw": delta[2] / n,
        "ivcsw": delta[3] / n,
        "syscr": delta[4] / n,
        "syscw": delta[5] / n,
    }
    if server_s is not None:
        out["server_us"] = server_s * 1e6 / n
    return out


def fxpay_cell(sb: measure.SandboxProcess, shape: str, n: int) -> dict[str, float]:
    import fxpay

    t = sb.target
    with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as c:
        qid = t.quote_id

        def timed(run: Callable[[], None]) -> dict[str, float]:
            with PerfAttach() as perf:
                s0, c0, t0 = sb.cpu(), self_counters(), time.perf_counter()
                run()
                secs, c1, s1 = time.perf_counter() - t0, self_counters(), sb.cpu()
            server = s1 - s0 if s0 is not None and s1 is not None else None
            return per_call([b - a for a, b in zip(c0, c1, strict=False)], n, secs, server, perf.syscalls)

        if shape == "loop":

            def loop(k: int) -> None:
                for _ in range(k):
                    c.get_quote(qid)

            loop(max(200, n // 10))
            return timed(lambda: loop(n))

        async def tasks(k: int) -> None:
            async def work(share: int) -> None:
                for _ in range(share):
                    await c.get_quote_async(qid)

            await asyncio.gather(*(work(k // 64 + (i < k % 64)) for i in range(64)))

        loop_ = asyncio.new_event_loop()
        try:
            loop_.run_until_complete(tasks(max(640, n // 10)))
            return timed(lambda: loop_.run_until_complete(tasks(n)))
        finally:
            loop_.close()


def ceiling_cells(sb: measure.SandboxProcess, transport: str, n: int) -> dict[str, dict[str, float]]:
    t = sb.target
    out = {}
    warm = min(max(n // 10, 50), 1000)
    for name, shape in (("loop_ct", "loop (current_thread)"), ("loop_mt", "loop (block_on, multi-thread)"), ("async64", "async 64")):
        cmd = [str(measure.ceiling_binary()), t.base_url, t.client_id, t.client_secret, t.quote_id, str(n)]
        cmd += [*measure.ceiling_args(t, transport), "--server-pid", str(sb.pid), "--self-stats", "--only", name]
        if shutil.which("perf"):
            cmd = ["perf", "stat", "-x,", "-e", PERF_EVENTS, "--", *cmd]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=True)
        raw = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
        if f"{name}_self" not in raw:
            continue
        delta = [float(x) for x in raw[f"{name}_self"].split(",")]
        rps = float(raw[f"{name}_rps"])
        ticks = raw.get(f"{name}_server_ticks")
        server = float(ticks) / measure.CLK_TCK if ticks is not None else None
        syscalls = perf_syscalls(p.stderr)
        # perf counted the whole process: its warm-up calls too (spread over all calls).
        r = per_call(delta, n, n / rps, server, None if syscalls is None else syscalls * n / (n + warm))
        out[shape] = r
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--transport", action="append", help="http, https, h2 (repeatable; default all)")
    args = ap.parse_args()
    import fxpay

    transports = args.transport or ["http", "https", "h2"]
    print(f"fxpay build: {measure.fxpay_build()}; {args.calls:,} calls per cell; pid {os.getpid()}")
    have_ceiling = measure.ceiling_binary().exists()
    if not have_ceiling:
        print("the ceiling is not built (cargo build --release --example ceiling): fxpay only")
    print(
        f"sandbox build: the same ({measure.fxpay_build()}); "
        "per call: CPU us of the caller, its context switches, its syscalls, the server's CPU us"
    )
    header = (
        f"{'transport':<10} {'who / shape':<42} {'req/s':>8} {'user us':>8} {'sys us':>8} "
        f"{'vcsw':>6} {'ivcsw':>6} {'syscalls':>8} {'server us':>9}"
    )
    print(header)
    for tr in transports:
        sb = measure.SandboxProcess(tr)
        try:
            t = sb.target
            with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as c:
                t.quote_id = c.create_quote(buy_currency="USD", buy_amount="1000.00", sell_currency="AUD")
            rows = {f"fxpay / {shape}": fxpay_cell(sb, shape, args.calls) for shape in ("loop", "async 64")}
            if have_ceiling:
                rows.update({f"ceiling / {k}": v for k, v in ceiling_cells(sb, tr, args.calls).items()})
            for who, r in rows.items():
                print(
                    f"{tr:<10} {who:<42} {r['rps']:>8,.0f} {r['user_us']:>8.1f} {r['sys_us']:>8.1f} {r['vcsw']:>6.2f} "
                    f"{r['ivcsw']:>6.2f} {r['syscalls']:>8.2f} {r.get('server_us', float('nan')):>9.1f}",
                    flush=True,
                )
        finally:
            sb.close()


if __name__ == "__main__":
    main()

"""The awaitable fallback path against the main path (issue 25): ``async 64`` (64 tasks on
one loop, each awaiting ``get_quote_async`` in turn) on

- the default loop, which can watch a descriptor: results are handed over by one byte on a
  socket pair the loop watches (``loop.add_reader``), no runtime thread takes the GIL;
- a loop without ``add_reader`` (as Windows' proactor loop): results are handed over in
  batches through ``loop.call_soon_threadsafe``, called on a runtime thread (through the exit
  gate), once per batch;
- uvloop (the main path), for reference.

The sandbox runs in a process of its own. Interleaved rounds; the ratio is taken within each
round (the two cells run back to back), and its median is the figure: on a shared machine
the rate of a whole round drifts more than the two paths differ.

    python bench/fallback_loop.py [--requests 20000] [--rounds 7]

Writes bench/results/fallback_loop.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fxpay

HERE = Path(__file__).resolve().parent
TASKS = 64


class NoReaderLoop(asyncio.SelectorEventLoop):
    """Windows' ``ProactorEventLoop`` has no ``add_reader``: it raises NotImplementedError."""

    def add_reader(self, fd: Any, callback: Any, *args: Any) -> None:  # type: ignore[override]
        raise NotImplementedError


def _uvloop() -> asyncio.AbstractEventLoop:
    import uvloop

    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "default loop (add_reader)": asyncio.new_event_loop,
    "loop without add_reader (fallback)": NoReaderLoop,
    "uvloop (add_reader)": _uvloop,
}

SERVE = """
import sys
from fxpay.testing import Sandbox
sb = Sandbox()
print(sb.base_url, sb.client_id, sb.client_secret, flush=True)
sys.stdin.read()
"""


def rate(make_loop: Callable[[], asyncio.AbstractEventLoop], base_url: str, cid: str, secret: str, n: int) -> float:
    async def run() -> float:
        async with fxpay.Client(cid, secret, base_url=base_url) as c:
            qid = await c.create_quote_async(buy_currency="USD", buy_amount="10.00", sell_currency="EUR")
            per_task = n // TASKS

            async def worker(count: int) -> None:
                for _ in range(count):
                    await c.get_quote_async(qid)

            await asyncio.gather(*(worker(50) for _ in range(TASKS)))  # warm-up
            started = time.perf_counter()
            await asyncio.gather(*(worker(per_task) for _ in range(TASKS)))
            return per_task * TASKS / (time.perf_counter() - started)

    loop = make_loop()
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url, cid, secret = server.stdout.readline().split()
        best: dict[str, float] = {}
        rounds: dict[str, list[float]] = {name: [] for name in LOOPS}
        for _ in range(args.rounds):
            for name, make in LOOPS.items():
                r = rate(make, base_url, cid, secret, args.requests)
                rounds[name].append(round(r))
                best[name] = max(best.get(name, 0.0), r)
    finally:
        server.terminate()
        server.wait()
    main_name, fallback_name = "default loop (add_reader)", "loop without add_reader (fallback)"
    ratios = sorted(f / m for f, m in zip(rounds[fallback_name], rounds[main_name], strict=True))
    ratio = statistics.median(ratios)
    result = {
        "requests_per_cell": args.requests,
        "rounds": rounds,
        "best": {k: round(v) for k, v in best.items()},
        "fallback_vs_main_per_round": [round(x, 3) for x in ratios],
        "fallback_vs_main_median": round(ratio, 3),
        "fallback_vs_main_best": round(best[fallback_name] / best[main_name], 3),
        "fxpay": fxpay.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fallback_loop.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# async {TASKS}: the fallback path (a loop without add_reader) against the main path",
        "",
        f"{args.requests:,} calls per cell, {args.rounds} interleaved rounds; the sandbox in its own process.",
        "",
        "| loop | best req/s | rounds |",
        "|---|---:|---|",
        *(f"| {k} | {best[k]:,.0f} | {', '.join(f'{r:,}' for r in rounds[k])} |" for k in LOOPS),
        "",
        f"Fallback / main (default loop), the median of the per-round ratios: **{ratio:.2f}x** (target: at least 0.8x);"
        f" per round, sorted: {', '.join(f'{x:.2f}' for x in ratios)}; best against best: {best[fallback_name] / best[main_name]:.2f}x.",
    ]
    (args.out / "fallback_loop.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

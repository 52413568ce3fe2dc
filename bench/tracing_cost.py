"""What OpenTelemetry tracing costs on the sandbox loop, off and on, measured in one run.

Five worker processes call ``get_quote`` against one in-process sandbox, each set up once:

- ``off``: ``opentelemetry`` never imported (what an application without tracing sees);
- ``off-again``: the same, a second time: its ratio to ``off`` is the noise of the run;
- ``api``: ``opentelemetry.trace`` imported, no SDK provider set (the API's proxy provider);
- ``hooks``: the SDK provider set, but fxpay's span maker does nothing: what fxpay's own
  plumbing costs (the per-call check, the GIL taken twice per attempt), without the SDK's work;
- ``sdk``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` and the in-memory
  exporter (one span per call, exported synchronously).

Rounds are interleaved (every worker runs one round, in a shuffled order, before the next
round starts), so a change in the machine's load hits all of them alike. Each round is a
blocking loop of ``--calls`` calls and an asyncio loop of as many awaited calls. Prints the
median wall time and CPU time (of the worker process: on a busy machine the steadier of the
two) per call of each worker, and their ratios to ``off``.

Usage: python bench/tracing_cost.py [--rounds 15] [--calls 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import time

MODES = ["off", "off-again", "api", "hooks", "sdk"]
SHAPES = ["blocking", "async"]


def worker(mode: str, base_url: str, client_id: str, client_secret: str) -> None:
    """Reads ``<shape> <calls>`` lines; answers each with the seconds that many calls took."""
    exporter = None
    if mode == "api":
        import opentelemetry.trace  # noqa: F401 - imported, and nothing more
    elif mode in ("hooks", "sdk"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    import fxpay

    if mode == "hooks":
        from fxpay import _otel

        def start(self: object, *args: object) -> list[tuple[str, str]]:
            return []

        def end(self: object, *args: object) -> None:
            pass

        _otel.CallTrace.start = start  # type: ignore[method-assign,assignment]
        _otel.CallTrace.end = end  # type: ignore[method-assign,assignment]
    client = fxpay.Client(client_id, client_secret, base_url=base_url)
    qid = client.create_quote(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")

    async def run_async(n: int) -> None:
        for _ in range(n):
            await client.get_quote_async(qid)

    loop = asyncio.new_event_loop()
    print("ready", flush=True)
    for line in sys.stdin:
        shape, n = line.split()
        t0, c0 = time.perf_counter(), time.process_time()
        if shape == "blocking":
            for _ in range(int(n)):
                client.get_quote(qid)
        else:
            loop.run_until_complete(run_async(int(n)))
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        spans = 0
        if exporter is not None:
            spans = len(exporter.get_finished_spans())
            exporter.clear()
        print(json.dumps({"seconds": took, "cpu": cpu, "spans": spans}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--worker", nargs=4, metavar=("MODE", "URL", "ID", "SECRET"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return

    from fxpay.testing import Sandbox

    with Sandbox() as sb:
        procs = {
            m: subprocess.Popen(
                [sys.executable, __file__, "--worker", m, sb.base_url, sb.client_id, sb.client_secret],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for m in MODES
        }
        for m, p in procs.items():
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise SystemExit(f"worker {m} did not start")

        def round_of(m: str, shape: str, n: int) -> dict[str, float]:
            p = procs[m]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(f"{shape} {n}\n")
            p.stdin.flush()
            return dict(json.loads(p.stdout.readline()))

        for m in MODES:  # warm-up: connections, token, caches
            for shape in SHAPES:
                round_of(m, shape, max(20, args.calls // 10))
        per_call: dict[tuple[str, str], list[float]] = {(m, s): [] for m in MODES for s in SHAPES}
        cpu_per_call: dict[tuple[str, str], list[float]] = {(m, s): [] for m in MODES for s in SHAPES}
        rng = random.Random(1)
        for _ in range(args.rounds):
            for shape in SHAPES:
                order = MODES[:]
                rng.shuffle(order)
                for m in order:
                    r = round_of(m, shape, args.calls)
                    if m == "sdk" and r["spans"] != args.calls:
                        raise SystemExit(f"the sdk worker made {r['spans']} spans for {args.calls} calls")
                    per_call[(m, shape)].append(r["seconds"] / args.calls)
                    cpu_per_call[(m, shape)].append(r["cpu"] / args.calls)
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.close()
            p.wait(30)

    print(f"get_quote on the in-process sandbox: {args.rounds} interleaved rounds of {args.calls} calls")
    print("wall: median time per call; cpu: median CPU time per call of the calling process")
    print(f"{'shape':<9} {'worker':<10} {'wall us':>9} {'vs off':>8} {'cpu us':>9} {'vs off':>8}")
    for shape in SHAPES:
        base = statistics.median(per_call[("off", shape)])
        cbase = statistics.median(cpu_per_call[("off", shape)])
        for m in MODES:
            med = statistics.median(per_call[(m, shape)])
            cmed = statistics.median(cpu_per_call[(m, shape)])
            print(
                f"{shape:<9} {m:<10} {med * 1e6:>9.1f} {med / base:>7.3f}x {cmed * 1e6:>9.1f} {cmed / cbase:>7.3f}x"
            )


if __name__ == "__main__":
    main()

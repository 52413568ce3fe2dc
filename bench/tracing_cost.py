"""What OpenTelemetry tracing costs on the sandbox loop, off and on, measured in one run.

Worker processes call ``get_quote`` against one in-process sandbox, each set up once:

- ``off``: ``opentelemetry`` never imported (what an application without tracing sees);
- ``off-again``: the same, a second time: its ratio to ``off`` is the noise of the run;
- ``api``: ``opentelemetry.trace`` imported, no SDK provider set (the API's proxy provider);
- ``hooks``: a tracer provider whose tracer hands out a do-nothing recording span: everything
  fxpay does with a provider (the per-call check, the GIL taken per attempt, the attribute
  dict, the ``traceparent`` written from the span's context, the end) without the SDK's work;
- ``sdk``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` and the in-memory
  exporter (one span per call, exported synchronously);
- ``httpx`` and ``httpx-sdk``: the same request (``GET`` the quote with the bearer token, the
  JSON decoded) made with plain ``httpx``, then with ``httpx`` instrumented by
  ``opentelemetry-instrumentation-httpx`` under the same SDK set-up: what the SDK costs a
  client that OpenTelemetry instruments itself.

Rounds are interleaved (every worker runs one round, in a shuffled order, before the next
round starts), so a change in the machine's load hits all of them alike. Each round is a
blocking loop of ``--calls`` calls and an asyncio loop of as many awaited calls. Prints the
median wall time and CPU time (of the worker process: on a busy machine the steadier of the
two) per call of each worker, and their ratios to ``off`` (to ``httpx`` for ``httpx-sdk``).
Then the SDK's own cost of one span with no HTTP at all, measured in the ``sdk`` worker: an
empty span started and ended, and one with fxpay's attributes.

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
#: The same request made with httpx, plain and instrumented (run by this script, not by bench/measure.py).
HTTPX_MODES = ["httpx", "httpx-sdk"]
#: The worker each one is compared with.
BASE = {"httpx-sdk": "httpx"}
SHAPES = ["blocking", "async"]


class _StubSpan:
    """A recording span that does nothing (the ``hooks`` worker)."""

    def __init__(self, context: object) -> None:
        self._context = context

    def get_span_context(self) -> object:
        return self._context

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: object) -> None:
        pass

    def set_attributes(self, attributes: object) -> None:
        pass

    def set_status(self, *args: object, **kwargs: object) -> None:
        pass

    def end(self, end_time: int | None = None) -> None:
        pass


def _stub_provider() -> object:
    from opentelemetry import trace

    context = trace.SpanContext(trace_id=0x5B8AA5A2D2C872E8321CF37308D69DF2, span_id=0x051581BF3CB55C13, is_remote=False)

    class Tracer:
        def start_span(self, name: str, **kwargs: object) -> _StubSpan:
            return _StubSpan(context)

    class Provider(trace.TracerProvider):
        def get_tracer(self, *args: object, **kwargs: object) -> Tracer:  # type: ignore[override]
            return Tracer()

    return Provider()


def span_cost(n: int) -> dict[str, float]:
    """The SDK's own cost, in seconds, of one span with no HTTP: started and ended empty, and
    with the attributes fxpay gives a span (the provider set up by the ``sdk`` worker)."""
    from opentelemetry import trace

    tracer = trace.get_tracer("span-cost")
    attributes: dict[str, str | int] = {
        "http.request.method": "GET",
        "url.template": "/v1/payments/quotes/{quote_id}",
        "server.address": "127.0.0.1",
        "server.port": 8080,
    }
    t0 = time.perf_counter()
    for _ in range(n):
        tracer.start_span("GET").end()
    empty = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        span = tracer.start_span("GET /v1/payments/quotes/{quote_id}", kind=trace.SpanKind.CLIENT, attributes=attributes)
        span.set_attribute("http.response.status_code", 200)
        span.end()
    full = (time.perf_counter() - t0) / n
    return {"empty": empty, "attributes": full}


def stub_cost(n: int) -> float:
    """Seconds per call of what the ``hooks`` worker's tracer itself runs for one attempt, with
    no HTTP and no fxpay: ``start_span`` with fxpay's arguments, ``get_span_context``,
    ``is_recording``, ``set_attributes`` and ``end``, the attribute dicts made here. Any
    instrumentation pays this much with that tracer; ``hooks`` minus ``off`` minus this is
    fxpay's own part."""
    from opentelemetry import context, trace

    tracer = trace.get_tracer("stub-cost")
    parent = context.get_current()
    kind = trace.SpanKind.CLIENT
    t0 = time.perf_counter()
    for _ in range(n):
        attributes: dict[str, str | int] = {
            "http.request.method": "GET",
            "url.template": "/v1/payments/quotes/{quote_id}",
            "server.address": "127.0.0.1",
            "server.port": 8080,
        }
        span = tracer.start_span("GET /v1/payments/quotes/{quote_id}", context=parent, kind=kind, attributes=attributes)
        span.get_span_context()
        span.is_recording()
        span.set_attributes({"http.response.status_code": 200, "http.response.header.x-request-id": ["0"]})
        span.end(0)
    return (time.perf_counter() - t0) / n


def worker(mode: str, base_url: str, client_id: str, client_secret: str) -> None:
    """Reads ``<shape> <calls>`` lines; answers each with the seconds that many calls took."""
    exporter = None
    if mode == "api":
        import opentelemetry.trace  # noqa: F401 - imported, and nothing more
    elif mode == "hooks":
        from opentelemetry import trace

        trace.set_tracer_provider(_stub_provider())  # type: ignore[arg-type]
    elif mode in ("sdk", "httpx-sdk"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    if mode == "httpx-sdk":
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument()
    import fxpay

    client = fxpay.Client(client_id, client_secret, base_url=base_url)
    qid = client.create_quote(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
    loop = asyncio.new_event_loop()

    if mode.startswith("httpx"):
        import httpx

        url = f"{base_url}/v1/payments/quotes/{qid}"
        auth = {"authorization": f"Bearer {client._payments_token().access_token}"}
        http = httpx.Client(trust_env=False)

        async def make_async() -> httpx.AsyncClient:
            return httpx.AsyncClient(trust_env=False)

        ahttp = loop.run_until_complete(make_async())

        def run_blocking(n: int) -> None:
            for _ in range(n):
                r = http.get(url, headers=auth)
                r.raise_for_status()
                r.json()

        async def run_async(n: int) -> None:
            for _ in range(n):
                r = await ahttp.get(url, headers=auth)
                r.raise_for_status()
                r.json()

    else:

        def run_blocking(n: int) -> None:
            for _ in range(n):
                client.get_quote(qid)

        async def run_async(n: int) -> None:
            for _ in range(n):
                await client.get_quote_async(qid)

    if exporter is not None:
        exporter.clear()
    print("ready", flush=True)
    for line in sys.stdin:
        shape, n = line.split()
        if shape == "span":
            print(json.dumps(span_cost(int(n))), flush=True)
            continue
        if shape == "stub":
            print(json.dumps({"stub": stub_cost(int(n))}), flush=True)
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        if shape == "blocking":
            run_blocking(int(n))
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
    modes = MODES + HTTPX_MODES
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
            for m in modes
        }
        for m, p in procs.items():
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise SystemExit(f"worker {m} did not start")

        def round_of(m: str, shape: str, n: int) -> dict[str, float]:
            p = procs[m]
            assert p.stdin is not None
            assert p.stdout is not None
            p.stdin.write(f"{shape} {n}\n")
            p.stdin.flush()
            return dict(json.loads(p.stdout.readline()))

        for m in modes:  # warm-up: connections, token, caches
            for shape in SHAPES:
                round_of(m, shape, max(20, args.calls // 10))
        per_call: dict[tuple[str, str], list[float]] = {(m, s): [] for m in modes for s in SHAPES}
        cpu_per_call: dict[tuple[str, str], list[float]] = {(m, s): [] for m in modes for s in SHAPES}
        rng = random.Random(1)
        for _ in range(args.rounds):
            for shape in SHAPES:
                order = modes[:]
                rng.shuffle(order)
                for m in order:
                    r = round_of(m, shape, args.calls)
                    if m in ("sdk", "httpx-sdk") and r["spans"] != args.calls:
                        raise SystemExit(f"the {m} worker made {r['spans']} spans for {args.calls} calls")
                    per_call[(m, shape)].append(r["seconds"] / args.calls)
                    cpu_per_call[(m, shape)].append(r["cpu"] / args.calls)
        spans = [round_of("sdk", "span", 20 * args.calls) for _ in range(5)]
        stubs = [round_of("hooks", "stub", 20 * args.calls)["stub"] for _ in range(5)]
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.close()
            p.wait(30)

    print(f"get_quote on the in-process sandbox: {args.rounds} interleaved rounds of {args.calls} calls")
    print("wall: median time per call; cpu: median CPU time per call of the calling process")
    print("vs: the ratio to `off` (to `httpx` for `httpx-sdk`); +us: the wall time added to it per call")
    print(f"{'shape':<9} {'worker':<10} {'wall us':>9} {'vs':>8} {'+us':>7} {'cpu us':>9} {'vs':>8}")
    for shape in SHAPES:
        for m in modes:
            base = statistics.median(per_call[(BASE.get(m, "off"), shape)])
            cbase = statistics.median(cpu_per_call[(BASE.get(m, "off"), shape)])
            med = statistics.median(per_call[(m, shape)])
            cmed = statistics.median(cpu_per_call[(m, shape)])
            print(
                f"{shape:<9} {m:<10} {med * 1e6:>9.1f} {med / base:>7.3f}x {(med - base) * 1e6:>7.1f}"
                f" {cmed * 1e6:>9.1f} {cmed / cbase:>7.3f}x"
            )
    empty = statistics.median(s["empty"] for s in spans)
    full = statistics.median(s["attributes"] for s in spans)
    print(f"the SDK alone, no HTTP (median of 5 loops of {20 * args.calls}): one empty span {empty * 1e6:.1f} us;")
    print(f"  one span with fxpay's attributes and a status code {full * 1e6:.1f} us")
    stub = statistics.median(stubs)
    print(f"the hooks worker's tracer alone, no HTTP, no fxpay (its five calls per attempt): {stub * 1e6:.2f} us")


if __name__ == "__main__":
    main()

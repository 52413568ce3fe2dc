"""Instruction counts of tracing, for a machine too busy for timings to mean much.

Runs ``N`` blocking ``get_quote`` calls against an in-process sandbox in one mode, or ``N``
SDK spans with no HTTP; run it under callgrind twice with two values of ``N`` and divide the
difference of the totals by the difference of ``N`` (start-up cancels out)::

    for n in 500 2500; do N=$n valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \\
        python bench/tracing_instructions.py hooks 2>&1 | grep refs; done

Modes: ``off`` (no tracer provider), ``hooks`` (a provider whose tracer does nothing: see
``tracing_cost.py``), ``stub`` (that tracer's own calls for one attempt, no HTTP, no fxpay:
the part of ``hooks`` any instrumentation pays), ``sdk`` (the SDK, ``SimpleSpanProcessor``, in-memory exporter),
``span-empty`` and ``span-attributes`` (the SDK alone: an empty span, and one with fxpay's
attributes and a status code). Counts are of the whole process, the sandbox's side included.

``python bench/tracing_instructions.py --count`` runs those callgrind pairs itself for
``off``, ``hooks`` and ``stub`` and writes ``bench/results/tracing_instructions.{json,md}``:
fxpay's own instructions per traced attempt (``hooks`` - ``off`` - ``stub``: what the hooks
add, less the do-nothing tracer's own Python calls, which any instrumentation pays) against
an untraced call's (``off``). bench/report.py judges it: at most 10%.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# The two values of N per mode (the stub's calls are cheap: more of them).
COUNT_N = {"off": (200, 1200), "hooks": (200, 1200), "stub": (1000, 11000)}
OWN_LIMIT = 0.10


def count(out: str) -> dict[str, object]:
    """Counts ``off``, ``hooks`` and ``stub`` under callgrind and writes ``<out>.json`` and
    ``<out>.md``; returns the document."""
    import json
    import subprocess

    from instructions import callgrind

    per_attempt: dict[str, float] = {}
    for mode, (lo, hi) in COUNT_N.items():
        totals = []
        for n in (lo, hi):
            os.environ["N"] = str(n)
            totals.append(callgrind([sys.executable, os.path.abspath(__file__), mode], timeout=1800))
        per_attempt[mode] = (totals[1] - totals[0]) / (hi - lo)
        print(f"  {mode:<6} {per_attempt[mode]:>10,.0f} instructions per call (N = {lo:,} and {hi:,})", flush=True)
    own = per_attempt["hooks"] - per_attempt["off"] - per_attempt["stub"]
    import fxpay

    doc: dict[str, object] = {
        "per_call": per_attempt,
        "own": own,
        "own_ratio": own / per_attempt["off"],
        "limit": OWN_LIMIT,
        "n": COUNT_N,
        "fxpay": fxpay.__file__,
        "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip(),
    }
    with open(f"{out}.json", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(f"{out}.md", "w") as f:
        f.write(
            "# Tracing: fxpay's own instructions per traced attempt\n\n"
            f"callgrind, the whole process (the in-process sandbox included); {doc['valgrind']}; "
            "(total at N_hi - total at N_lo) / (N_hi - N_lo) per mode (bench/tracing_instructions.py --count)\n\n"
            "| mode | instructions per call |\n|---|---:|\n"
            + "".join(f"| `{m}` | {v:,.0f} |\n" for m, v in per_attempt.items())
            + f"\nfxpay's own per traced attempt (`hooks` - `off` - `stub`): **{own:,.0f}**, "
            f"{own / per_attempt['off']:.1%} of an untraced call (target: at most {OWN_LIMIT:.0%}).\n"
        )
    print(f"fxpay's own per traced attempt: {own:,.0f} ({own / per_attempt['off']:.1%} of off); wrote {out}.json and {out}.md")
    return doc


def main() -> None:
    if sys.argv[1:2] == ["--count"]:
        here = os.path.dirname(os.path.abspath(__file__))
        count(sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "results", "tracing_instructions"))
        return
    from opentelemetry import trace

    n = int(os.environ.get("N", "1000"))
    mode = sys.argv[1]
    exporter = None
    if mode in ("hooks", "stub"):
        from tracing_cost import _stub_provider

        trace.set_tracer_provider(_stub_provider())  # type: ignore[arg-type]
    elif mode != "off":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    if mode == "stub":
        from tracing_cost import stub_cost

        stub_cost(n)
        return
    if mode.startswith("span-"):
        assert exporter is not None
        tracer = trace.get_tracer("span-cost")
        attributes: dict[str, str | int] = {
            "http.request.method": "GET",
            "url.template": "/v1/payments/quotes/{quote_id}",
            "server.address": "127.0.0.1",
            "server.port": 8080,
        }
        for _ in range(n):
            if mode == "span-empty":
                tracer.start_span("GET").end()
            else:
                span = tracer.start_span("GET /v1/payments/quotes/{quote_id}", kind=trace.SpanKind.CLIENT, attributes=attributes)
                span.set_attribute("http.response.status_code", 200)
                span.end()
            exporter.clear()
        return

    import fxpay
    from fxpay.testing import Sandbox

    with Sandbox() as sb:
        client = fxpay.Client(sb.client_id, sb.client_secret, base_url=sb.base_url)
        qid = client.create_quote(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
        client.get_quote(qid)
        for _ in range(n):
            client.get_quote(qid)
            if exporter is not None:
                exporter.clear()


if __name__ == "__main__":
    main()

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
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
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

"""OpenTelemetry spans for fxpay's calls (extra ``fxpay[otel]``: ``opentelemetry-api``).

The binding (``crates/fxpay-python/src/observe/``) makes the spans; this module holds the
few pieces it asks Python for. Per call, while the caller holds the GIL (in the calling
thread or task), the binding asks ``trace.get_tracer_provider()`` whether a tracer provider
is configured, asking :func:`tracer` once per provider (and :func:`_w3c_parts` once per
global propagator), and captures ``context.get_current()`` as the parent (:func:`call_trace`
is the same in Python). Per attempt the binding starts a ``CLIENT`` span with
``tracer.start_span`` (attributes built in Rust, as one dict), writes the W3C
``traceparent`` (and ``tracestate``) itself from the span's context when the global
propagator is W3C's (else it asks :func:`inject`), and ends the span itself
(``set_attributes``, ``set_status`` for an error, ``end``).

Attributes follow the HTTP semantic conventions and never carry a secret: the method, the
route template, the host, the port, the status, the error's type and the resend count.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._fxpay import __version__

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

__all__ = ["baggage_headers", "call_trace", "inject", "receiving", "tracer"]

#: Set when a tracer provider may come from the environment even before anyone imports
#: ``opentelemetry.trace``.
_ENV_PROVIDER = bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"))

#: The last provider seen and its tracer: getting a tracer is not free.
_tracer_of: tuple[object, Tracer] | None = None


def _trace_module() -> Any:
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None and _ENV_PROVIDER:
        try:
            import opentelemetry.trace as trace
        except ImportError:
            return None
    return trace


def tracer() -> Tracer | None:
    """fxpay's tracer, or ``None`` when no tracer provider is configured."""
    trace = _trace_module()
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    global _tracer_of
    cached = _tracer_of
    if cached is None or cached[0] is not provider:
        cached = (provider, provider.get_tracer("fxpay", __version__))
        _tracer_of = cached
    return cached[1]


#: The last global propagator seen: (it, fxpay writes its headers itself, its baggage part).
_textmap_of: tuple[object, bool, Any] | None = None


def _w3c_parts(textmap: object) -> tuple[bool, Any]:
    """Whether ``textmap`` is W3C trace context (and W3C baggage) only, and its baggage propagator."""
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if type(textmap) is CompositePropagator:
        # A private name of the API (issue 55): a composite's parts have no public accessor,
        # and the default global propagator (tracecontext + baggage) is a composite. Read
        # once per global propagator; without it every attempt asks ``inject``: a traced
        # blocking get_quote took 15,199 more instructions with a do-nothing tracer (97,597
        # -> 112,796) and 28,856 more with the SDK (284,376 -> 313,232; release build,
        # callgrind). Anything unexpected means "not W3C's" (``inject`` is asked).
        parts = getattr(textmap, "_propagators", None)
        if not isinstance(parts, (list, tuple)):
            return False, None
    else:
        parts = [textmap]
    context = [p for p in parts if type(p) is TraceContextTextMapPropagator]
    baggage = [p for p in parts if type(p) is W3CBaggagePropagator]
    if len(context) != 1 or len(baggage) > 1 or len(context) + len(baggage) != len(parts):
        return False, None
    return True, (baggage[0] if baggage else None)


def _fixed_headers(parent: Context) -> list[tuple[str, str]] | None:
    """The headers every attempt of a call sends besides ``traceparent`` and ``tracestate``
    (``baggage``) when the global propagator is W3C's, so fxpay writes those two itself;
    ``None`` when it is another one, which :func:`inject` then asks for each attempt."""
    from opentelemetry import propagate

    global _textmap_of
    textmap = propagate.get_global_textmap()
    cached = _textmap_of
    if cached is None or cached[0] is not textmap:
        cached = (textmap, *_w3c_parts(textmap))
        _textmap_of = cached
    if not cached[1]:
        return None
    if cached[2] is None:
        return []
    return baggage_headers(cached[2], parent)


def baggage_headers(propagator: Any, parent: Context) -> list[tuple[str, str]]:
    """The ``baggage`` header of ``parent`` from W3C's baggage propagator."""
    carrier: dict[str, str] = {}
    propagator.inject(carrier, context=parent)
    return list(carrier.items())


def call_trace() -> tuple[Tracer, Context, list[tuple[str, str]] | None] | None:
    """What a call starting now needs to make its spans, or ``None`` when tracing is off:
    the tracer, the parent context and the fixed headers (see :func:`_fixed_headers`)."""
    t = tracer()
    if t is None:
        return None
    from opentelemetry import context

    parent = context.get_current()
    return t, parent, _fixed_headers(parent)


def inject(span: Span, parent: Context) -> list[tuple[str, str]]:
    """The headers that carry ``span``, from the global propagator (when it is not W3C's only)."""
    from opentelemetry import propagate, trace

    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span, parent))
    return list(carrier.items())


@contextmanager
def receiving(headers: Mapping[str, str]) -> Iterator[None]:
    """A span around the handling of a received notification, current while it runs.

    When a ``traceparent`` came with the notification and the current span (if any, made by
    a framework's own instrumentation) is not in that trace already, a ``SERVER`` span
    that continues the sender's trace (linked to the current span). Otherwise a child of
    the current span (``INTERNAL``), or a new trace's ``SERVER`` span when there is none.
    Nothing when tracing is off.
    """
    t = tracer()
    if t is None:
        yield
        return
    from opentelemetry import propagate, trace

    current = trace.get_current_span().get_span_context()
    incoming = propagate.extract(headers)
    remote = trace.get_current_span(incoming).get_span_context()
    links = []
    if remote.is_valid and remote.trace_id != current.trace_id:
        parent, kind = incoming, trace.SpanKind.SERVER
        if current.is_valid:
            links.append(trace.Link(current))
    elif current.is_valid:
        parent, kind = None, trace.SpanKind.INTERNAL
    else:
        parent, kind = None, trace.SpanKind.SERVER
    with t.start_as_current_span("process DealCreated", context=parent, kind=kind, links=links):
        yield

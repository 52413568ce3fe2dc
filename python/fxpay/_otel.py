"""OpenTelemetry spans for fxpay's calls (extra ``fxpay[otel]``: ``opentelemetry-api``).

The Rust core asks :func:`call_trace` once per call, in the calling thread or task. With no
tracer provider configured (nothing imported ``opentelemetry.trace``, or the global provider
is still the API's proxy or a no-op one) the answer is ``None`` and the call makes no span.
Otherwise the answer captures the current context as the parent, and the core calls its
``start`` and ``end`` around each attempt, from whatever thread runs the attempt: one
``CLIENT`` span per attempt, whose ``traceparent`` (and ``tracestate``) goes with the request.

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

__all__ = ["call_trace", "receiving", "tracer"]

#: Set when a tracer provider may come from the environment even before anyone imports
#: ``opentelemetry.trace``.
_ENV_PROVIDER = bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"))

_UNSET = object()

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
    # The global provider as the API keeps it: None until one is set. Reading it spares the
    # common "API imported, no provider" case the environment look-up get_tracer_provider()
    # makes on every call; any other value goes through the public function.
    if getattr(trace, "_TRACER_PROVIDER", _UNSET) is None and not _ENV_PROVIDER:
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


def call_trace() -> CallTrace | None:
    """The span maker of a call starting now, or ``None`` when tracing is off."""
    t = tracer()
    if t is None:
        return None
    from opentelemetry import context

    return CallTrace(t, context.get_current())


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


class CallTrace:
    """Starts and ends the span of each attempt of one call (attempts run one at a time)."""

    __slots__ = ("_parent", "_span", "_tracer")

    def __init__(self, tracer: Tracer, parent: Context) -> None:
        self._tracer = tracer
        self._parent = parent
        self._span: Span | None = None

    def start(
        self,
        name: str,
        method: str,
        template: str | None,
        address: str | None,
        port: int | None,
        resend_count: int,
    ) -> list[tuple[str, str]]:
        """Starts the attempt's span; returns the headers that carry it."""
        from opentelemetry import propagate, trace

        attributes: dict[str, str | int] = {"http.request.method": method}
        if template is not None:
            attributes["url.template"] = template
        if address is not None:
            attributes["server.address"] = address
        if port is not None:
            attributes["server.port"] = port
        if resend_count:
            attributes["http.request.resend_count"] = resend_count
        span = self._tracer.start_span(
            name, context=self._parent, kind=trace.SpanKind.CLIENT, attributes=attributes
        )
        self._span = span
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span, self._parent))
        return list(carrier.items())

    def end(self, status: int | None, error_type: str | None) -> None:
        """Ends the attempt's span with its answer's status or its error."""
        span, self._span = self._span, None
        if span is None:
            return
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if error_type is not None:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR))
        span.end()

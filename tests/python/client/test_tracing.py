"""OpenTelemetry: one CLIENT span per attempt, its parent, its attributes, the traceparent
sent with each attempt, and the receivers continuing the sender's trace.

Spans are collected with the SDK's in-memory exporter; the global tracer provider is set
for each test and reset afterwards, so other tests run with tracing off.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

import fxpay
from fxpay import _otel
from fxpay.testing import Sandbox

import webhook_support as tw
from recorder_support import Recorder, serve

QUOTE = "/v1/payments/quotes/{quote_id}"


def _reset_global_provider() -> None:
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]


#: Notified each time a span ends (after the exporter has it).
ENDED = threading.Condition()


#: Names of the spans started, in order.
STARTED: list[str] = []


class Notify(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        with ENDED:
            STARTED.append(span.name)
            ENDED.notify_all()

    def on_end(self, span: ReadableSpan) -> None:
        with ENDED:
            ENDED.notify_all()


def wait_for(exporter: InMemorySpanExporter, done: Callable[[tuple[ReadableSpan, ...]], bool]) -> tuple[ReadableSpan, ...]:
    """The finished spans, once ``done`` holds for them (a server may end its span after it answered)."""
    with ENDED:
        ENDED.wait_for(lambda: done(exporter.get_finished_spans()), timeout=10)
    return exporter.get_finished_spans()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A global SDK tracer provider exporting to memory, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(Notify())
    STARTED.clear()
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        _reset_global_provider()
        provider.shutdown()


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


def client_spans(exporter: InMemorySpanExporter, name: str | None = None) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT and (name is None or s.name == name)]


def new_quote(c: fxpay.Client) -> str:
    return c.create_quote(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")


def test_a_blocking_call_is_a_client_span_under_the_current_one(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    tracer = trace.get_tracer("test")
    with sandbox.client() as c:
        qid = new_quote(c)
        spans.clear()
        with tracer.start_as_current_span("checkout") as parent:
            c.get_quote(qid)
    (span,) = client_spans(spans)
    port = int(sandbox.base_url.rsplit(":", 1)[1])
    assert span.name == f"GET {QUOTE}"
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context is not None
    assert span.context.trace_id == parent.get_span_context().trace_id
    attributes = dict(span.attributes or {})
    (request_id,) = attributes.pop("http.response.header.x-request-id")  # type: ignore[misc]
    assert attributes == {
        "http.request.method": "GET",
        "url.template": QUOTE,
        "server.address": "127.0.0.1",
        "server.port": port,
        "http.response.status_code": 200,
    }
    assert request_id
    assert span.status.status_code == StatusCode.UNSET


def test_the_token_request_and_the_call_are_both_spans(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    with sandbox.client() as c:
        new_quote(c)
    names = [s.name for s in client_spans(spans)]
    assert names == ["POST /v1/oauth/token", "POST /v1/payments/quotes"]
    # No current span: each is a root.
    assert all(s.parent is None for s in client_spans(spans))


def test_parents_in_threads(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    tracer = trace.get_tracer("test")
    n = 6
    barrier = threading.Barrier(n)
    parents: dict[int, int] = {}
    errors: list[BaseException] = []
    with sandbox.client() as c:
        qid = new_quote(c)
        spans.clear()

        def work(i: int) -> None:
            try:
                with tracer.start_as_current_span(f"job-{i}") as p:
                    parents[i] = p.get_span_context().span_id
                    barrier.wait()
                    c.get_quote(qid)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    by_parent = {s.parent.span_id for s in client_spans(spans, f"GET {QUOTE}") if s.parent}
    assert by_parent == set(parents.values())
    assert len(client_spans(spans, f"GET {QUOTE}")) == n


def test_parents_in_asyncio_tasks(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    tracer = trace.get_tracer("test")
    n = 8

    async def main() -> dict[int, int]:
        async with sandbox.client() as c:
            qid = await c.create_quote_async(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
            spans.clear()
            started = asyncio.Event()
            parents: dict[int, int] = {}

            async def task(i: int) -> None:
                with tracer.start_as_current_span(f"task-{i}") as p:
                    parents[i] = p.get_span_context().span_id
                    # Every task's span is open before any call starts: the calls interleave.
                    if len(parents) == n:
                        started.set()
                    await started.wait()
                    await c.get_quote_async(qid)

            await asyncio.gather(*(task(i) for i in range(n)))
            return parents

    parents = asyncio.run(main())
    got = client_spans(spans, f"GET {QUOTE}")
    assert len(got) == n
    assert {s.parent.span_id for s in got if s.parent} == set(parents.values())


def test_each_retry_is_a_span_with_its_resend_count(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    with sandbox.client(max_retries=2) as c:
        qid = new_quote(c)
        spans.clear()
        sandbox.fail_next(f"GET /v1/payments/quotes/{qid}", 503, times=2)
        c.get_quote(qid)
    got = client_spans(spans, f"GET {QUOTE}")
    assert [(s.attributes or {}).get("http.request.resend_count") for s in got] == [None, 1, 2]
    assert [(s.attributes or {}).get("http.response.status_code") for s in got] == [503, 503, 200]
    assert [(s.attributes or {}).get("error.type") for s in got] == ["503", "503", None]
    assert [s.status.status_code for s in got] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    # Every attempt is its own span in one trace.
    assert len({s.context.span_id for s in got if s.context}) == 3


def test_a_4xx_answer_sets_error_type(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    with sandbox.client() as c:
        c._payments_token()
        spans.clear()
        with pytest.raises(fxpay.NotFoundError):
            c.get_quote("no-such-quote")
    (span,) = client_spans(spans)
    assert (span.attributes or {})["http.response.status_code"] == 404
    assert (span.attributes or {})["error.type"] == "404"
    assert span.status.status_code == StatusCode.ERROR


def test_a_connection_error_sets_error_type(spans: InMemorySpanExporter) -> None:
    sock = tw.free_socket()  # bound, never listening: the connection is refused
    port = sock.getsockname()[1]
    try:
        c = fxpay.Client("id", "secret", base_url=f"http://127.0.0.1:{port}", max_retries=1)
        with c, pytest.raises(fxpay.TransportError):
            c.get_quote("q1")
    finally:
        sock.close()
    got = client_spans(spans, "POST /v1/oauth/token")
    assert len(got) == 2
    for s in got:
        attrs = dict(s.attributes or {})
        assert attrs["error.type"] == "fxpay.TransportError"
        assert "http.response.status_code" not in attrs
        assert s.status.status_code == StatusCode.ERROR
    assert (got[1].attributes or {})["http.request.resend_count"] == 1


def test_no_secret_in_any_span(spans: InMemorySpanExporter, sandbox: Sandbox, beneficiary: fxpay.Beneficiary) -> None:
    with sandbox.client() as c:
        qid = new_quote(c)
        c.get_quote(qid)
        c.create_beneficiary(beneficiary)
        token = c._payments_token().access_token
    secrets = [sandbox.client_secret, token]
    assert all(len(s) >= 8 for s in secrets)
    got = spans.get_finished_spans()
    assert len(got) >= 4
    for s in got:
        texts = [s.name, str(s.status.description)]
        texts += [f"{k}={v}" for k, v in (s.attributes or {}).items()]
        texts += [f"{e.name} {dict(e.attributes or {})}" for e in s.events]
        for secret in secrets:
            assert all(secret not in t for t in texts), (s.name, texts)


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.seen = []
    yield from serve(Recorder)


def test_traceparent_arrives_with_the_parents_trace_id(spans: InMemorySpanExporter, recorder: str) -> None:
    tracer = trace.get_tracer("test")
    with fxpay.Client("id", "secret", base_url=recorder) as c, tracer.start_as_current_span("checkout") as parent:
        c.get_quote("q1")
    trace_id = f"{parent.get_span_context().trace_id:032x}"
    sent = {(m, p): h for m, p, h in Recorder.seen}
    got = client_spans(spans)
    assert [s.name for s in got] == ["POST /v1/oauth/token", f"GET {QUOTE}"]
    for (method, path), span in zip([("POST", "/v1/oauth/token"), ("GET", "/v1/payments/quotes/q1")], got, strict=False):
        version, tid, sid, flags = sent[(method, path)]["traceparent"].split("-")
        assert (version, tid) == ("00", trace_id)
        assert int(flags, 16) & 1  # sampled
        # The header names the attempt's own span.
        assert span.context is not None
        assert sid == f"{span.context.span_id:016x}"


def test_traceparent_arrives_with_debug_logging_on_too(
    spans: InMemorySpanExporter, recorder: str, caplog: pytest.LogCaptureFixture
) -> None:
    # DEBUG logging and tracing together: the call has two observers, and the headers of
    # both reach the request (the trace context is not lost because the log also watches).
    tracer = trace.get_tracer("test")
    with (
        caplog.at_level("DEBUG", logger="fxpay"),
        fxpay.Client("id", "secret", base_url=recorder) as c,
        tracer.start_as_current_span("checkout") as parent,
    ):
        c.get_quote("q1")
    trace_id = f"{parent.get_span_context().trace_id:032x}"
    assert [(m, p) for m, p, _ in Recorder.seen] == [("POST", "/v1/oauth/token"), ("GET", "/v1/payments/quotes/q1")]
    assert [h["traceparent"].split("-")[:2] for _, _, h in Recorder.seen] == [["00", trace_id]] * 2
    assert [s.name for s in client_spans(spans)] == ["POST /v1/oauth/token", f"GET {QUOTE}"]
    lines = [r.getMessage() for r in caplog.records if r.name == "fxpay"]
    assert any("/v1/payments/quotes/q1" in m for m in lines), lines


def test_traceparent_arrives_from_asyncio_tasks(spans: InMemorySpanExporter, recorder: str) -> None:
    tracer = trace.get_tracer("test")

    async def main() -> set[str]:
        async with fxpay.Client("id", "secret", base_url=recorder) as c:
            await c._payments_token_async()
            Recorder.seen.clear()

            async def one(i: int) -> str:
                with tracer.start_as_current_span(f"t{i}") as p:
                    await c.get_quote_async(f"q{i}")
                    return f"{p.get_span_context().trace_id:032x}"

            return set(await asyncio.gather(*(one(i) for i in range(4))))

    trace_ids = asyncio.run(main())
    arrived = {h["traceparent"].split("-")[1] for _, _, h in Recorder.seen}
    assert arrived == trace_ids
    assert len(trace_ids) == 4


def vendor_span_context(*, is_remote: bool) -> Any:
    """A sampled span context with a ``tracestate`` (``vendor=abc``)."""
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    return SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=is_remote,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "abc")]),
    )


def test_tracestate_is_sent_too(spans: InMemorySpanExporter, recorder: str) -> None:
    from opentelemetry.trace import NonRecordingSpan

    remote = vendor_span_context(is_remote=True)
    with fxpay.Client("id", "secret", base_url=recorder) as c, trace.use_span(NonRecordingSpan(remote)):
        c.get_quote("q1")
    (_, _, headers) = Recorder.seen[-1]
    assert headers["traceparent"].split("-")[1] == "0af7651916cd43dd8448eb211c80319c"
    assert headers["tracestate"] == "vendor=abc"


def test_nothing_without_a_tracer_provider(recorder: str) -> None:
    _reset_global_provider()
    assert _otel.call_trace() is None  # the API's proxy provider means off
    with fxpay.Client("id", "secret", base_url=recorder) as c:
        c.get_quote("q1")
    assert Recorder.seen
    assert all("traceparent" not in h for _, _, h in Recorder.seen)


def test_with_tracing_off_a_call_runs_no_python_of_fxpays_tracing(recorder: str) -> None:
    """With no tracer provider, whether tracing is on is read from the API's module without
    running Python code: no function of ``fxpay._otel`` runs for a call (here after a
    provider was set and then taken away, as an application switching tracing off does)."""
    _reset_global_provider()
    trace.set_tracer_provider(TracerProvider())
    ran: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == _otel.__file__:
            ran.append(frame.f_code.co_name)

    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
            _reset_global_provider()
            Recorder.seen.clear()
            sys.setprofile(profile)
            try:
                c.get_quote("q2")
            finally:
                sys.setprofile(None)
    finally:
        _reset_global_provider()
    assert ran == []
    assert [p for _, p, h in Recorder.seen if "traceparent" not in h] == ["/v1/payments/quotes/q2"]


def test_a_tracer_that_makes_no_spans_sends_no_traceparent(recorder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``OTEL_SDK_DISABLED=true``: the SDK's provider hands out a no-op tracer, whose spans
    have the invalid (all-zero) context. W3C's propagator sends no ``traceparent`` for it,
    and neither does fxpay (a header of zeros is not a valid one)."""
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    _reset_global_provider()
    trace.set_tracer_provider(TracerProvider())
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
    finally:
        _reset_global_provider()
    assert [p for _, p, _ in Recorder.seen] == ["/v1/oauth/token", "/v1/payments/quotes/q1"]
    assert [h.get("traceparent") for _, _, h in Recorder.seen] == [None, None]


def test_calls_do_not_import_opentelemetry_for_an_application_that_does_not() -> None:
    # Installed but never imported (and no OTEL_PYTHON_TRACER_PROVIDER): fxpay's calls and
    # its receivers do not import it either, so an application without tracing pays nothing.
    code = (
        "import sys, fxpay.testing\n"
        "from fxpay import _otel\n"
        "with fxpay.testing.Sandbox() as sb, sb.client() as c:\n"
        "    c.create_quote(buy_currency='USD', buy_amount=1, sell_currency='AUD')\n"
        "with _otel.receiving({'traceparent': '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'}):\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_no_op_provider_is_off() -> None:
    _reset_global_provider()
    trace.set_tracer_provider(trace.NoOpTracerProvider())
    try:
        assert _otel.call_trace() is None
    finally:
        _reset_global_provider()


# -- receivers ---------------------------------------------------------------------------------


class TracedRecorder(tw.Recorder):
    """Also keeps the span context current while ``on_event`` ran."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[Any] = []

    def record(self, ev: fxpay.DealCreated) -> None:
        self.contexts.append(trace.get_current_span().get_span_context())
        super().record(ev)


@pytest.fixture(params=["fastapi", "django"])
def traced_receiver(request: pytest.FixtureRequest) -> Iterator[tuple[httpx.Client, TracedRecorder]]:
    rec = TracedRecorder()
    gen = (tw.serve_fastapi if request.param == "fastapi" else tw.serve_django)(rec)
    base = next(gen)
    with httpx.Client(base_url=base, timeout=10, trust_env=False) as http:
        yield http, rec
    gen.close()


@pytest.mark.parametrize("path", ["/fixed", "/lookup-async"])
def test_receivers_continue_the_senders_trace(
    spans: InMemorySpanExporter, traced_receiver: tuple[httpx.Client, TracedRecorder], path: str
) -> None:
    http, rec = traced_receiver
    tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    r = http.post(
        path,
        content=tw.dumps(tw.success()),
        headers={"content-type": "application/json", "callback-nonce": tw.NONCE, "traceparent": f"00-{tid}-{sid}-01"},
    )
    assert r.status_code == 200, r.text
    (ctx,) = rec.contexts
    assert f"{ctx.trace_id:032x}" == tid

    def top(got: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
        """The last span up the parents of "process DealCreated" that has ended."""
        by_id = {s.context.span_id: s for s in got if s.context}
        hop = next((s for s in got if s.name == "process DealCreated"), None)
        while hop is not None and hop.parent is not None and hop.parent.span_id in by_id:
            hop = by_id[hop.parent.span_id]
        return hop

    def reaches_sender(got: tuple[ReadableSpan, ...]) -> bool:
        hop = top(got)
        return hop is not None and hop.parent is not None and f"{hop.parent.span_id:016x}" == sid

    # Its parent is the sender's span, or (FastAPI traces requests itself and continues the
    # trace too) a chain of the framework's spans up to it.
    got = wait_for(spans, reaches_sender)
    (span,) = [s for s in got if s.name == "process DealCreated"]
    assert span.context is not None
    assert span.context.span_id == ctx.span_id
    hop = top(got)
    assert hop is not None
    assert hop.parent is not None
    assert f"{hop.parent.span_id:016x}" == sid
    assert span.kind == (SpanKind.SERVER if hop is span else SpanKind.INTERNAL)


def test_receivers_start_a_trace_without_traceparent(
    spans: InMemorySpanExporter, traced_receiver: tuple[httpx.Client, TracedRecorder]
) -> None:
    http, rec = traced_receiver
    r = tw.post(http, "/fixed", tw.success())
    assert r.status_code == 200, r.text

    def complete(got: tuple[ReadableSpan, ...]) -> bool:
        ids = {s.context.span_id for s in got if s.context}
        return any(s.name == "process DealCreated" and (s.parent is None or s.parent.span_id in ids) for s in got)

    got = wait_for(spans, complete)
    (span,) = [s for s in got if s.name == "process DealCreated"]
    # A child of the framework's own span when it made one (FastAPI does), else a new trace.
    others = {s.context.span_id for s in got if s.context and s is not span}
    assert span.parent is None or span.parent.span_id in others
    (ctx,) = rec.contexts
    assert span.context is not None
    assert ctx.span_id == span.context.span_id


@pytest.mark.parametrize(
    ("sent", "framework"),
    [("none", False), ("none", True), ("other trace", False), ("other trace", True), ("same trace", True)],
)
def test_a_received_notifications_span_continues_the_right_trace(spans: InMemorySpanExporter, sent: str, framework: bool) -> None:
    # The span around a notification's handling, by what came with it (a traceparent or
    # none) and whether a framework's own span is current: a SERVER span continuing the
    # sender's trace (linked to the framework's span, if any), else a child of the
    # framework's span (INTERNAL), else a new trace (SERVER).
    tracer = trace.get_tracer("framework")
    sender_tid, sender_sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

    def handle(headers: dict[str, str]) -> None:
        with _otel.receiving(headers):
            pass

    if framework:
        with tracer.start_as_current_span("POST /hook") as outer:
            own = outer.get_span_context()
            tid = sender_tid if sent == "other trace" else f"{own.trace_id:032x}"
            handle({"traceparent": f"00-{tid}-{sender_sid}-01"} if sent != "none" else {})
    else:
        own = None
        handle({"traceparent": f"00-{sender_tid}-{sender_sid}-01"} if sent != "none" else {})
    (span,) = [s for s in spans.get_finished_spans() if s.name == "process DealCreated"]
    assert span.context is not None
    links = [(f"{lk.context.trace_id:032x}", lk.context.span_id) for lk in span.links]
    if sent == "other trace":
        assert span.kind == SpanKind.SERVER
        assert span.parent is not None
        assert (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}") == (sender_tid, sender_sid)
        assert links == ([(f"{own.trace_id:032x}", own.span_id)] if own is not None else [])
    elif own is not None:  # no traceparent, or one of the trace the framework continues already
        assert span.kind == SpanKind.INTERNAL
        assert span.parent is not None
        assert (span.context.trace_id, span.parent.span_id) == (own.trace_id, own.span_id)
        assert links == []
    else:
        assert span.kind == SpanKind.SERVER
        assert span.parent is None
        assert links == []


def test_a_received_notification_makes_no_span_without_a_tracer_provider() -> None:
    _reset_global_provider()
    assert _otel.tracer() is None
    with _otel.receiving({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}):
        assert not trace.get_current_span().get_span_context().is_valid


def test_a_cancelled_call_still_ends_its_span(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    async def main() -> None:
        async with sandbox.client() as c:
            qid = await c.create_quote_async(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
            await c.get_quote_async(qid)
            spans.clear()
            STARTED.clear()
            fired = sandbox.stats()["faults_fired"]
            sandbox.delay_next(f"/v1/payments/quotes/{qid}", 5)
            task = asyncio.ensure_future(c.get_quote_async(qid))
            loop = asyncio.get_running_loop()

            def started() -> None:
                with ENDED:
                    assert ENDED.wait_for(lambda: f"GET {QUOTE}" in STARTED, timeout=10)
                # The span starts before the request is sent: cancel once the sandbox holds
                # it (its delay fired), so the call is cancelled in flight, not before.
                end = time.monotonic() + 10
                while sandbox.stats()["faults_fired"] == fired:
                    assert time.monotonic() < end, "the request never reached the sandbox"
                    time.sleep(0.005)

            await loop.run_in_executor(None, started)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    (span,) = wait_for(spans, lambda got: any(s.name == f"GET {QUOTE}" for s in got))
    assert (span.attributes or {})["error.type"] == "cancelled"
    assert "http.response.status_code" not in (span.attributes or {})


def test_a_call_left_in_flight_by_its_thread_ends_with_its_span_on_the_next_run(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    # An awaitable call runs on the shared runtime. The thread that ran the loop stops running
    # it with the call in flight, and ends: the call goes on, and its result (and its span's
    # end) wait on the loop's port until the loop runs again, here on another thread.
    loop = asyncio.new_event_loop()
    left: list[asyncio.Future[fxpay.Quote]] = []
    failed: list[BaseException] = []
    with sandbox.client() as c:
        qid = new_quote(c)

        async def leave() -> None:
            await c.get_quote_async(qid)
            fired = sandbox.stats()["faults_fired"]
            sandbox.delay_next(f"/v1/payments/quotes/{qid}", 1)
            left.append(asyncio.ensure_future(c.get_quote_async(qid)))
            while sandbox.stats()["faults_fired"] == fired:  # the request is at the sandbox
                await asyncio.sleep(0.01)

        def there() -> None:
            try:
                loop.run_until_complete(asyncio.wait_for(leave(), 20))
            except BaseException as e:  # the assert below shows it
                failed.append(e)

        try:
            spans.clear()
            t = threading.Thread(target=there)
            t.start()
            t.join(60)
            assert not t.is_alive()
            assert failed == []
            assert not left[0].done()
            assert loop.run_until_complete(asyncio.wait_for(left[0], 10)).id == qid
            wait_for(spans, lambda got: len(client_spans(spans, f"GET {QUOTE}")) == 2)
            assert [(s.attributes or {}).get("http.response.status_code") for s in client_spans(spans, f"GET {QUOTE}")] == [200, 200]
        finally:
            loop.close()


def test_debug_logging_and_tracing_together(spans: InMemorySpanExporter, sandbox: Sandbox, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="fxpay"), sandbox.client() as c:
        new_quote(c)
    assert [s.name for s in client_spans(spans)] == ["POST /v1/oauth/token", "POST /v1/payments/quotes"]
    lines = [r.getMessage() for r in caplog.records if r.name == "fxpay"]
    assert any("/v1/payments/quotes -> 200" in m or "/v1/payments/quotes -> 201" in m for m in lines), lines


def test_the_consent_flow_is_traced_without_its_secrets(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    from urllib.parse import parse_qs, urlsplit

    from conftest import login

    with sandbox.client() as c:
        auth, callback = login(sandbox, c)
        token = c.exchange_code(auth, callback)
        session = c.user_session(token)
        session.list_virtual_accounts()
        assert token.refresh_token
        refreshed = c.refresh_token(token.refresh_token)
    code = parse_qs(urlsplit(callback).query)["code"][0]
    assert [s.name for s in client_spans(spans)] == [
        "POST /v1/oauth/token",
        "GET /v1/gca/virtual-accounts",
        "POST /v1/oauth/token",
    ]
    secrets = [sandbox.client_secret, code, token.access_token, token.refresh_token, refreshed.access_token]
    secrets += [auth.code_verifier] if getattr(auth, "code_verifier", None) else []
    for s in spans.get_finished_spans():
        text = repr((s.name, dict(s.attributes or {}), s.status.description))
        for secret in secrets:
            assert secret, s.name
            assert secret not in text, s.name


# -- sampling, propagators, deferred ends, cassettes -------------------------------------------


def test_an_unsampled_parent_makes_no_span_and_still_propagates(spans: InMemorySpanExporter, recorder: str) -> None:
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parent = SpanContext(trace_id=0x1F, span_id=0x2E, is_remote=True, trace_flags=TraceFlags(0))
    with fxpay.Client("id", "secret", base_url=recorder) as c, trace.use_span(NonRecordingSpan(parent)):
        c.get_quote("q1")
        c.get_quote("q2")
    assert client_spans(spans) == []
    sent = [h["traceparent"] for _, _, h in Recorder.seen]
    assert len(sent) == 3  # the token, then two quotes
    for header in sent:
        version, tid, sid, flags = header.split("-")
        assert (version, tid, flags) == ("00", f"{0x1F:032x}", "00")
        assert sid != f"{0x2E:016x}"


def test_baggage_is_sent_with_each_attempt(spans: InMemorySpanExporter, recorder: str) -> None:
    from opentelemetry import baggage, context

    token = context.attach(baggage.set_baggage("tenant", "acme co"))
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
    finally:
        context.detach(token)
    assert [h.get("baggage") for _, _, h in Recorder.seen] == ["tenant=acme+co", "tenant=acme+co"]
    assert all("traceparent" in h for _, _, h in Recorder.seen)


class Stamp:
    """A propagator that is not W3C's: writes the span's ids under its own header."""

    fields: ClassVar[set[str]] = {"x-stamp"}

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        ctx = trace.get_current_span(context).get_span_context()
        carrier["x-stamp"] = f"{ctx.trace_id:032x}:{ctx.span_id:016x}"

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        return context


def test_another_global_propagator_is_asked(spans: InMemorySpanExporter, recorder: str) -> None:
    from opentelemetry import propagate

    before = propagate.get_global_textmap()
    propagate.set_global_textmap(Stamp())  # type: ignore[arg-type]
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
    finally:
        propagate.set_global_textmap(before)
    got = client_spans(spans)
    assert len(got) == 2
    stamps = [h.get("x-stamp") for _, _, h in Recorder.seen]
    assert stamps == [f"{s.context.trace_id:032x}:{s.context.span_id:016x}" for s in got if s.context]
    assert all("traceparent" not in h for _, _, h in Recorder.seen)


class Unsendable(Stamp):
    """Writes, besides its stamp, a header HTTP does not allow: a value with a line break,
    and a name with a space."""

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        super().inject(carrier, context, setter)
        carrier["x-broken"] = "one\r\nx-injected: two"
        carrier["not a name"] = "value"


@pytest.mark.parametrize("aio", [False, True])
def test_a_header_a_propagator_writes_that_http_does_not_allow_is_left_out(spans: InMemorySpanExporter, recorder: str, aio: bool) -> None:
    from opentelemetry import propagate

    before = propagate.get_global_textmap()
    propagate.set_global_textmap(Unsendable())  # type: ignore[arg-type]
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            if aio:
                asyncio.run(c.get_quote_async("q1"))
            else:
                c.get_quote("q1")
    finally:
        propagate.set_global_textmap(before)
    got = client_spans(spans)
    assert len(got) == 2
    stamps = [f"{s.context.trace_id:032x}:{s.context.span_id:016x}" for s in got if s.context]
    assert [h.get("x-stamp") for _, _, h in Recorder.seen] == stamps
    for _, _, h in Recorder.seen:
        assert not {"x-broken", "x-injected", "not a name"} & set(h)


def test_a_replaced_get_global_textmap_is_called(spans: InMemorySpanExporter, recorder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The module's propagator stays W3C's; the getter now answers another: the getter wins,
    # as it would for `propagate.inject`.
    from opentelemetry import propagate

    # A closure, and a getter shaped like the API's that reads a global of another module.
    stamp = Stamp()
    for getter in (lambda: stamp, _own_getter):
        Recorder.seen = []
        spans.clear()
        monkeypatch.setattr(propagate, "get_global_textmap", getter)
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
        got = client_spans(spans)
        assert len(got) == 2
        assert [h.get("x-stamp") for _, _, h in Recorder.seen] == [
            f"{s.context.trace_id:032x}:{s.context.span_id:016x}" for s in got if s.context
        ]
        assert all("traceparent" not in h for _, _, h in Recorder.seen)


_HTTP_TEXT_FORMAT = Stamp()


def _own_getter() -> Any:
    return _HTTP_TEXT_FORMAT


def test_a_composite_of_w3c_and_another_propagator_sends_the_headers_of_each(spans: InMemorySpanExporter, recorder: str) -> None:
    # W3C trace context and baggage plus a propagator of the user's own: fxpay cannot write
    # the headers itself (only W3C's), so it asks the composite, and every part is heard.
    from opentelemetry import baggage, context, propagate
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    before = propagate.get_global_textmap()
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator(), Stamp()]))  # type: ignore[list-item]
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
    finally:
        context.detach(token)
        propagate.set_global_textmap(before)
    got = [s for s in client_spans(spans) if s.context]
    assert len(got) == len(Recorder.seen) == 2
    for (_, _, h), span in zip(Recorder.seen, got, strict=True):
        assert span.context is not None
        assert h["x-stamp"] == f"{span.context.trace_id:032x}:{span.context.span_id:016x}"
        assert h["traceparent"].split("-")[1:3] == [f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"]
        assert h["baggage"] == "tenant=acme"


@pytest.mark.parametrize(
    ("parts", "fixed"),
    [
        ("context", []),
        ("context baggage", [("baggage", "tenant=acme")]),
        ("baggage context", [("baggage", "tenant=acme")]),
        ("context context", None),
        ("baggage baggage context", None),
        ("baggage", None),
        ("context stamp", None),
        ("stamp", None),
        ("", None),
    ],
)
def test_only_w3c_propagators_let_fxpay_write_the_headers_itself(spans: InMemorySpanExporter, parts: str, fixed: Any) -> None:
    # The fast path (no Python per attempt) is taken only when the global propagator is W3C
    # trace context, alone or with W3C baggage: call_trace's third item is the fixed headers
    # then, and None when each attempt must ask the propagator (its headers could be anything).
    from opentelemetry import baggage, context, propagate
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    made = {"context": TraceContextTextMapPropagator, "baggage": W3CBaggagePropagator, "stamp": Stamp}
    chosen = [made[p]() for p in parts.split()]
    textmap = chosen[0] if len(chosen) == 1 else CompositePropagator(chosen)  # type: ignore[arg-type]
    before = propagate.get_global_textmap()
    for _ in range(2):  # the second time from the cache of the last propagator seen
        propagate.set_global_textmap(textmap)
        token = context.attach(baggage.set_baggage("tenant", "acme"))
        try:
            got = _otel.call_trace()
        finally:
            context.detach(token)
            propagate.set_global_textmap(before)
        assert got is not None
        assert got[2] == fixed


def test_a_retried_attempts_span_ends_when_its_answer_came(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    """A blocking call's spans are ended when the thread is back in Python, at the time their
    attempt ended: not after the wait before the retry."""
    with sandbox.client(max_retries=1) as c:
        qid = new_quote(c)
        spans.clear()
        sandbox.fail_next(f"GET /v1/payments/quotes/{qid}", 429, retry_after=1)
        c.get_quote(qid)
    first, second = client_spans(spans, f"GET {QUOTE}")
    assert first.start_time is not None
    assert first.end_time is not None
    assert second.start_time is not None
    assert first.start_time <= first.end_time
    # Retry-After: 1 second between the first answer and the second attempt.
    assert second.start_time - first.end_time >= 500_000_000
    assert first.end_time - first.start_time < 500_000_000


@pytest.mark.parametrize("aio", [False, True], ids=["blocking", "async"])
def test_a_replayed_call_is_a_span(spans: InMemorySpanExporter, sandbox: Sandbox, tmp_path: Any, aio: bool) -> None:
    """A call answered from a cassette is still a call: its spans are the live call's (as
    vcrpy's replays are spans of an instrumented httpx)."""
    from fxpay.testing import Cassette, CassetteMismatchError

    path = tmp_path / "quote.json"
    with sandbox.client(cassette=Cassette(path, mode="record")) as c:
        c.get_quote(new_quote(c))
    live = [(s.name, dict(s.attributes or {})) for s in client_spans(spans)]
    assert [name for name, _ in live] == ["POST /v1/oauth/token", "POST /v1/payments/quotes", f"GET {QUOTE}"]
    spans.clear()
    tracer = trace.get_tracer("test")
    replay = Cassette(path, mode="replay")

    async def replayed() -> None:
        async with replay.client() as c:
            with tracer.start_as_current_span("checkout"):
                qid = await c.create_quote_async(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
                await c.get_quote_async(qid)
            with pytest.raises(CassetteMismatchError):
                await c.get_quote_async(qid)

    if aio:
        asyncio.run(replayed())
    else:
        with replay.client() as c:
            with tracer.start_as_current_span("checkout"):
                c.get_quote(new_quote(c))
            with pytest.raises(CassetteMismatchError):
                c.get_quote("q-not-recorded")
    got = client_spans(spans)
    assert [(s.name, dict(s.attributes or {})) for s in got[:3]] == live
    (checkout,) = [s for s in spans.get_finished_spans() if s.name == "checkout"]
    assert checkout.context is not None
    assert all(s.parent is not None and s.parent.span_id == checkout.context.span_id for s in got[:3])
    (miss,) = got[3:]
    assert (miss.attributes or {})["error.type"] == "fxpay.testing.CassetteMismatchError"
    assert miss.status.status_code == StatusCode.ERROR


def test_spans_have_ended_when_the_call_returns(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    """Ends are handed to Python in a crossing the call makes anyway, but before it returns:
    a blocking call's on its thread, an awaitable's on the loop's thread before its result."""

    async def main() -> list[list[str]]:
        seen = []
        async with sandbox.client() as c:
            qid = await c.create_quote_async(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
            seen.append([s.name for s in client_spans(spans)])
            spans.clear()
            await c.get_quote_async(qid)
            seen.append([s.name for s in client_spans(spans)])
        return seen

    assert asyncio.run(main()) == [["POST /v1/oauth/token", "POST /v1/payments/quotes"], [f"GET {QUOTE}"]]
    spans.clear()
    with sandbox.client() as c:
        new_quote(c)
        assert [s.name for s in client_spans(spans)] == ["POST /v1/oauth/token", "POST /v1/payments/quotes"]


def test_spans_end_on_the_callers_thread_or_the_loops(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    """No runtime thread takes the GIL to end a span: an awaitable's spans end on its event
    loop's thread, a blocking call's on the calling thread (issue 55: the observer of an
    awaitable knows it is one)."""
    ended_on: list[tuple[str, int]] = []

    class Where(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            # (The token's request is shared by the calls that wait for it, and runs apart.)
            if span.kind == SpanKind.CLIENT and "oauth" not in span.name:
                ended_on.append((span.name, threading.get_ident()))

    provider = trace.get_tracer_provider()
    provider.add_span_processor(Where())  # type: ignore[attr-defined]

    async def main() -> int:
        async with sandbox.client() as c:
            qid = await c.create_quote_async(buy_currency="AUD", buy_amount="100.00", sell_currency="USD")
            await asyncio.gather(*(c.get_quote_async(qid) for _ in range(4)))
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    with sandbox.client() as c:
        new_quote(c)
    me = threading.get_ident()
    assert len(ended_on) == 1 + 4 + 1, ended_on
    assert {t for _, t in ended_on[:5]} == {loop_thread}, ended_on
    assert {t for _, t in ended_on[5:]} == {me}, ended_on


def test_the_provider_in_force_at_each_call_is_used(recorder: str) -> None:
    """fxpay keeps the tracer of the last provider it saw: a new provider (or a no-op one)
    takes effect from the next call."""
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    providers = []
    for exporter in (first, second):
        p = TracerProvider()
        p.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(p)
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            for provider in (providers[0], trace.NoOpTracerProvider(), providers[1]):
                _reset_global_provider()
                trace.set_tracer_provider(provider)
                c.get_quote("q1")
    finally:
        _reset_global_provider()
        for p in providers:
            p.shutdown()
    assert [s.name for s in first.get_finished_spans()] == ["POST /v1/oauth/token", f"GET {QUOTE}"]
    assert [s.name for s in second.get_finished_spans()] == [f"GET {QUOTE}"]
    # The no-op provider's call sent no traceparent.
    assert ["traceparent" in h for _, _, h in Recorder.seen] == [True, True, False, True]


def test_a_provider_named_by_the_environment(recorder: str) -> None:
    """OTEL_PYTHON_TRACER_PROVIDER names a provider before anyone imports the API: the calls
    are traced (``fxpay._otel`` decides each call there)."""
    import os
    import subprocess
    import sys

    code = f"import fxpay\nwith fxpay.Client('id', 'secret', base_url={recorder!r}) as c:\n    c.get_quote('q1')\n"
    env = {**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    assert len(Recorder.seen) == 2
    assert all(h["traceparent"].startswith("00-") for _, _, h in Recorder.seen)
    without = {k: v for k, v in env.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    Recorder.seen.clear()
    subprocess.run([sys.executable, "-c", code], env=without, check=True, timeout=120)
    assert len(Recorder.seen) == 2
    assert all("traceparent" not in h for _, _, h in Recorder.seen)


def test_the_span_carries_the_request_id(spans: InMemorySpanExporter, sandbox: Sandbox) -> None:
    """Issue 30 item 1: http.response.header.x-request-id, as the sandbox sent it."""
    with sandbox.client() as c:
        c._payments_token()
        spans.clear()
        with pytest.raises(fxpay.NotFoundError) as e:
            c.get_quote("no-such-quote")
    (span,) = client_spans(spans)
    assert e.value.request_id
    assert tuple((span.attributes or {})["http.response.header.x-request-id"]) == (e.value.request_id,)  # type: ignore[arg-type]


class _Counted:
    """Wraps an API function, counting its calls."""

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f, self.calls = f, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.f(*args, **kwargs)


class _StubSpan:
    """A recording span that does nothing but hand out its span context."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def get_span_context(self) -> Any:
        return self.context

    def is_recording(self) -> bool:
        return True

    def set_attributes(self, attributes: Any) -> None:
        pass

    def end(self, end_time: int | None = None) -> None:
        pass


@pytest.fixture
def stub_spans() -> Iterator[list[Any]]:
    """A global tracer provider whose spans do nothing (no SDK code runs): the parents each
    span was started under, in order."""
    parents: list[Any] = []
    made = vendor_span_context(is_remote=False)

    class Tracer:
        def start_span(self, name: str, context: Any = None, **kwargs: Any) -> _StubSpan:
            parents.append(context)
            return _StubSpan(made)

    class Provider(trace.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return Tracer()

    _reset_global_provider()
    trace.set_tracer_provider(Provider())
    try:
        yield parents
    finally:
        _reset_global_provider()


def test_the_api_is_read_through_its_public_functions_only(stub_spans: list[Any], recorder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # fxpay reads the current context, the global propagator, the baggage, a span context's
    # fields and the trace state's size through the API's public functions and properties
    # (issue 55: no private name of the API), once per call (the context, the propagator,
    # the baggage) or per attempt (the span context, the trace state), and sends what the
    # API gives.
    from opentelemetry import baggage, context
    from opentelemetry.trace import SpanContext

    key = context.create_key("test")
    token = context.attach(context.set_value(key, "outer"))
    # (Counted where the API looks them up at each call: `get_all` reads the baggage with
    # `_get_baggage_value`, whoever holds a reference to `get_all` itself.)
    get_current, get_all = _Counted(context.get_current), _Counted(baggage._get_baggage_value)
    monkeypatch.setattr(context, "get_current", get_current)
    monkeypatch.setattr(baggage, "_get_baggage_value", get_all)
    read: list[str] = []
    for name in ("trace_id", "span_id", "trace_flags", "trace_state"):
        prop = getattr(SpanContext, name)
        monkeypatch.setattr(SpanContext, name, property(lambda s, p=prop, n=name: read.append(n) or p.fget(s)))
    called: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name in ("get_global_textmap", "__len__") and "opentelemetry" in code.co_filename:
            called.append(code.co_name)

    sys.setprofile(profile)
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
    finally:
        sys.setprofile(None)
        context.detach(token)
    # One call (the token's request and the quote's are its two attempts).
    assert (get_current.calls, get_all.calls) == (1, 1)
    assert read == ["trace_id", "span_id", "trace_flags", "trace_state"] * 2
    assert called == ["get_global_textmap", "__len__", "__len__"]
    # Each attempt's parent is the context current at the call.
    assert [p.get(key) for p in stub_spans] == ["outer", "outer"]
    for _, _, headers in Recorder.seen:
        assert headers["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        assert headers["tracestate"] == "vendor=abc"
        assert "baggage" not in headers
    # Baggage present: the API is asked for it.
    Recorder.seen = []
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    get_all.calls = 0
    try:
        with fxpay.Client("id", "secret", base_url=recorder) as c:
            c.get_quote("q1")
    finally:
        context.detach(token)
    assert get_all.calls >= 1
    assert [h.get("baggage") for _, _, h in Recorder.seen] == ["tenant=acme", "tenant=acme"]


def test_another_context_runtime_and_span_context_go_through_the_public_api(
    spans: InMemorySpanExporter, recorder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import context
    from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    class Runtime(ContextVarsRuntimeContext):
        """A runtime context of the user's own (its variable is not the one fxpay knows)."""

        asked = 0

        def get_current(self) -> Any:
            Runtime.asked += 1
            return super().get_current()

    class Context2(SpanContext):
        """A span context of another class: its fields are read through its properties."""

        @property
        def trace_flags(self) -> TraceFlags:
            return TraceFlags(0)

    class Quiet(TraceState):
        """A trace state of another class: its own `__len__` says whether it is written."""

        def __len__(self) -> int:
            return 0

    monkeypatch.setattr(context, "_RUNTIME_CONTEXT", Runtime())
    remote = Context2(trace_id=0x1F, span_id=0x2E, is_remote=True, trace_flags=TraceFlags(1), trace_state=Quiet([("vendor", "abc")]))
    with fxpay.Client("id", "secret", base_url=recorder) as c, trace.use_span(NonRecordingSpan(remote)):
        Runtime.asked = 0
        c.get_quote("q1")
        assert Runtime.asked >= 1
    (_, _, headers) = Recorder.seen[-1]
    _, trace_id, _, flags = headers["traceparent"].split("-")
    # The parent came through the user's runtime, the flags through the subclass's property,
    # and the trace state's size through its class's `__len__`.
    assert (trace_id, flags) == (f"{0x1F:032x}", "00")
    assert "tracestate" not in headers, headers


def test_an_api_without_the_runtime_context_name_still_traces(
    stub_spans: list[Any], recorder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fxpay reads no private name of the API (issue 55; it read `_RUNTIME_CONTEXT` before):
    # an API without it is asked through `get_current()`, and the calls are traced as before.
    from opentelemetry import context

    key = context.create_key("test")
    token = context.attach(context.set_value(key, "outer"))
    runtime = context._RUNTIME_CONTEXT  # type: ignore[attr-defined]
    try:
        with monkeypatch.context() as m:
            m.delattr(context, "_RUNTIME_CONTEXT")
            m.setattr(context, "get_current", runtime.get_current)
            with fxpay.Client("id", "secret", base_url=recorder) as c:
                c.get_quote("q1")
    finally:
        context.detach(token)
    assert [p.get(key) for p in stub_spans] == ["outer", "outer"]
    assert all("traceparent" in h for _, _, h in Recorder.seen)

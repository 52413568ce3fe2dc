//! The spans of a call's attempts, one per attempt, made from Rust's attempt hooks with the
//! tracer `super::otel` found.
//!
//! An attempt takes the GIL once to start its span: the attributes are one dict built here,
//! and the W3C `traceparent`/`tracestate` headers are written here from the span's context
//! when the global propagator is W3C's (the `baggage` header, which only depends on the
//! parent, is worked out once per call). Its end is recorded here with its time and handed to
//! Python in a crossing the call makes anyway: a blocking call's when its thread is back in
//! Python (or the next attempt starts); an awaitable's on the event loop's thread, just
//! before the loop's drain delivers the results (so no runtime thread waits for the GIL to
//! end a span). When the sampler does not record the call's first span, its later attempts
//! reuse its headers with no Python at all.
use super::otel::{otel, span_context_fields, trace_api, typed};
use fxpay_core::{
    span_end, span_start, traceparent, AttemptLog, AttemptStart, ExtraHeaders, HeaderName,
    HeaderValue, Observer, PerProcess, SpanEnd, SpanStart,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};
use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// `SpanKind.CLIENT`, every attempt's span's kind.
static CLIENT_KIND: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// `Status(StatusCode.ERROR)`, the status of an attempt that ended in an error (a `Status`
/// holds no state of a span: one serves them all).
static ERROR_STATUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

thread_local! {
    /// Spans of blocking calls driven on this thread whose attempts are over: ended by
    /// [`flush_ended`] once the thread holds the GIL again.
    static ENDED: RefCell<Vec<Ended>> = const { RefCell::new(Vec::new()) };
}

/// A span whose attempt is over, with what to end it with.
struct Ended {
    span: Py<PyAny>,
    end: SpanEnd,
    /// When the attempt ended, in ns since the epoch (the SDK's clock, `time.time_ns()`): a
    /// u64 lasts until 2554, and becomes a Python int in one step (a u128 takes several under
    /// the stable ABI).
    at: u64,
}

impl Ended {
    /// Ends the span: its answer's status and request id, or its error (`error.type` and the
    /// `ERROR` status), then `span.end(at)`. The one place a span of fxpay's calls ends,
    /// whichever thread or queue it waited in ([`ENDED`], [`LOOP_ENDED`], or none).
    fn finish(self, py: Python<'_>) {
        let described = self.describe(py);
        // Ended even when the span refused its attributes or its status.
        let at = self
            .at
            .into_pyobject(py)
            .unwrap_or_else(|never| match never {});
        let ended = call_one(self.span.bind(py), pyo3::intern!(py, "end"), at.as_any());
        let _ = (described, ended);
    }

    /// `span.set_attributes({...})`, and `span.set_status(StatusCode.ERROR)` for an error.
    fn describe(&self, py: Python<'_>) -> PyResult<()> {
        use pyo3::intern;
        let span = self.span.bind(py);
        let attributes = PyDict::new(py);
        if let Some(status) = self.end.status {
            attributes.set_item(intern!(py, "http.response.status_code"), status)?;
        }
        if let Some(id) = &self.end.request_id {
            // A list of one string, as the semantic conventions spell header attributes.
            attributes.set_item(
                intern!(py, "http.response.header.x-request-id"),
                PyList::new(py, [id])?,
            )?;
        }
        if let Some(error) = &self.end.error_type {
            attributes.set_item(intern!(py, "error.type"), error)?;
        }
        if !attributes.is_empty() {
            call_one(span, intern!(py, "set_attributes"), attributes.as_any())?;
        }
        if self.end.error_type.is_some() {
            let error = ERROR_STATUS.get_or_try_init(py, || {
                let code = trace_api(py)?.getattr("StatusCode")?.getattr("ERROR")?;
                Ok::<_, PyErr>(trace_api(py)?.getattr("Status")?.call1((code,))?.unbind())
            })?;
            call_one(span, intern!(py, "set_status"), error.bind(py))?;
        }
        Ok(())
    }
}

/// `obj.name(arg)` through `PyObject_CallMethodObjArgs`, which makes neither a bound method nor
/// an argument tuple: what `call_method1` makes under the stable ABI before 3.12, which has no
/// vectorcall (about 400 instructions a call; two calls end every traced attempt).
fn call_one(
    obj: &Bound<'_, PyAny>,
    name: &Bound<'_, pyo3::types::PyString>,
    arg: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // SAFETY: the GIL is held (the `Bound`s prove it) and the three pointers are live
    // references the caller holds for the whole call; the argument list ends with the null
    // the function requires. The result is a new reference, or null with an exception set,
    // and is owned at once.
    unsafe {
        let r = pyo3::ffi::PyObject_CallMethodObjArgs(
            obj.as_ptr(),
            name.as_ptr(),
            arg.as_ptr(),
            std::ptr::null_mut::<pyo3::ffi::PyObject>(),
        );
        Bound::from_owned_ptr_or_err(obj.py(), r).map(drop)
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Spans of awaitables' attempts that are over, ended on an event loop's thread by
/// [`flush_ended`] (the loop's drain calls it before the results of the calls are delivered),
/// or by the next attempt to start a span, on any thread.
/// Per process: the runtime's workers push here without the GIL, and a lock one of them held
/// when the process forked would stay held in the child (the parent's spans are left behind).
static LOOP_ENDED: PerProcess<Mutex<Vec<Ended>>> = PerProcess::empty();

fn loop_ended() -> &'static Mutex<Vec<Ended>> {
    LOOP_ENDED.get_or_make(|| Mutex::new(Vec::new()))
}

/// Ends the spans whose attempts are over and that wait for a thread holding the GIL: this
/// thread's blocking calls' ([`ENDED`]) and awaitables' ([`LOOP_ENDED`]).
pub(super) fn flush_ended(py: Python<'_>) {
    let mine = ENDED
        .try_with(|e| {
            let mut e = e.borrow_mut();
            if e.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut *e)
            }
        })
        .unwrap_or_default();
    let awaited = std::mem::take(&mut *loop_ended().lock().unwrap_or_else(PoisonError::into_inner));
    for ended in mine.into_iter().chain(awaited) {
        ended.finish(py);
    }
}

#[derive(Default)]
struct State {
    /// The attempt's span, started and not ended yet.
    open: Option<Py<PyAny>>,
    /// The call's first span was not recording: the headers every later attempt sends.
    unrecorded: Option<ExtraHeaders>,
}

/// Makes the spans of one call's attempts (attempts of a call run one after the other).
pub(super) struct PyTraceObserver {
    tracer: Py<PyAny>,
    parent: Py<PyAny>,
    /// `Some` when this module writes `traceparent`/`tracestate` (the global propagator is
    /// W3C's): the other headers to send (`baggage`). `None`: `fxpay._otel.inject` is asked.
    fixed: Option<ExtraHeaders>,
    /// An awaitable's call, whose result the event loop's drain delivers (`crate::bridge`):
    /// its attempts' spans wait in [`LOOP_ENDED`] for that drain.
    awaited: bool,
    state: Mutex<State>,
}

impl PyTraceObserver {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the span; returns it, the headers that carry it and whether it records.
    fn start_span<'py>(
        &self,
        py: Python<'py>,
        s: &SpanStart,
    ) -> PyResult<(Bound<'py, PyAny>, ExtraHeaders, bool)> {
        use pyo3::intern;
        let attributes = PyDict::new(py);
        attributes.set_item(intern!(py, "http.request.method"), &s.method)?;
        if let Some(t) = &s.template {
            attributes.set_item(intern!(py, "url.template"), t)?;
        }
        if let Some(a) = &s.address {
            attributes.set_item(intern!(py, "server.address"), a)?;
        }
        if let Some(p) = s.port {
            attributes.set_item(intern!(py, "server.port"), p)?;
        }
        if s.resend_count > 0 {
            attributes.set_item(intern!(py, "http.request.resend_count"), s.resend_count)?;
        }
        let kind = CLIENT_KIND.get_or_try_init(py, || {
            Ok::<_, PyErr>(
                trace_api(py)?
                    .getattr("SpanKind")?
                    .getattr("CLIENT")?
                    .unbind(),
            )
        })?;
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "context"), self.parent.bind(py))?;
        kwargs.set_item(intern!(py, "kind"), kind.bind(py))?;
        kwargs.set_item(intern!(py, "attributes"), attributes)?;
        let span = self.tracer.bind(py).call_method(
            intern!(py, "start_span"),
            (&s.name,),
            Some(&kwargs),
        )?;
        let headers = match &self.fixed {
            Some(fixed) => {
                let mut headers = w3c_headers(py, &span)?;
                headers.extend(fixed.iter().cloned());
                headers
            }
            None => typed(
                otel(py)?
                    .call_method1(intern!(py, "inject"), (&span, self.parent.bind(py)))?
                    .cast_into::<PyList>()?
                    .iter()
                    .filter_map(|pair| pair.extract::<(String, String)>().ok())
                    .collect(),
            ),
        };
        let recording = span
            .call_method0(intern!(py, "is_recording"))?
            .is_truthy()?;
        Ok((span, headers, recording))
    }

    /// The open span, taken to be ended with `end` at this instant (None when none is open:
    /// its attempt's end was told already, or it was never recorded).
    fn take_ended(&self, end: SpanEnd) -> Option<Ended> {
        let span = self.state().open.take()?;
        Some(Ended {
            span,
            end,
            at: now_ns(),
        })
    }

    /// Ends the open span now, taking the GIL (a cancelled call, an awaitable's attempt).
    fn end_now(&self, end: SpanEnd) {
        let Some(ended) = self.take_ended(end) else {
            return;
        };
        // Not once the interpreter is shutting down: the span is dropped unended.
        let _ = crate::exit_gate::attach(|py| ended.finish(py));
    }
}

/// `traceparent` (and `tracestate`) for `span`, as W3C's propagator writes them: nothing for
/// the invalid span context.
fn w3c_headers(py: Python<'_>, span: &Bound<'_, PyAny>) -> PyResult<ExtraHeaders> {
    use pyo3::intern;
    let context = span.call_method0(intern!(py, "get_span_context"))?;
    let (trace_id, span_id, flags, state) = span_context_fields(&context)?;
    if trace_id == 0 && span_id == 0 {
        return Ok(Vec::new());
    }
    let mut headers = Vec::with_capacity(2);
    if let Ok(value) = HeaderValue::from_bytes(&traceparent(trace_id, span_id, flags)) {
        headers.push((HeaderName::from_static("traceparent"), value));
    }
    // `bool(state)`, what W3C's propagator asks before it writes `tracestate`.
    if state.is_truthy()? {
        let text: String = state.call_method0(intern!(py, "to_header"))?.extract()?;
        // A trace state the API let through that HTTP does not allow is left out.
        if let Ok(value) = HeaderValue::from_str(&text) {
            headers.push((HeaderName::from_static("tracestate"), value));
        }
    }
    Ok(headers)
}

impl Observer for PyTraceObserver {
    fn start(&self, start: &AttemptStart<'_>) -> ExtraHeaders {
        if let Some(headers) = &self.state().unrecorded {
            return headers.clone();
        }
        let s = span_start(start);
        // Not once the interpreter is shutting down: no span, no headers.
        crate::exit_gate::attach(|py| {
            // The previous attempt's span, when its end was deferred.
            flush_ended(py);
            match self.start_span(py, &s) {
                Ok((span, headers, recording)) => {
                    let mut state = self.state();
                    if recording {
                        state.open = Some(span.unbind());
                    } else {
                        state.unrecorded = Some(headers.clone());
                    }
                    headers
                }
                Err(_) => Vec::new(),
            }
        })
        .unwrap_or_default()
    }

    fn attempt(&self, log: &AttemptLog<'_>) {
        let end = span_end(log);
        let driving = crate::bridge::blocking::here();
        if !driving && !self.awaited {
            return self.end_now(end);
        }
        let Some(ended) = self.take_ended(end) else {
            return;
        };
        if driving {
            // A blocking call on its caller's thread: that thread ends the span when it
            // holds the GIL again (`flush_ended`), at the time taken now.
            let _ = ENDED.try_with(|e| e.borrow_mut().push(ended));
        } else {
            loop_ended()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(ended);
        }
    }
}

impl Drop for PyTraceObserver {
    /// A call dropped mid-attempt (a cancelled awaitable) still ends its span.
    fn drop(&mut self) {
        self.end_now(SpanEnd {
            status: None,
            error_type: Some("cancelled".to_string()),
            request_id: None,
        })
    }
}

impl PyTraceObserver {
    /// The observer of one call's attempts (see `super::otel::call_trace`).
    pub(super) fn new(
        tracer: Py<PyAny>,
        parent: Py<PyAny>,
        fixed: Option<ExtraHeaders>,
        awaited: bool,
    ) -> Self {
        PyTraceObserver {
            tracer,
            parent,
            fixed,
            awaited,
            state: Mutex::new(State::default()),
        }
    }
}

//! OpenTelemetry spans, one per attempt, made by `fxpay._otel` from Rust's attempt hooks.
//!
//! Whether tracing is on is asked once per call, while the caller holds the GIL (and, for an
//! awaitable, in the calling task, so the parent span is that task's): with no tracer
//! provider the call gets no tracing observer, and its attempts never touch Python. With
//! one, each attempt takes the GIL twice: to start its span (and get the `traceparent`
//! headers to send) and to end it.
use fxpay_core::trace::{span_end, span_start};
use fxpay_core::transport::{AttemptLog, AttemptStart, Observer};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `fxpay._otel.call_trace`: None when tracing is off, else the call's span maker.
static CALL_TRACE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn call_trace(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    let hook = CALL_TRACE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("fxpay._otel")?.getattr("call_trace")?.unbind())
        })
        .ok()?;
    let call = hook.bind(py).call0().ok()?;
    (!call.is_none()).then_some(call)
}

thread_local! {
    /// This thread has been given a Python thread state of its own ([`keep_thread_state`]).
    static KEPT: Cell<bool> = const { Cell::new(false) };
}

/// Gives a thread Python does not know (a runtime thread running an awaitable's attempts) a
/// Python thread state that it keeps, so that taking the GIL there is cheap: otherwise each
/// time creates a thread state (and its frame stack) and deletes it on release. The state
/// is made once per thread and kept; the shared runtime's threads live as long as the
/// process. A Python thread (one that has a state already) is left alone.
fn keep_thread_state() {
    let _ = KEPT.try_with(|kept| {
        if kept.replace(true) {
            return;
        }
        // SAFETY: called without the GIL (pyo3's attach count is zero on this thread: the
        // hooks run outside any `Python::attach`). With no thread state yet, `Ensure`
        // creates one and takes the GIL, and `SaveThread` gives the GIL back while the
        // state stays registered for this thread; later `Ensure`/`Release` pairs (pyo3's
        // `attach`) then only take and give back the GIL.
        unsafe {
            if pyo3::ffi::PyGILState_GetThisThreadState().is_null() {
                let _ = pyo3::ffi::PyGILState_Ensure();
                let _ = pyo3::ffi::PyEval_SaveThread();
            }
        }
    });
}

/// Makes the spans of one call's attempts (attempts of a call run one after the other).
struct PyTraceObserver {
    call: Py<PyAny>,
    /// A span was started and not ended yet.
    open: AtomicBool,
}

impl PyTraceObserver {
    fn end(&self, status: Option<u16>, error_type: Option<String>) {
        if !self.open.swap(false, Ordering::AcqRel) {
            return;
        }
        keep_thread_state();
        Python::attach(|py| {
            let _ = self
                .call
                .bind(py)
                .call_method1(pyo3::intern!(py, "end"), (status, error_type));
        })
    }
}

impl Observer for PyTraceObserver {
    fn start(&self, start: &AttemptStart<'_>) -> Vec<(String, String)> {
        let s = span_start(start);
        keep_thread_state();
        Python::attach(|py| {
            let headers = self.call.bind(py).call_method1(
                pyo3::intern!(py, "start"),
                (
                    s.name,
                    s.method,
                    s.template,
                    s.address,
                    s.port,
                    s.resend_count,
                ),
            );
            self.open.store(true, Ordering::Release);
            headers
                .ok()
                .and_then(|h| h.cast_into::<PyList>().ok())
                .map(|list| {
                    list.iter()
                        .filter_map(|pair| pair.extract::<(String, String)>().ok())
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    fn attempt(&self, log: &AttemptLog<'_>) {
        let e = span_end(log);
        self.end(e.status, e.error_type)
    }
}

impl Drop for PyTraceObserver {
    /// A call dropped mid-attempt (a cancelled awaitable) still ends its span.
    fn drop(&mut self) {
        self.end(None, Some("cancelled".to_string()))
    }
}

/// Both the DEBUG log and the spans.
struct Both(Arc<dyn Observer>, Arc<dyn Observer>);

impl Observer for Both {
    fn start(&self, start: &AttemptStart<'_>) -> Vec<(String, String)> {
        let mut headers = self.0.start(start);
        headers.extend(self.1.start(start));
        headers
    }

    fn attempt(&self, log: &AttemptLog<'_>) {
        self.0.attempt(log);
        self.1.attempt(log);
    }
}

/// The observer of one call: DEBUG logging when the `fxpay` logger wants it, spans when a
/// tracer provider is set; None when neither.
pub fn observer(py: Python<'_>) -> Option<Arc<dyn Observer>> {
    let log = super::logging::observer(py);
    let trace = call_trace(py).map(|call| {
        Arc::new(PyTraceObserver {
            call: call.unbind(),
            open: AtomicBool::new(false),
        }) as Arc<dyn Observer>
    });
    match (log, trace) {
        (Some(l), Some(t)) => Some(Arc::new(Both(l, t))),
        (l, t) => l.or(t),
    }
}

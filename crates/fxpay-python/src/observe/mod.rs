//! What a call is observed with: DEBUG lines on the `fxpay` logger ([`logging`]) and
//! OpenTelemetry spans ([`spans`], with the tracer and propagator [`otel`] finds); one
//! observer per call, or none when neither is on.
pub mod logging;
mod otel;
pub mod spans;

use fxpay_core::transport::{AttemptLog, AttemptStart, Observer};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::sync::Arc;

/// The module `name` if it has been imported (from `sys.modules`; this never imports it):
/// `Err` when `sys.modules` cannot be read. Neither logging nor tracing can be on in a
/// process that never imported its module, and importing it (`logging` costs milliseconds)
/// would only slow a cold start.
pub(crate) fn imported<'py>(
    py: Python<'py>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // SAFETY: with the GIL held, `PyImport_GetModuleDict` returns a borrowed reference to
    // the interpreter's `sys.modules` dict (never null while the interpreter runs); it is
    // turned into an owned reference at once.
    let modules = unsafe {
        let ptr = pyo3::ffi::PyImport_GetModuleDict();
        if ptr.is_null() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err("no sys.modules"));
        }
        Bound::from_borrowed_ptr(py, ptr)
    };
    modules.cast_into::<PyDict>()?.get_item(name)
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
    let log = logging::observer(py);
    let trace = otel::call_trace(py)
        .map(|(tracer, parent, fixed)| spans::PyTraceObserver::new(tracer, parent, fixed))
        .map(|t| Arc::new(t) as Arc<dyn Observer>);
    match (log, trace) {
        (Some(l), Some(t)) => Some(Arc::new(Both(l, t))),
        (l, t) => l.or(t),
    }
}

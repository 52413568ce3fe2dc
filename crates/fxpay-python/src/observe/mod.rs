//! What a call is observed with: DEBUG lines on the `fxpay` logger ([`logging`]) and
//! OpenTelemetry spans ([`spans`], with the tracer and propagator [`otel`] finds); one
//! observer per call, or none when neither is on.
mod imported;
pub mod logging;
mod otel;
mod otel_reads;
pub mod spans;

use fxpay_core::{AttemptLog, AttemptStart, ExtraHeaders, Observer};
use pyo3::prelude::*;
use std::sync::Arc;

/// Both the DEBUG log and the spans.
struct Both(Arc<dyn Observer>, Arc<dyn Observer>);

impl Observer for Both {
    fn start(&self, start: &AttemptStart<'_>) -> ExtraHeaders {
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

//! What a call is observed with: DEBUG lines on the `fxpay` logger ([`logging`]) and
//! OpenTelemetry spans ([`spans`], with the tracer and propagator [`otel`] finds); one
//! observer per call, or none when neither is on.
//!
//! The rest of the binding comes here through two doors: [`observer`] when a call starts
//! (with the GIL, in the caller's thread or task), and [`flush`] when a thread holds the GIL
//! again after waiting for calls (a blocking call's wait, the event loop's drain).
mod imported;
mod logging;
mod otel;
mod spans;

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

/// How a call's result is waited for, which decides where its spans are ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// By the caller's thread (a blocking call), or by no one (a payout's rows): a span
    /// ends on the thread that ends its attempt when it is the caller's blocking thread,
    /// else at once.
    Blocking,
    /// By an event loop (an awaitable): its spans are ended by the loop's drain.
    Awaited,
}

/// The observer of one call: DEBUG logging when the `fxpay` logger wants it, spans when a
/// tracer provider is set; None when neither.
pub fn observer(py: Python<'_>, waited: Waited) -> Option<Arc<dyn Observer>> {
    let log = logging::observer(py);
    let awaited = waited == Waited::Awaited;
    let trace = otel::call_trace(py)
        .map(|(tracer, parent, fixed)| spans::PyTraceObserver::new(tracer, parent, fixed, awaited))
        .map(|t| Arc::new(t) as Arc<dyn Observer>);
    match (log, trace) {
        (Some(l), Some(t)) => Some(Arc::new(Both(l, t))),
        (l, t) => l.or(t),
    }
}

/// What calls left for a thread holding the GIL: the spans of attempts that are over (this
/// thread's blocking calls' and awaitables'), and the DEBUG lines of calls this thread made
/// from inside another blocking call. Called by the bridge each time a blocking wait wakes
/// and before an event loop's drain delivers results.
pub fn flush(py: Python<'_>) {
    spans::flush_ended(py);
    logging::flush_deferred(py);
}

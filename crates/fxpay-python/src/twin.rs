//! Twins: a network method's blocking form and its `_async` form, two one-line
//! `#[pymethods]` over one function of the class that converts the arguments (with the GIL,
//! so a wrong type raises at the call) and returns how to start the call once its tracing
//! observer is known (a [`Start`]). The blocking form starts it at once and waits with the
//! GIL released ([`blocking`]); the `_async` form returns a coroutine that starts it on its
//! first step ([`awaitable`]). Both are bounded by the object's deadline and keep a
//! `with_raw_response` capture armed for them.
use super::bridge::block as block_now;
use super::bridge::call as call_later;
use super::bridge::CallFuture;
use super::models::out::Out;
use super::observe::{observer, Waited};
use fxpay_core::{Error, Observer};
use pyo3::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A call's tracing observer (None when neither tracing nor DEBUG logging is on).
pub type Obs = Option<Arc<dyn Observer>>;

/// A blocking call bounded by `deadline` (`fxpay_core::deadline_scope`).
pub fn block<F>(py: Python<'_>, deadline: Option<Duration>, fut: F) -> PyResult<Py<PyAny>>
where
    F: std::future::Future<Output = Result<Out, Error>> + Send + 'static,
{
    let raw = super::raw::take_armed();
    // Boxed first: a call's future is kilobytes, and each wrapper around it (the raw
    // capture, the deadline, the panic guard, the runtime's task) would otherwise copy it
    // whole as it moves in (`bench/`: 8 threads spent about 10 µs more CPU per call).
    let fut = Box::pin(fut);
    block_now(
        py,
        fxpay_core::raw_scope(raw, fxpay_core::deadline_scope(deadline, fut)),
    )
}

/// An awaitable call bounded by `deadline`; `name` is the method's, for the coroutine's repr.
pub fn call(
    py: Python<'_>,
    deadline: Option<Duration>,
    name: &'static str,
    start: impl FnOnce(Obs) -> CallFuture + Send + 'static,
) -> PyResult<Py<PyAny>> {
    let raw = super::raw::take_armed();
    call_later(py, name, move |py| {
        let obs = observer(py, Waited::Awaited);
        Box::pin(fxpay_core::raw_scope(
            raw,
            fxpay_core::deadline_scope(deadline, start(obs)),
        ))
    })
}

/// How a network method's call starts once its tracing observer is known: what a method and
/// its `_async` twin share. A class makes one with a function of its own (`x_call`), which
/// converts the arguments with the GIL (a wrong type raises at the call); any closure
/// `move |obs: Obs| async move { ... }` is one.
pub trait Start: Send + 'static {
    type Fut: std::future::Future<Output = Result<Out, Error>> + Send + 'static;
    fn start(self, obs: Obs) -> Self::Fut;
}

impl<F, Fut> Start for F
where
    F: FnOnce(Obs) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Out, Error>> + Send + 'static,
{
    type Fut = Fut;
    fn start(self, obs: Obs) -> Fut {
        self(obs)
    }
}

/// The blocking form of a network method: starts the call at once, with the caller's
/// observer, and waits with the GIL released.
pub fn blocking(
    py: Python<'_>,
    deadline: Option<Duration>,
    call: impl Start,
) -> PyResult<Py<PyAny>> {
    let obs = observer(py, Waited::Blocking);
    block(py, deadline, call.start(obs))
}

/// The `_async` form of a network method (`name`, for the coroutine's repr): a coroutine
/// that starts the call on its first step, inside the awaiting task.
pub fn awaitable(
    py: Python<'_>,
    deadline: Option<Duration>,
    name: &'static str,
    call: impl Start,
) -> PyResult<Py<PyAny>> {
    self::call(py, deadline, name, move |obs| Box::pin(call.start(obs)))
}

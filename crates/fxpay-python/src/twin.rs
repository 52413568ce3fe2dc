//! Twins: a network method's blocking form and its `_async` form, made from one description
//! by `twin!` (as `pymodel!` makes a model class from one).
//!
//! A description converts the arguments (with the GIL, so a wrong type raises at the call)
//! and returns how to start the call once its tracing observer is known. The blocking form
//! starts it at once and waits with the GIL released; the `_async` form returns a coroutine
//! that starts it on its first step. Both are bounded by the object's deadline and keep a
//! `with_raw_response` capture armed for them.
use super::bridge::block as block_now;
use super::bridge::CallFuture;
use super::call::call as call_later;
use super::models::Out;
use fxpay_core::error::Error;
use fxpay_core::transport::Observer;
use pyo3::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A call's tracing observer (None when neither tracing nor DEBUG logging is on).
pub type Obs = Option<Arc<dyn Observer>>;

/// A blocking call bounded by `deadline` (`fxpay_core::deadline`).
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
        fxpay_core::raw::scope(raw, fxpay_core::deadline::scope(deadline, fut)),
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
    call_later(py, name, move |obs| {
        Box::pin(fxpay_core::raw::scope(
            raw,
            fxpay_core::deadline::scope(deadline, start(obs)),
        ))
    })
}

/// The `#[pymethods]` block of a class with twins: first the twins, one description each,
/// then the class's other methods as they would stand in `#[pymethods]`. The invocation
/// writes `#[pymethods]` itself: pyo3's generated code then has the caller's hygiene.
///
/// ```text
/// twin! {
///     #[pymethods]
///     impl Client {
///         /// Reads a quote.
///         fn get_quote, get_quote_async (&self, py, quote_id: &Bound<'_, PyAny>) {
///             let (c, quote_id) = (self.core()?.clone(), text(quote_id, "quote_id")?);
///             move |obs: Obs| async move { ... }
///         }
///     }
///     // other methods
/// }
/// ```
///
/// The description's block runs in both forms, with the GIL; it returns a closure that
/// makes the call's future from its observer. The class has `fn deadline(&self) ->
/// Option<Duration>`. The `_async` form's docstring is ":meth:`x`, awaitable."; both forms
/// take the `#[pyo3(...)]` options given (so their signatures are the same by construction,
/// which tests/python/client/test_twins.py checks).
macro_rules! twin {
    (
        $hash:tt $pymethods:tt
        impl $ty:ident {
            $(
                $(#[doc = $doc:expr])*
                $(#[pyo3 $opt:tt])*
                fn $name:ident, $async_name:ident (&$self:ident, $py:ident $(, $arg:ident : $argty:ty)*) $body:block
            )*
        }
        $($plain:tt)*
    ) => {
        $hash $pymethods
        impl $ty {
            $(
                $(#[doc = $doc])*
                $(#[pyo3 $opt])*
                #[allow(clippy::too_many_arguments)]
                fn $name(&$self, $py: Python<'_> $(, $arg: $argty)*) -> PyResult<Py<PyAny>> {
                    let start = $body;
                    let obs = $crate::observe::observer($py);
                    $crate::twin::block($py, $self.deadline(), start(obs))
                }

                #[doc = concat!(":meth:`", stringify!($name), "`, awaitable.")]
                $(#[pyo3 $opt])*
                #[allow(clippy::too_many_arguments)]
                fn $async_name(&$self, $py: Python<'_> $(, $arg: $argty)*) -> PyResult<Py<PyAny>> {
                    let start = $body;
                    $crate::twin::call($py, $self.deadline(), stringify!($async_name), move |obs| {
                        Box::pin(start(obs))
                    })
                }
            )*

            $($plain)*
        }
    };
}

pub(crate) use twin;

//! One async core behind both call styles: blocking calls run the future on the shared
//! runtime with the GIL released; awaitable calls hand it to asyncio. Panics become errors.
use super::errors::{panic_message, to_pyerr};
use super::models::Out;
use crate::error::Error;
use futures_util::FutureExt;
use pyo3::prelude::*;
use std::future::Future;
use std::panic::AssertUnwindSafe;

/// Runs `fut` blocking (GIL released) or returns an asyncio awaitable for it.
pub fn run<F>(py: Python<'_>, aio: bool, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    crate::runtime::check_not_forked().map_err(to_pyerr)?;
    let guarded = async move {
        match AssertUnwindSafe(fut).catch_unwind().await {
            Ok(r) => r,
            Err(payload) => Err(panic_message(payload)),
        }
    };
    if aio {
        let awaitable = pyo3_async_runtimes::tokio::future_into_py(py, async move {
            guarded.await.map_err(to_pyerr)
        })?;
        Ok(awaitable.unbind())
    } else {
        let rt = crate::runtime::runtime();
        let out = py
            .detach(|| std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(guarded))))
            .unwrap_or_else(|payload| Err(panic_message(payload)))
            .map_err(to_pyerr)?;
        Ok(out.into_pyobject(py)?.unbind())
    }
}

/// Runs a synchronous piece of the binding, turning a panic into an `FxPayError`.
pub fn guard<T>(f: impl FnOnce() -> Result<T, Error>) -> PyResult<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(panic_message(payload)))
        .map_err(to_pyerr)
}

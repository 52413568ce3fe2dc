//! Test hooks that panic inside the core on purpose, so the suite can prove a Rust panic
//! reaches Python as an `FxPayError`, from a blocking call and from an awaitable one. They
//! live in the private submodule `fxpay._fxpay._testing`, not in the public module.
use super::bridge::block;
use super::bridge::call;
use super::models::out::Out;
use pyo3::prelude::*;

/// Panics inside a blocking call.
#[pyfunction]
fn raise_panic(py: Python<'_>) -> PyResult<Py<PyAny>> {
    block(py, async move {
        panic!("deliberate test panic (blocking)");
        #[allow(unreachable_code)]
        Ok(Out::None)
    })
}

/// As [`raise_panic`], through the coroutine of an awaitable call.
#[pyfunction]
fn raise_panic_async(py: Python<'_>) -> PyResult<Py<PyAny>> {
    call(py, "raise_panic_async", |_| {
        Box::pin(async move {
            panic!("deliberate test panic (async)");
            #[allow(unreachable_code)]
            Ok(Out::None)
        })
    })
}

/// Sets `_testing` (the hooks above) on the module `m`: an attribute, left out of its
/// `__all__` and its stub (`fxpay._fxpay._testing.raise_panic()`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let testing = PyModule::new(m.py(), "_testing")?;
    testing.add_function(wrap_pyfunction!(raise_panic, &testing)?)?;
    testing.add_function(wrap_pyfunction!(raise_panic_async, &testing)?)?;
    m.setattr("_testing", testing)
}

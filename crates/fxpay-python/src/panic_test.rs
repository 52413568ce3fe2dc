//! Test hooks that panic inside the core on purpose, so the suite can prove a Rust panic
//! reaches Python as an `FxPayError`, from a blocking call and from an awaitable one.
use super::bridge::block;
use super::call::call;
use super::models::Out;
use pyo3::prelude::*;

/// Panics inside a blocking call.
#[pyfunction]
pub fn _raise_panic_for_test(py: Python<'_>) -> PyResult<Py<PyAny>> {
    block(py, async move {
        panic!("deliberate test panic (blocking)");
        #[allow(unreachable_code)]
        Ok(Out::None)
    })
}

/// As [`_raise_panic_for_test`], through the coroutine of an awaitable call.
#[pyfunction]
pub fn _raise_panic_for_test_async(py: Python<'_>) -> PyResult<Py<PyAny>> {
    call(py, "_raise_panic_for_test_async", |_| {
        Box::pin(async move {
            panic!("deliberate test panic (async)");
            #[allow(unreachable_code)]
            Ok(Out::None)
        })
    })
}

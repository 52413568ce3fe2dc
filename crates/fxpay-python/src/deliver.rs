//! Resolves a call's asyncio future with its result, on the event loop's thread.
use super::errors::to_pyerr;
use super::models::Out;
use fxpay_core::error::Error;
use pyo3::intern;
use pyo3::prelude::*;

/// Sets `fut`'s result (the call's model) or exception (its typed error); a future that is
/// done already (cancelled) takes nothing.
pub fn deliver(py: Python<'_>, fut: &Bound<'_, PyAny>, result: Result<Out, Error>) {
    match fut
        .call_method0(intern!(py, "done"))
        .and_then(|d| d.is_truthy())
    {
        Ok(false) => {}
        _ => return,
    }
    let outcome = result
        .map_err(to_pyerr)
        .and_then(|out| out.into_pyobject(py));
    let set = match outcome {
        Ok(value) => fut.call_method1(intern!(py, "set_result"), (value,)),
        Err(e) => fut.call_method1(intern!(py, "set_exception"), (e.into_value(py),)),
    };
    if let Err(e) = set {
        e.write_unraisable(py, Some(fut));
    }
}

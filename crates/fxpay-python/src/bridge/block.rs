//! The blocking wait: the caller's thread polls the call's future itself, inside the shared
//! runtime (`Runtime::block_on`), with the GIL released, while the runtime's workers drive
//! the sockets and timers. Every 100 ms it looks for a pending signal, so Ctrl-C ends the
//! wait.
use super::guarded::{guarded, CallFuture};
use crate::errors::to_pyerr;
use crate::models::out::Out;
use fxpay_core::Error;
use pyo3::prelude::*;
use std::future::Future;
use std::time::Duration;

/// How often a blocking call looks for a pending signal (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Runs `fut` to its end with the GIL released and returns its result.
pub fn block<F>(py: Python<'_>, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let result = wait(py, Box::pin(guarded(fut)))?;
    Ok(result.map_err(to_pyerr)?.into_pyobject(py)?.unbind())
}

/// Polls `fut` on this thread until it ends. A signal abandons it (dropped inside the
/// runtime).
fn wait(py: Python<'_>, mut fut: CallFuture) -> PyResult<Result<Out, Error>> {
    let rt = fxpay_core::runtime();
    loop {
        let waited = py.detach(|| {
            let _here = fxpay_core::Blocking::enter();
            // On a runtime worker (a Python hook run there makes a blocking call), the worker
            // first hands its other work to another thread; elsewhere this only runs `f`.
            tokio::task::block_in_place(|| {
                rt.block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut fut).await.ok() })
            })
        });
        // The spans of the attempts that ended meanwhile (their ends wait for the GIL).
        crate::observe::spans::flush_ended(py);
        let Some(result) = waited else {
            if let Err(e) = py.check_signals() {
                // Its sockets and timers are released where they were registered.
                let _inside = rt.enter();
                drop(fut);
                crate::observe::logging::flush_deferred(py);
                return Err(e);
            }
            continue;
        };
        crate::observe::logging::flush_deferred(py);
        return Ok(result);
    }
}

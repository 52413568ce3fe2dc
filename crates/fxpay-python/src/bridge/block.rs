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
fn wait(py: Python<'_>, fut: CallFuture) -> PyResult<Result<Out, Error>> {
    let rt = fxpay_core::runtime();
    // None once abandoned.
    let mut fut = Some(fut);
    loop {
        let Some(polled) = fut.as_mut() else {
            return Err(to_pyerr(Error::Internal("the call was abandoned".into())));
        };
        let waited = py.detach(|| {
            let _here = super::blocking::enter();
            // On a runtime worker (a Python hook run there makes a blocking call), the worker
            // first hands its other work to another thread; elsewhere this only runs `f`.
            tokio::task::block_in_place(|| {
                rt.block_on(async { tokio::time::timeout(SIGNAL_CHECK, polled).await.ok() })
            })
        });
        let outcome = match waited {
            Some(result) => Some(Ok(result)),
            None => match py.check_signals() {
                Err(e) => {
                    // Its sockets and timers are released where they were registered.
                    let _inside = rt.enter();
                    drop(fut.take());
                    Some(Err(e))
                }
                Ok(()) => None,
            },
        };
        // What the attempts that ended meanwhile left for this thread (their spans' ends,
        // the DEBUG lines of calls made from inside this one): they wait for the GIL.
        crate::observe::flush(py);
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
}

//! The blocking wait: the caller's thread polls the call's future itself, inside the shared
//! runtime (`Runtime::block_on`), with the GIL released, while the runtime's workers drive
//! the sockets and timers. Every 100 ms it looks for a pending signal, so Ctrl-C ends the
//! wait (or, for a call that can be asked to stop, asks it first).
use super::guarded::{guarded, CallFuture};
use crate::errors::to_pyerr;
use crate::models::Out;
use fxpay_core::Error;
use pyo3::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often a blocking call looks for a pending signal (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Runs `fut` to its end with the GIL released and returns its result.
pub fn block<F>(py: Python<'_>, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let result = wait(py, Box::pin(guarded(fut)), None)?;
    Ok(result.map_err(to_pyerr)?.into_pyobject(py)?.unbind())
}

/// Runs `fut` as a call that can be asked to stop: the first Ctrl-C sets `stop` and waits
/// for `fut` to end (it starts nothing new and lets what runs finish), then raises the
/// KeyboardInterrupt; a second Ctrl-C abandons it.
pub fn block_until_stopped<F>(py: Python<'_>, fut: F, stop: Arc<AtomicBool>) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<Out, Error>> + Send + 'static,
{
    let result = wait(py, Box::pin(guarded(fut)), Some(stop))?;
    Ok(result.map_err(to_pyerr)?.into_pyobject(py)?.unbind())
}

/// Polls `fut` on this thread until it ends. A signal abandons it (dropped inside the
/// runtime), unless `stop` is given: then the first signal sets `stop`, the wait goes on
/// until `fut` ends, and the signal's exception is raised; a second signal abandons it.
fn wait(
    py: Python<'_>,
    mut fut: CallFuture,
    stop: Option<Arc<AtomicBool>>,
) -> PyResult<Result<Out, Error>> {
    let rt = fxpay_core::runtime();
    let mut interrupted: Option<PyErr> = None;
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
                match &stop {
                    Some(flag) if interrupted.is_none() => {
                        flag.store(true, Ordering::Release);
                        interrupted = Some(e);
                    }
                    _ => {
                        // Its sockets and timers are released where they were registered.
                        let _inside = rt.enter();
                        drop(fut);
                        crate::observe::logging::flush_deferred(py);
                        return Err(e);
                    }
                }
            }
            continue;
        };
        crate::observe::logging::flush_deferred(py);
        return match interrupted {
            Some(e) => Err(e),
            None => Ok(result),
        };
    }
}

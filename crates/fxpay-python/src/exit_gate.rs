//! The one way a thread Python does not own (a runtime worker, a blocking-pool thread) takes
//! the GIL: through a gate that closes while the interpreter can still run everything, in an
//! `atexit` hook, before finalization starts.
//!
//! Why: once `Py_FinalizeEx` has marked the runtime as finalizing, a foreign thread that asks
//! for the GIL is not refused but killed (`PyThread_exit_thread`, which unwinds through Rust
//! frames and aborts), or it gets a thread state the finalizer is freeing (SIGSEGV), or
//! `PyGILState_Release` stops the process ("Fatal Python error: PyGILState_Release ...
//! runtime state: finalizing"). A check of `Py_IsFinalizing` before attaching
//! (`Python::try_attach`) cannot close that race on its own: finalization may start between
//! the check and the attach. The gate does: the hook closes it and then waits, with the GIL
//! released, until every thread inside it has left; no thread enters once it is closed.
//! `try_attach` stays as a second check for interpreters that end without running `atexit`
//! hooks (an embedder calling `Py_FinalizeEx` after `os._exit`-style shortcuts).
use fxpay_core::{Gate, Inside};
use pyo3::prelude::*;
use std::cell::Cell;

/// Closed by the `atexit` hook; counts the threads inside (attached, or about to attach). Its
/// protocol (count in, then look; close, then wait) is `fxpay_core::Gate`, model-checked by
/// loom (`just loom`).
static GATE: Gate = Gate::new();

/// Enters the gate; None when it is closed. Leaves it when dropped (also when the closure
/// unwinds).
fn enter() -> Option<Inside<'static>> {
    GATE.enter()
}

/// Runs `f` attached to Python unless the interpreter is shutting down (the gate is closed,
/// or finalization has begun): then `f` does not run and the result is None.
///
/// A thread Python does not own (a runtime worker, a blocking-pool thread) keeps the Python
/// thread state its first attach made, until it ends ([`Kept`]). Made and deleted on every
/// attach, a thread state costs its allocation and frame stack each time, and each creation
/// takes the interpreter's thread-list lock before the GIL: a fork taken meanwhile by a
/// Python thread left CPython 3.11's child waiting for that lock forever in
/// `PyOS_AfterFork_Child`, which deletes the other threads' states before it re-creates the
/// lock (1 child in 600 forks with 8 threads making keyed calls).
pub fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let _inside = enter()?;
    // A Python thread (one that has a state already) is left alone.
    // SAFETY: reads this thread's thread-state slot (the interpreter is not finalizing: the
    // gate is open); needs no GIL.
    let foreign = unsafe { pyo3::ffi::PyGILState_GetThisThreadState() }.is_null();
    Python::try_attach(|py| {
        if foreign {
            let _ = KEPT.try_with(Kept::keep);
        }
        f(py)
    })
}

/// Whether this thread keeps a Python thread state of its own; when the thread ends, the state
/// is deleted (unless the interpreter is ending: then finalization frees it).
struct Kept(Cell<bool>);

impl Kept {
    /// Called attached, through `PyGILState_Ensure` (pyo3's attach), from a thread that had no
    /// state before it.
    fn keep(&self) {
        if !self.0.replace(true) {
            // SAFETY: attached. A second `Ensure`, never released, leaves the state's counter
            // one above what the enclosing attach's `Release` takes off: the state stays
            // registered for this thread instead of being deleted, and later attaches reuse it.
            unsafe {
                let _ = pyo3::ffi::PyGILState_Ensure();
            }
        }
    }
}

impl Drop for Kept {
    /// Runs at thread exit, before the thread's pthread-keyed data (CPython 3.11's thread-state
    /// slot) goes away.
    fn drop(&mut self) {
        if !self.0.get() {
            return;
        }
        let Some(_inside) = enter() else {
            return;
        };
        let _ = Python::try_attach(|_py| {
            // SAFETY: attached through `Ensure` on the kept state (counter 2). This `Release`
            // takes back the one `keep` added (counter 1, the GIL stays held: `LOCKED`); the
            // enclosing attach's own `Release` then brings it to 0, which clears and deletes
            // the state and releases the GIL.
            unsafe { pyo3::ffi::PyGILState_Release(pyo3::ffi::PyGILState_STATE::PyGILState_LOCKED) }
        });
    }
}

thread_local! {
    static KEPT: Kept = const { Kept(Cell::new(false)) };
}

/// How long a normal exit waits for the journal's work in flight (keyed calls and payout
/// rows still running, undos, results recorded again) before the gate closes.
const JOURNAL_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The `atexit` hook: lets the journal's work in flight end (bounded, so that no key is left
/// `pending` for the next run to find `unknown`), then closes the gate and waits for the
/// threads inside to leave.
#[pyfunction]
fn _close_exit_gate(py: Python<'_>) {
    // Detached: the work may call a journal written in Python, which needs the GIL.
    py.detach(|| fxpay_core::drain_journal(JOURNAL_DRAIN));
    GATE.close();
    // A thread inside may be waiting for the GIL: let it have it.
    py.detach(|| {
        while !GATE.is_empty() {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    });
}

/// Registers the hook (at import: `atexit` runs hooks last-registered first, so any hook a
/// user registers later, which may still make calls, runs before the gate closes).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let hook = wrap_pyfunction!(_close_exit_gate, m)?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    Ok(())
}

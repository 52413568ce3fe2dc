//! This thread's running asyncio loop, as `asyncio.get_running_loop()` tells, for every
//! awaitable call.
//!
//! Before CPython 3.12, `get_running_loop()` makes a getpid(2) system call each time: its
//! check that the loop was not inherited through a fork. On those versions the loop it last
//! returned on this thread is kept and taken again while it still runs on this thread. An
//! `asyncio.BaseEventLoop` holds the ident of the thread that runs it in `_thread_id` while
//! it runs (None once it stops), and a thread runs one loop at a time, so a kept loop whose
//! `_thread_id` is still the ident it had when it was kept is the running loop. A forked
//! child forgets the kept loop (`ProcessBound`: `get_running_loop()` decides there, as
//! before), and a loop of any other class (uvloop's) is asked for every call.
use fxpay_core::runtime::fork::ProcessBound;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::cell::RefCell;
use std::sync::OnceLock;

/// A running loop seen on this thread, and the `_thread_id` it had then.
struct Kept {
    event_loop: Py<PyAny>,
    ident: u64,
}

thread_local! {
    static KEPT: RefCell<Option<ProcessBound<Kept>>> = const { RefCell::new(None) };
}

static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static BASE_EVENT_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Whether this interpreter's `get_running_loop()` costs a system call (CPython before 3.12).
fn costly(py: Python<'_>) -> bool {
    static COSTLY: OnceLock<bool> = OnceLock::new();
    *COSTLY.get_or_init(|| py.version_info() < (3, 12))
}

/// This thread's running loop; `RuntimeError` when none runs, as `get_running_loop()` says.
pub fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    if !costly(py) {
        return asked(py);
    }
    if let Some(kept) = kept(py) {
        return Ok(kept);
    }
    let event_loop = asked(py)?;
    keep(py, &event_loop);
    Ok(event_loop)
}

fn asked(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("asyncio")?.getattr("get_running_loop")?.unbind())
    })?;
    get.bind(py).call0()
}

/// The loop's `_thread_id` as an ident; None when it has none (it is not running).
fn thread_id(event_loop: &Bound<'_, PyAny>) -> Option<u64> {
    let py = event_loop.py();
    event_loop
        .getattr(intern!(py, "_thread_id"))
        .ok()?
        .extract::<u64>()
        .ok()
}

/// The kept loop, if it still runs on this thread.
fn kept(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    KEPT.try_with(|cell| {
        let slot = cell.borrow();
        let kept = slot.as_ref().filter(|k| k.is_current())?;
        let event_loop = kept.event_loop.bind(py);
        (thread_id(event_loop)? == kept.ident).then(|| event_loop.clone())
    })
    .ok()
    .flatten()
}

/// Keeps `event_loop` (just returned by `get_running_loop()` on this thread) when it is an
/// `asyncio.BaseEventLoop`, whose `_thread_id` says where it runs; forgets any other.
fn keep(py: Python<'_>, event_loop: &Bound<'_, PyAny>) {
    let base = BASE_EVENT_LOOP.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("asyncio")?.getattr("BaseEventLoop")?.unbind())
    });
    let ident = match base {
        Ok(base) if event_loop.is_instance(base.bind(py)).unwrap_or(false) => thread_id(event_loop),
        _ => None,
    };
    let kept = ident.map(|ident| {
        ProcessBound::new(Kept {
            event_loop: event_loop.clone().unbind(),
            ident,
        })
    });
    // Not while `kept` reads it (a `_thread_id` of a subclass's own could call back here).
    let _ = KEPT.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = kept;
        }
    });
}

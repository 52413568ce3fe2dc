//! DEBUG lines on Python's `fxpay` logger, one per attempt. The check whether DEBUG is on is
//! made once per call, while the caller holds the GIL, so a quiet logger costs nothing later.
use fxpay_core::{AttemptLog, Observer};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
const DEBUG: i32 = 10;

/// The `fxpay` logger, or None while nothing has imported `logging` (then no logger can have
/// DEBUG on, and a cold start does not pay for importing it).
fn logger(py: Python<'_>) -> PyResult<Option<&Bound<'_, PyAny>>> {
    if let Some(l) = LOGGER.get(py) {
        return Ok(Some(l.bind(py)));
    }
    let Some(logging) = super::imported::imported(py, pyo3::intern!(py, "logging"))? else {
        return Ok(None);
    };
    let l = LOGGER.get_or_try_init(py, || {
        Ok::<_, PyErr>(logging.call_method1("getLogger", ("fxpay",))?.unbind())
    })?;
    Ok(Some(l.bind(py)))
}

/// `logger.isEnabledFor(DEBUG)`, the public question (`logging.disable`, the `disabled`
/// flag, the levels of the logger and its parents, a logger class of the user's own).
///
/// Asked through `PyObject_CallMethodObjArgs`, which looks the method up on each call as
/// `logger.isEnabledFor(10)` does but makes neither a bound method nor an argument tuple
/// (pyo3's `call_method1` makes both under the stable ABI): about 400 instructions a call.
fn debug_on(py: Python<'_>, logger: &Bound<'_, PyAny>) -> bool {
    let name = pyo3::intern!(py, "isEnabledFor");
    let Ok(level) = DEBUG.into_pyobject(py);
    // SAFETY: the GIL is held (`py`); `logger`, `name` and `level` are live references for
    // the whole call, and the argument list ends with the NULL the C API requires. The
    // result is a new reference, or NULL with the exception set, which `from_owned_ptr_or_err`
    // takes either way.
    let answer = unsafe {
        let r = pyo3::ffi::PyObject_CallMethodObjArgs(
            logger.as_ptr(),
            name.as_ptr(),
            level.as_ptr(),
            std::ptr::null_mut::<pyo3::ffi::PyObject>(),
        );
        Bound::from_owned_ptr_or_err(py, r)
    };
    answer.and_then(|r| r.is_truthy()).unwrap_or(false)
}

/// One DEBUG line's arguments, owned.
struct Line {
    method: String,
    path: String,
    status: String,
    attempt: u32,
    ms: f64,
    retry: String,
    request_id: String,
}

impl Line {
    fn of(log: &AttemptLog<'_>) -> Self {
        let status = match (&log.status, &log.error) {
            (Some(s), _) => s.to_string(),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => "no answer".to_string(),
        };
        let retry = log
            .retry_in
            .map(|d| format!("; retrying in {:.0} ms", d.as_secs_f64() * 1000.0))
            .unwrap_or_default();
        Line {
            method: log.method.to_string(),
            path: log.path.to_string(),
            status,
            attempt: log.attempt,
            ms: log.duration.as_secs_f64() * 1000.0,
            retry,
            request_id: log
                .request_id
                .map(|id| format!(", request id {id}"))
                .unwrap_or_default(),
        }
    }

    fn emit(&self, py: Python<'_>) {
        let Ok(Some(logger)) = logger(py) else { return };
        let _ = logger.call_method1(
            "debug",
            (
                "%s /v1%s -> %s (attempt %d, %.1f ms%s)%s",
                &self.method,
                &self.path,
                &self.status,
                self.attempt,
                self.ms,
                &self.request_id,
                &self.retry,
            ),
        );
    }
}

/// Logs each attempt as it ends, from whatever thread runs the call.
struct PyLogObserver;

impl Observer for PyLogObserver {
    fn attempt(&self, log: &AttemptLog<'_>) {
        let line = Line::of(log);
        // Not once the interpreter is shutting down: the line is not written.
        let _ = crate::exit_gate::attach(|py| line.emit(py));
    }
}

/// Keeps the lines of a call made from inside another blocking call on the same thread (from
/// a logging handler or an `on_token` callback): that call runs on the shared runtime while
/// this thread waits, and logging from there could wait for a handler lock this thread holds.
/// Its lines are written on this thread once it is over ([`flush_deferred`]).
#[derive(Default)]
struct DeferredLog(Mutex<Vec<Line>>);

impl Observer for DeferredLog {
    fn attempt(&self, log: &AttemptLog<'_>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Line::of(log));
    }
}

thread_local! {
    static DEFERRED: RefCell<Vec<Arc<DeferredLog>>> = const { RefCell::new(Vec::new()) };
}

/// Writes the lines of the calls this thread made from inside another call.
pub(super) fn flush_deferred(py: Python<'_>) {
    let pending = DEFERRED
        .try_with(|d| std::mem::take(&mut *d.borrow_mut()))
        .unwrap_or_default();
    for deferred in pending {
        let lines = std::mem::take(&mut *deferred.0.lock().unwrap_or_else(PoisonError::into_inner));
        for line in lines {
            line.emit(py);
        }
    }
}

/// An observer when the `fxpay` logger has DEBUG on, else None.
pub(super) fn observer(py: Python<'_>) -> Option<Arc<dyn Observer>> {
    let enabled = match logger(py) {
        Ok(Some(l)) => debug_on(py, l),
        _ => false,
    };
    if !enabled {
        return None;
    }
    if crate::bridge::blocking::here() {
        let deferred = Arc::new(DeferredLog::default());
        let _ = DEFERRED.try_with(|d| d.borrow_mut().push(deferred.clone()));
        return Some(deferred);
    }
    Some(Arc::new(PyLogObserver))
}

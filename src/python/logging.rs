//! DEBUG lines on Python's `fxpay` logger, one per attempt. The check whether DEBUG is on is
//! made once per call, while the caller holds the GIL, so a quiet logger costs nothing later.
use crate::transport::{AttemptLog, Observer};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::sync::Arc;

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
const DEBUG: i32 = 10;

fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LOGGER
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("logging")?
                    .call_method1("getLogger", ("fxpay",))?
                    .unbind(),
            )
        })
        .map(|l| l.bind(py))
}

struct PyLogObserver;

impl Observer for PyLogObserver {
    fn attempt(&self, log: &AttemptLog<'_>) {
        Python::attach(|py| {
            let Ok(logger) = logger(py) else { return };
            let status = match (&log.status, &log.error) {
                (Some(s), _) => s.to_string(),
                (None, Some(e)) => format!("error: {e}"),
                (None, None) => "no answer".to_string(),
            };
            let retry = log
                .retry_in
                .map(|d| format!("; retrying in {:.0} ms", d.as_secs_f64() * 1000.0))
                .unwrap_or_default();
            let _ = logger.call_method1(
                "debug",
                (
                    "%s /v1%s -> %s (attempt %d, %.1f ms)%s",
                    log.method,
                    log.path,
                    status,
                    log.attempt,
                    log.duration.as_secs_f64() * 1000.0,
                    retry,
                ),
            );
        })
    }
}

/// An observer when the `fxpay` logger has DEBUG on, else None.
pub fn observer(py: Python<'_>) -> Option<Arc<dyn Observer>> {
    let enabled = logger(py)
        .and_then(|l| l.call_method1("isEnabledFor", (DEBUG,)))
        .and_then(|r| r.extract::<bool>())
        .unwrap_or(false);
    enabled.then(|| Arc::new(PyLogObserver) as Arc<dyn Observer>)
}

//! `fxpay._fxpay._sqlite_store`: the core's `SqliteStore` for `fxpay.SqliteJournal`, held
//! as a `_NativeStore` (`journal/native.rs`).
use super::native::{hook, PyNativeStore};
use crate::errors::Fallible;
use pyo3::prelude::*;
use std::time::Duration;

/// The journal at `path` (its file's device and inode checked before every claim),
/// connected now. `result_waits()` and `not_recorded(key, result)` are called back rarely.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn _sqlite_store(
    py: Python<'_>,
    path: &str,
    dev: u64,
    ino: u64,
    timeout: f64,
    delay: f64,
    result_waits: Py<PyAny>,
    not_recorded: Py<PyAny>,
) -> Fallible<PyNativeStore> {
    let waits = hook::<()>(result_waits);
    let lost = hook::<(String, Option<String>)>(not_recorded);
    let timeout = Duration::from_secs_f64(timeout);
    let delay = Duration::try_from_secs_f64(delay).unwrap_or(Duration::MAX / 2);
    let store = py.detach(|| {
        fxpay_core::sqlite_store(
            path,
            (dev, ino),
            timeout,
            delay,
            Box::new(move || waits(())),
            Box::new(move |k: &str, r: Option<&str>| lost((k.to_owned(), r.map(str::to_owned)))),
        )
    })?;
    Ok(PyNativeStore(store))
}

/// Makes a new journal in the file at `path` (a new temporary file `fxpay.SqliteJournal`
/// then links into place): the schema and the application id live in the core.
#[pyfunction]
pub fn _sqlite_create(py: Python<'_>, path: &str) -> Fallible<()> {
    Ok(py.detach(|| fxpay_core::create_sqlite_journal(path))?)
}

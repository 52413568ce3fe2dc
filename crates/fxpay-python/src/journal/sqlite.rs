//! `fxpay._fxpay._SqliteStore`: the core's `SqliteStore` held by `fxpay.SqliteJournal`. A
//! client given a `SqliteJournal` (of that class itself, not a subclass that overrides its
//! storage methods) uses the store directly: a keyed call never climbs into Python.
use super::entry::JournalEntry;
use crate::errors::Fallible;
use fxpay_core::{JournalStore, SqliteStore};
use pyo3::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A journal's storage in an SQLite file (private: `fxpay.SqliteJournal` wraps it).
#[pyclass(module = "fxpay._fxpay", name = "_SqliteStore", frozen)]
pub struct PySqliteStore(pub Arc<SqliteStore>);

fn out(e: Option<fxpay_core::Entry>) -> Option<JournalEntry> {
    e.map(JournalEntry)
}

#[pymethods]
impl PySqliteStore {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &str,
        dev: u64,
        ino: u64,
        timeout: f64,
        delay: f64,
        result_waits: Py<PyAny>,
        not_recorded: Py<PyAny>,
    ) -> Fallible<Self> {
        // Rare by design: once per process when its first result waits (the exit's flush is
        // registered), and for a result that could not be recorded (logged).
        let waits = move || {
            crate::exit_gate::attach(|py| {
                if let Err(e) = result_waits.call0(py) {
                    e.write_unraisable(py, None);
                }
            });
        };
        let lost = move |key: &str, result: Option<&str>| {
            crate::exit_gate::attach(|py| {
                if let Err(e) = not_recorded.call1(py, (key, result)) {
                    e.write_unraisable(py, None);
                }
            });
        };
        let timeout = Duration::from_secs_f64(timeout);
        let delay = Duration::try_from_secs_f64(delay).unwrap_or(Duration::MAX / 2);
        let store = py.detach(|| {
            SqliteStore::open(
                path,
                (dev, ino),
                timeout,
                delay,
                Box::new(waits),
                Box::new(lost),
            )
        })?;
        Ok(PySqliteStore(store))
    }

    fn get(&self, py: Python<'_>, key: &str) -> Fallible<Option<JournalEntry>> {
        Ok(out(py.detach(|| self.0.get(key))?))
    }

    fn claim(&self, py: Python<'_>, entry: &JournalEntry) -> Fallible<Option<JournalEntry>> {
        Ok(out(py.detach(|| self.0.claim(&entry.0))?))
    }

    fn swap(&self, py: Python<'_>, old: &JournalEntry, new: &JournalEntry) -> Fallible<bool> {
        Ok(py.detach(|| self.0.swap(&old.0, &new.0))?)
    }

    fn find(&self, py: Python<'_>, result: &str) -> Fallible<Option<JournalEntry>> {
        Ok(out(py.detach(|| self.0.find(result))?))
    }

    /// Every pending or unknown entry, in the order their keys were claimed.
    fn candidates(&self, py: Python<'_>) -> Fallible<Vec<JournalEntry>> {
        let all = py.detach(|| self.0.candidates())?;
        Ok(all.into_iter().map(JournalEntry).collect())
    }

    /// Writes the results waiting.
    fn flush(&self, py: Python<'_>) -> Fallible<()> {
        Ok(py.detach(|| self.0.flush())?)
    }

    fn close(&self, py: Python<'_>) -> Fallible<()> {
        Ok(py.detach(|| self.0.close())?)
    }

    /// What this process's side of the journal runs with (an SQLite setting, or
    /// `writes_waiting` / `results_waiting`), set first if `value` (`max_page_count` only).
    #[pyo3(signature = (name, value=None))]
    fn diagnostic(&self, py: Python<'_>, name: &str, value: Option<i64>) -> Fallible<String> {
        Ok(py.detach(|| self.0.diagnostic(name, value))?)
    }

    fn before_fork(&self, py: Python<'_>) {
        py.detach(|| self.0.before_fork());
    }

    fn after_fork_in_parent(&self) {
        self.0.after_fork_in_parent();
    }
}

/// Writes the results waiting in every SQLite journal of this process (the exit's flush, a
/// payout's end); `exiting`: every later one at once.
#[pyfunction]
pub fn _sqlite_flush_all(py: Python<'_>, exiting: bool) {
    py.detach(|| SqliteStore::flush_all(exiting));
}

/// Makes a new journal in the file at `path` (a new temporary file `fxpay.SqliteJournal`
/// then links into place): the schema and the application id live in the core.
#[pyfunction]
pub fn _sqlite_create(py: Python<'_>, path: &str) -> Fallible<()> {
    Ok(py.detach(|| SqliteStore::create(path))?)
}

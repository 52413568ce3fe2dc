//! `fxpay._fxpay._NativeStore`: a store of the core held by one of fxpay's own Python
//! journals (`SqliteJournal`, a `RedisJournal` made from a URL, a `PostgresJournal` made from
//! a connection string), made by `_sqlite_store` (`journal/sqlite.rs`), `_redis_store`
//! (`journal/redis.rs`) or `_postgres_store` (`journal/postgres.rs`). A client given such a
//! journal (of that class itself, not a subclass that overrides its storage methods) uses
//! the store directly: a keyed call never climbs into Python.
use super::entry::JournalEntry;
use crate::errors::Fallible;
use fxpay_core::JournalStore;
use pyo3::prelude::*;
use std::sync::Arc;

/// A journal's storage in the core (private: the journal classes wrap it).
#[pyclass(module = "fxpay._fxpay", name = "_NativeStore", frozen)]
pub struct PyNativeStore(pub Arc<dyn JournalStore>);

fn out(e: Option<fxpay_core::Entry>) -> Option<JournalEntry> {
    e.map(JournalEntry)
}

fn all(v: Vec<fxpay_core::Entry>) -> Vec<JournalEntry> {
    v.into_iter().map(JournalEntry).collect()
}

#[pymethods]
impl PyNativeStore {
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

    /// Every pending or unknown entry.
    fn candidates(&self, py: Python<'_>) -> Fallible<Vec<JournalEntry>> {
        Ok(all(py.detach(|| self.0.candidates())?))
    }

    /// The entries of `keys` that exist (every entry, if the store can list them, with None).
    #[pyo3(signature = (keys=None))]
    fn entries(&self, py: Python<'_>, keys: Option<Vec<String>>) -> Fallible<Vec<JournalEntry>> {
        Ok(all(py.detach(|| self.0.entries(keys.as_deref()))?))
    }

    /// Makes the journal where its storage holds none: True when made.
    fn create(&self, py: Python<'_>) -> Fallible<bool> {
        Ok(py.detach(|| self.0.create())?)
    }

    /// Writes the results waiting.
    fn flush(&self, py: Python<'_>) -> Fallible<()> {
        Ok(py.detach(|| self.0.flush())?)
    }

    fn close(&self, py: Python<'_>) -> Fallible<()> {
        Ok(py.detach(|| self.0.close())?)
    }

    /// What this process's side of the store runs with (each store names its own), set
    /// first if `value` where the store allows it.
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

/// Writes the results waiting in every durable journal of this process (the exit's flush,
/// a payout's end); `exiting`: every later one at once.
#[pyfunction]
pub fn _native_flush_all(py: Python<'_>, exiting: bool) {
    py.detach(|| fxpay_core::flush_journals(exiting));
}

/// A callback into Python, from a thread of the core: rare by design (once per process
/// when its first result waits; a result that could not be recorded; a warning).
pub fn hook<A: for<'py> pyo3::call::PyCallArgs<'py> + Send>(
    f: Py<PyAny>,
) -> impl Fn(A) + Send + Sync {
    move |args: A| {
        crate::exit_gate::attach(|py| {
            if let Err(e) = f.call1(py, args) {
                e.write_unraisable(py, None);
            }
        });
    }
}

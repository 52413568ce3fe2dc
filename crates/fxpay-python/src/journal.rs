//! The idempotency journal as Python sees it: a Python journal (`fxpay.SqliteJournal`,
//! `RedisJournal` or a user's own) adapted to the core's `JournalStore`; `MemoryJournal`,
//! `SqliteJournal`, a `RedisJournal` made from a URL and a `PostgresJournal` made from a
//! connection string hand the core their stores
//! (`journal/memory.rs`, `journal/native.rs`) instead. `fxpay.JournalEntry` is in
//! `journal/entry.rs`; the hand operations the Python journals share (resolve, unknown,
//! complete a spot deal), which are the core's, in `journal/operations.rs` (which registers
//! the classes with the module).
pub mod entry;
pub mod memory;
pub mod native;
pub mod operations;
pub mod postgres;
pub mod redis;
pub mod sqlite;

use entry::JournalEntry;

use super::convert::type_name;
use fxpay_core::{Entry, Error, HolderCheck, JournalStore, LeaseOnly, LocalProcesses, Result};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// A Python journal seen from the core: its `get`, `claim`, `swap` and `find` methods,
/// called with the GIL from the blocking pool. A journal whose `single_host` attribute is
/// true also has its holders' processes checked (a dead local holder is gone at once).
pub struct PyJournal {
    obj: Py<PyAny>,
    holders: Box<dyn HolderCheck>,
}

impl PyJournal {
    /// `obj` if it has the journal methods; anything else is a `TypeError` naming `name`.
    pub fn from_py(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Arc<dyn JournalStore>> {
        // fxpay's MemoryJournal offers its store to the core: no climb into Python per call.
        if let Ok(native) = obj.getattr("_native_store") {
            if let Ok(store) = native.cast::<memory::PyMemoryStore>() {
                return Ok(store.get().0.clone());
            }
            if let Ok(store) = native.cast::<native::PyNativeStore>() {
                return Ok(store.get().0.clone());
            }
        }
        for m in ["get", "claim", "swap", "find"] {
            if !obj.hasattr(m)? {
                return Err(PyTypeError::new_err(format!(
                    "{name} must be a fxpay.Journal (get, claim, swap, find), not {}",
                    type_name(obj)
                )));
            }
        }
        let single = match obj.getattr("single_host") {
            Ok(v) => v.is_truthy()?,
            Err(_) => false,
        };
        let holders: Box<dyn HolderCheck> = if single {
            Box::new(LocalProcesses)
        } else {
            Box::new(LeaseOnly)
        };
        Ok(Arc::new(PyJournal {
            obj: obj.clone().unbind(),
            holders,
        }))
    }

    fn call<T>(
        &self,
        method: &str,
        args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>>,
        out: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
    ) -> Result<T> {
        let r = crate::exit_gate::attach(|py| {
            let got = self.obj.bind(py).call_method1(method, args(py)?)?;
            out(&got)
        });
        match r {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(Error::journal(format!(
                "the journal's {method}() failed: {}",
                crate::exit_gate::attach(|py| shown(py, &e)).unwrap_or_default()
            ))),
            None => Err(Error::journal(
                "the journal cannot be used: the interpreter is shutting down",
            )),
        }
    }
}

fn shown(py: Python<'_>, e: &PyErr) -> String {
    let name = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    format!("{name}: {}", e.value(py))
}

/// `obj` as an entry, or None; anything else is a `TypeError`.
fn opt_entry(obj: &Bound<'_, PyAny>) -> PyResult<Option<Entry>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.cast::<JournalEntry>() {
        Ok(e) => Ok(Some(e.get().0.clone())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "returned {}, not a JournalEntry or None",
            type_name(obj)
        ))),
    }
}

impl JournalStore for PyJournal {
    fn get(&self, key: &str) -> Result<Option<Entry>> {
        self.call("get", |py| PyTuple::new(py, [key]), opt_entry)
    }

    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        let e = JournalEntry(entry.clone());
        self.call("claim", |py| PyTuple::new(py, [Py::new(py, e)?]), opt_entry)
    }

    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        let (o, n) = (JournalEntry(old.clone()), JournalEntry(new.clone()));
        self.call(
            "swap",
            |py| PyTuple::new(py, [Py::new(py, o)?, Py::new(py, n)?]),
            |v| v.is_truthy(),
        )
    }

    fn find(&self, result: &str) -> Result<Option<Entry>> {
        self.call("find", |py| PyTuple::new(py, [result]), opt_entry)
    }

    fn holders(&self) -> &dyn HolderCheck {
        &*self.holders
    }
}

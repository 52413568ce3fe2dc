//! `fxpay._fxpay._MemoryStore`: the core's `MemoryStore` held by `fxpay.MemoryJournal`. A
//! client given a `MemoryJournal` (of that class itself, not a subclass that overrides its
//! storage methods) uses the store directly: a keyed call never climbs into Python.
use super::entry::JournalEntry;
use fxpay_core::{JournalStore, MemoryStore};
use pyo3::prelude::*;
use std::sync::Arc;

/// A journal's storage in this process's memory (private: `fxpay.MemoryJournal` wraps it).
#[pyclass(module = "fxpay._fxpay", name = "_MemoryStore", frozen)]
pub struct PyMemoryStore(pub Arc<MemoryStore>);

fn out(e: Option<fxpay_core::Entry>) -> Option<JournalEntry> {
    e.map(JournalEntry)
}

#[pymethods]
impl PyMemoryStore {
    #[new]
    fn new() -> Self {
        PyMemoryStore(Arc::new(MemoryStore::default()))
    }

    fn get(&self, key: &str) -> Option<JournalEntry> {
        // A memory store never fails: its `Result`s are always `Ok`.
        out(self.0.get(key).unwrap_or_default())
    }

    fn claim(&self, entry: &JournalEntry) -> Option<JournalEntry> {
        out(self.0.claim(&entry.0).unwrap_or_default())
    }

    fn swap(&self, old: &JournalEntry, new: &JournalEntry) -> bool {
        self.0.swap(&old.0, &new.0).unwrap_or_default()
    }

    fn find(&self, result: &str) -> Option<JournalEntry> {
        out(self.0.find(result).unwrap_or_default())
    }

    /// Every entry, in the order their keys were first claimed.
    fn entries(&self) -> Vec<JournalEntry> {
        self.0
            .entries(None)
            .unwrap_or_default()
            .into_iter()
            .map(JournalEntry)
            .collect()
    }

    fn before_fork(&self) {
        self.0.before_fork();
    }

    fn after_fork_in_parent(&self) {
        self.0.after_fork_in_parent();
    }
}

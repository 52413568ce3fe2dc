//! A journal store kept in memory: `tests/journal_keyed_call.rs` uses it, and so do the journal's
//! unit tests (`src/journal/store.rs` compiles this file as its test module `memory`, where
//! `fxpay_core` names the crate itself), so it reaches the core by its front door only.
use fxpay_core::{Entry, HolderCheck, JournalStore, LocalProcesses, Result};
use std::collections::HashMap;
use std::sync::Mutex;

/// Entries by key, as their JSON text (as a real store keeps them).
#[derive(Default)]
pub(crate) struct MemoryJournalStore(Mutex<HashMap<String, String>>);

impl JournalStore for MemoryJournalStore {
    fn get(&self, key: &str) -> Result<Option<Entry>> {
        let map = self.0.lock().expect("lock");
        Ok(map.get(key).map(|t| Entry::from_json(t).expect("valid")))
    }
    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        let mut map = self.0.lock().expect("lock");
        match map.get(&entry.key) {
            Some(t) => Ok(Some(Entry::from_json(t).expect("valid"))),
            None => {
                map.insert(entry.key.clone(), entry.to_json());
                Ok(None)
            }
        }
    }
    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        let mut map = self.0.lock().expect("lock");
        if map.get(&old.key) != Some(&old.to_json()) {
            return Ok(false);
        }
        map.insert(old.key.clone(), new.to_json());
        Ok(true)
    }
    fn find(&self, result: &str) -> Result<Option<Entry>> {
        let map = self.0.lock().expect("lock");
        Ok(map
            .values()
            .map(|t| Entry::from_json(t).expect("valid"))
            .find(|e| e.result.as_deref() == Some(result)))
    }
    fn holders(&self) -> &dyn HolderCheck {
        &LocalProcesses
    }
}

//! What a journal's storage must do: keep entries by key, insert one only where none is,
//! and swap one for another only if the stored one is still the one read (compare-and-set).
//! Every decision is the state machine's (`machine.rs`); a store only keeps.
use super::entry::Entry;
use super::holder::HolderCheck;
use crate::error::{Error, Result};
use futures_util::future::BoxFuture;
use std::sync::Arc;

/// A journal's storage. Calls block (a disk or network round trip); the core makes them
/// off the runtime's workers. An error is `Error::Idempotency` of kind `Journal`: the call
/// fails closed, nothing is sent.
pub trait JournalStore: Send + Sync {
    /// The entry under `key`.
    fn get(&self, key: &str) -> Result<Option<Entry>>;
    /// Stores `entry` if nothing is stored under its key, atomically; returns `None` when
    /// stored, else what is stored.
    fn claim(&self, entry: &Entry) -> Result<Option<Entry>>;
    /// Replaces `old` by `new` (same key) if the stored entry is still `old`, atomically;
    /// true when replaced.
    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool>;
    /// The entry whose `result` is `result` (a spot deal's process id), if any.
    fn find(&self, result: &str) -> Result<Option<Entry>>;
    /// `claim`, waiting for its commit with no thread of its own (a store whose writes a
    /// leader commits for everyone waiting): the future answers as `claim` does. `None`:
    /// the store has no such claim, and `claim` runs on a thread of the blocking pool.
    /// `gathered`: whether a leader of the store's group commit waits for this call's next
    /// claim (false for a payout's row).
    fn claim_queued(
        &self,
        _entry: &Entry,
        _gathered: bool,
    ) -> Option<BoxFuture<'static, Result<Option<Entry>>>> {
        None
    }
    /// How to tell that a pending entry's holder is gone before its lease lapses.
    fn holders(&self) -> &dyn HolderCheck;
    /// Whether its calls answer at once (a store in this process's memory): the core then
    /// makes them where it runs, not on a thread of the blocking pool.
    fn answers_at_once(&self) -> bool {
        false
    }
    /// Takes the swap of `old` for `new` without a disk or network round trip if it can (a
    /// call's result kept for the store's next commit): `true` when taken, and then the
    /// core does not hand it to the blocking pool. `false`: call [`JournalStore::swap`].
    fn swap_at_once(&self, _old: &Entry, _new: &Entry) -> bool {
        false
    }
    /// Every entry that is `pending` or `unknown`, in the order their keys were claimed
    /// (what `unknown` sorts out). A store that cannot list says so.
    fn candidates(&self) -> Result<Vec<Entry>> {
        Err(Error::journal("this journal cannot list its entries"))
    }
    /// The entries of `keys` that exist, each as this process reads it (a payout's
    /// progress); with `None`, every entry in the order the keys were claimed (a store
    /// that cannot list says so).
    fn entries(&self, keys: Option<&[String]>) -> Result<Vec<Entry>> {
        match keys {
            Some(keys) => Ok(keys
                .iter()
                .map(|k| self.get(k))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .flatten()
                .collect()),
            None => Err(Error::journal("this journal cannot list its entries")),
        }
    }
    /// Makes the journal where its storage holds none (a shared journal's identity): true
    /// when made, false when it was there. A store made with its journal says so.
    fn create(&self) -> Result<bool> {
        Ok(false)
    }
    /// What this process's side of the store runs with, for tests and support (each
    /// store names its own), set first to `value` where the store allows it.
    fn diagnostic(&self, name: &str, _value: Option<i64>) -> Result<String> {
        Err(Error::InvalidRequest(format!(
            "this journal has no {name:?} to read"
        )))
    }
    /// Writes what waits for a later commit (a payout's end, the process's exit).
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    /// Writes what waits, then lets go of this process's connection (made again on next use).
    fn close(&self) -> Result<()> {
        self.flush()
    }
    /// Run by the thread about to fork (Python's `os.register_at_fork` hook): what a store
    /// keeps per process is made ready for the child.
    fn before_fork(&self) {}
    /// The parent, after the fork: gives back what `before_fork` held.
    fn after_fork_in_parent(&self) {}
}

/// Runs `f` on a store off the runtime's workers (a thread of the blocking pool), or here
/// for a store that answers at once.
pub(crate) async fn blocking<T, F>(store: &Arc<dyn JournalStore>, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&dyn JournalStore) -> Result<T> + Send + 'static,
{
    if store.answers_at_once() {
        return f(&**store);
    }
    let s = store.clone();
    match tokio::task::spawn_blocking(move || f(&*s)).await {
        Ok(r) => r,
        Err(e) => Err(Error::journal(format!("the journal call failed: {e}"))),
    }
}

/// A store kept in memory, for the journal's unit tests: the one `tests/journal_keyed_call.rs` uses.
#[cfg(test)]
#[path = "../../tests/support/memory_journal_store.rs"]
pub(crate) mod memory;

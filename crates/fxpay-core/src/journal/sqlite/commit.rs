//! Group commit: the writes of concurrent calls wait in a queue, and one of them (the leader)
//! commits them all in one transaction, so they share one fsync. A claim is still on disk
//! before its caller goes on.
use crate::error::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// One write statement.
pub(super) enum Op {
    /// Inserts the entry unless its key is stored.
    Claim {
        key: String,
        state: &'static str,
        result: Option<String>,
        text: String,
    },
    /// Replaces the entry stored as `old` (text).
    Swap {
        key: String,
        state: &'static str,
        result: Option<String>,
        text: String,
        old: String,
    },
    /// No statement: the commit carries the results waiting.
    Nothing,
}

/// A write waiting for its commit, and what came of it (its row count).
pub(super) struct Write {
    pub op: Op,
    outcome: Mutex<Option<std::result::Result<usize, String>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each value behind these locks is replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Write {
    pub(super) fn new(op: Op) -> Arc<Write> {
        Arc::new(Write {
            op,
            outcome: Mutex::new(None),
        })
    }

    /// Sets what came of it (the leader, once per write).
    pub(super) fn answer(&self, outcome: std::result::Result<usize, String>) {
        let mut o = lock(&self.outcome);
        if o.is_none() {
            *o = Some(outcome);
        }
    }

    fn done(&self) -> bool {
        lock(&self.outcome).is_some()
    }

    /// The row count, or the error that kept its commit from landing.
    pub(super) fn outcome(&self) -> Result<usize> {
        match &*lock(&self.outcome) {
            Some(Ok(n)) => Ok(*n),
            Some(Err(e)) => Err(Error::journal(e.clone())),
            None => Err(Error::journal("the journal's commit never ran")),
        }
    }
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Arc<Write>>,
    leading: bool,
}

/// One journal file's queue of writes, in this process.
#[derive(Default)]
pub(super) struct Group {
    queue: Mutex<Queue>,
    landed: Condvar,
}

/// Ends a leader's turn even if its commit panicked: every write of its batch answered,
/// the next leader free to start.
struct Turn<'a> {
    group: &'a Group,
    batch: Vec<Arc<Write>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        for w in &self.batch {
            w.answer(Err("the journal's commit failed".into()));
        }
        let mut q = lock(&self.group.queue);
        q.leading = false;
        drop(q);
        self.group.landed.notify_all();
    }
}

impl Group {
    /// Runs `op` in the next commit and returns its row count once that commit is on disk.
    /// The caller that finds no leader leads: `lead` commits the batch (every write waiting
    /// then, answered each), and what it returns comes back here with the row count, to be
    /// handled once the turn has ended.
    pub(super) fn write<R>(
        &self,
        op: Op,
        lead: impl FnOnce(&[Arc<Write>]) -> R,
    ) -> (Result<usize>, Option<R>) {
        let mine = Write::new(op);
        let mut q = lock(&self.queue);
        q.waiting.push(mine.clone());
        loop {
            if mine.done() {
                return (mine.outcome(), None);
            }
            if q.leading {
                q = self.landed.wait(q).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            q.leading = true;
            let batch = std::mem::take(&mut q.waiting);
            drop(q);
            let turn = Turn { group: self, batch };
            let led = lead(&turn.batch);
            drop(turn);
            return (mine.outcome(), Some(led));
        }
    }

    /// How many writes wait for the next commit.
    pub(super) fn waiting(&self) -> usize {
        lock(&self.queue).waiting.len()
    }
}

//! No thread is inside SQLite when the process forks: SQLite holds process-wide mutexes of
//! its own while it works (its allocator's, its file-lock table's), and a child forked while
//! a thread of the parent holds one would hang in its first SQLite call. Every SQLite call of
//! every journal of this process passes this gate; the forking thread holds it across the
//! fork (Python's `os.register_at_fork` hooks, through the journal's `_before_fork`). A child
//! starts with a gate of its own.
use crate::runtime::fork::PerProcess;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Gate {
    held: Mutex<bool>,
    free: Condvar,
}

static GATE: PerProcess<Gate> = PerProcess::empty();

fn gate() -> &'static Gate {
    GATE.get_or_make(Gate::default)
}

fn lock(m: &Mutex<bool>) -> MutexGuard<'_, bool> {
    // The flag is one bool, set and cleared whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Held while a thread is inside SQLite; released on drop.
pub(super) struct Inside(());

impl Drop for Inside {
    fn drop(&mut self) {
        release();
    }
}

/// Waits for the gate (no deadline: whoever holds it is inside one SQLite call, bounded by
/// the busy timeout, or forking).
pub(super) fn enter() -> Inside {
    let g = gate();
    let mut held = lock(&g.held);
    while *held {
        held = g.free.wait(held).unwrap_or_else(PoisonError::into_inner);
    }
    *held = true;
    Inside(())
}

fn release() {
    let g = gate();
    *lock(&g.held) = false;
    g.free.notify_one();
}

/// Holds the gate for a fork (the forking thread), waiting at most `most`: true when held
/// (then [`after_fork_in_parent`] releases it). A thread stuck inside SQLite longer is left
/// to it; the child never uses the parent's connections anyway.
pub(super) fn before_fork(most: Duration) -> bool {
    let g = gate();
    let until = Instant::now() + most;
    let mut held = lock(&g.held);
    while *held {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        held = g
            .free
            .wait_timeout(held, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    *held = true;
    true
}

/// Releases what [`before_fork`] held (the parent, after the fork).
pub(super) fn after_fork_in_parent() {
    release();
}

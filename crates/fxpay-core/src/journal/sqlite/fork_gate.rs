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
    held: Mutex<State>,
    free: Condvar,
}

#[derive(Default)]
struct State {
    /// A thread is inside SQLite, or the forking thread holds the gate.
    held: bool,
    /// The stores whose `before_fork` ran for the fork being made: every journal of the
    /// process has its own hook, and only the first waits (the others find it held, or
    /// given up on, by the same forking thread).
    forking: usize,
    /// Whether the first of them got the gate.
    fork_held: bool,
}

static GATE: PerProcess<Gate> = PerProcess::empty();

fn gate() -> &'static Gate {
    GATE.get_or_make(Gate::default)
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // Each field is set whole.
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
    let mut st = lock(&g.held);
    while st.held {
        st = g.free.wait(st).unwrap_or_else(PoisonError::into_inner);
    }
    st.held = true;
    Inside(())
}

fn release() {
    let g = gate();
    lock(&g.held).held = false;
    g.free.notify_one();
}

/// Holds the gate for a fork (the forking thread, once per journal: the first waits at most
/// `most`, the others of the same fork share what it got). True when counted: then
/// [`after_fork_in_parent`] is called once for it. A thread stuck inside SQLite longer is
/// left to it; the child never uses the parent's connections anyway.
pub(super) fn before_fork(most: Duration) -> bool {
    let g = gate();
    let until = Instant::now() + most;
    let mut st = lock(&g.held);
    st.forking += 1;
    if st.forking > 1 {
        return true;
    }
    while st.held {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true; // counted, not held
        }
        st = g
            .free
            .wait_timeout(st, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    st.held = true;
    st.fork_held = true;
    true
}

/// The parent, after the fork, once per counted [`before_fork`]: the last gives the gate back
/// if the first got it.
pub(super) fn after_fork_in_parent() {
    let g = gate();
    let mut st = lock(&g.held);
    st.forking = st.forking.saturating_sub(1);
    if st.forking == 0 && st.fork_held {
        st.fork_held = false;
        st.held = false;
        drop(st);
        g.free.notify_one();
    }
}

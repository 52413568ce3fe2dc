//! A gate that threads enter to use a resource and that one closer shuts for good, then waits
//! until every thread inside has left: from then on no thread is inside, and none enters.
//! The binding's exit gate (`crates/fxpay-python/src/exit_gate.rs`) is one: foreign threads
//! enter it to take the GIL, and an `atexit` hook closes it before the interpreter finalizes.
//!
//! The promise holds because `enter` counts itself in *before* it looks at `closed`, and
//! `close` sets `closed` *before* it reads the count: either the entering thread sees the
//! gate closed, or the closer sees it counted and waits for it. (Looked at first, `closed`
//! could be read open just before the closer shuts the gate and finds nobody counted yet:
//! the thread would then enter after the closer has moved on.) Both sides touch `closed`
//! with a read-modify-write, not a plain load and store: the two are then ordered in
//! `closed`'s modification order, and whichever comes second sees the first (a closer that
//! comes second synchronizes with the entering thread, so it sees its count). This does not
//! lean on sequentially consistent loads and stores (the store-buffer pattern), which loom
//! does not model: it models the read-modify-writes exactly.
//!
//! The atomics are loom's under the `loom` feature (`tests/gate_loom.rs`, `just loom`).
#[cfg(feature = "loom")]
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(feature = "loom"))]
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct Gate {
    closed: AtomicBool,
    inside: AtomicUsize,
}

/// A thread inside the gate; it leaves when this is dropped (also when it unwinds).
pub struct Inside<'a>(&'a Gate);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    /// An open gate, nobody inside.
    #[cfg(not(feature = "loom"))]
    pub const fn new() -> Self {
        Self {
            closed: AtomicBool::new(false),
            inside: AtomicUsize::new(0),
        }
    }

    /// Enters the gate; None when it is closed.
    pub fn enter(&self) -> Option<Inside<'_>> {
        self.inside.fetch_add(1, Ordering::SeqCst);
        let inside = Inside(self);
        if self.closed.fetch_or(false, Ordering::SeqCst) {
            return None;
        }
        Some(inside)
    }

    /// Closes the gate for good. Threads inside may still be there: see `is_empty`.
    pub fn close(&self) {
        self.closed.swap(true, Ordering::SeqCst);
    }

    /// Nobody is inside (after `close`: nobody ever will be again).
    pub fn is_empty(&self) -> bool {
        self.inside.load(Ordering::SeqCst) == 0
    }
}

#[cfg(not(feature = "loom"))]
impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

/// Under loom (whose atomics are not made in a `const fn`) the one way to make a gate:
/// `Gate::new` is declared once, for the binding's `static`.
#[cfg(feature = "loom")]
impl Default for Gate {
    fn default() -> Self {
        Self {
            closed: AtomicBool::new(false),
            inside: AtomicUsize::new(0),
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::Gate;

    #[test]
    fn a_closed_gate_lets_nobody_in_and_counts_who_is_inside() {
        let gate = Gate::new();
        let inside = gate.enter();
        assert!(inside.is_some());
        assert!(!gate.is_empty());
        gate.close();
        assert!(gate.enter().is_none());
        assert!(!gate.is_empty());
        drop(inside);
        assert!(gate.is_empty());
    }
}

//! The wake-up protocol of a queue that producers on any thread fill and one consumer drains
//! when woken (the binding's event-loop inbox: runtime threads queue finished calls, the
//! loop's thread resolves them). A wake-up costs a system call or a trip through the GIL, so
//! results that finish close together share one: only the push that finds no wake-up on its
//! way asks for one.
//!
//! The promise: an item pushed is taken by a drain that starts after the wake-up its push
//! asked for, or after one already on its way. Nothing is ever left in the queue with no
//! wake-up coming. It holds because the drain clears `signalled` *before* it takes the
//! queue: a push that lands after the take sees the flag clear and asks for a new wake-up.
//! (Cleared after the take, a push between the two would find the flag still set, ask for
//! nothing, and wait forever: a lost wake-up.)
//!
//! The primitives are loom's under the `loom` feature, so that `tests/wakeup_loom.rs` can
//! explore every interleaving of pushes and drains (`just loom`).
#[cfg(feature = "loom")]
use loom::sync::{
    atomic::{AtomicBool, Ordering},
    Mutex,
};
use std::sync::PoisonError;
#[cfg(not(feature = "loom"))]
use std::sync::{
    atomic::{AtomicBool, Ordering},
    Mutex,
};

/// A queue with a "wake-up on its way" flag.
pub struct Inbox<T> {
    queue: Mutex<Vec<T>>,
    /// A wake-up is on its way and the drain has not taken the queue yet.
    signalled: AtomicBool,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Inbox<T> {
    pub fn new() -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            signalled: AtomicBool::new(false),
        }
    }

    /// Queues `item`. True when the caller must wake the consumer: no wake-up was on its
    /// way. False when one is, and the drain it starts will take `item` too.
    #[must_use = "when push returns true, the consumer must be woken"]
    pub fn push(&self, item: T) -> bool {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(item);
        !self.signalled.swap(true, Ordering::SeqCst)
    }

    /// The consumer's drain: everything queued so far, in the order it was pushed. Call it
    /// once a wake-up has arrived (its byte read, its callback running).
    pub fn take(&self) -> Vec<T> {
        // Clear the flag before taking the queue: a result queued after the take then asks
        // for a new wake-up, so none is ever left waiting.
        self.signalled.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::Inbox;

    #[test]
    fn only_the_first_push_before_a_drain_asks_for_a_wake_up() {
        let inbox = Inbox::new();
        assert!(inbox.push(1));
        assert!(!inbox.push(2));
        assert_eq!(inbox.take(), vec![1, 2]);
        assert!(inbox.push(3));
        assert_eq!(inbox.take(), vec![3]);
        assert_eq!(inbox.take(), Vec::<i32>::new());
        assert!(inbox.push(4));
    }
}

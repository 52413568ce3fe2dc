//! The bridge's wake-up protocol (`fxpay_core::WakeupInbox`, src/wakeup.rs) under loom, which runs the model
//! below in every interleaving of its threads: no pushed item is ever left in the queue with
//! no wake-up coming. `just loom` runs it (`cargo test -p fxpay-core --features loom --test
//! wakeup_loom`); without the feature this file is not built.
//!
//! The model is the loop of `crates/fxpay-python/src/bridge.rs`: a runtime thread pushes a
//! finished call and, when `push` says so, writes one byte to the socket pair (here a
//! counter of unread bytes); the event loop, when a byte is readable, reads every byte and
//! then drains. A lost wake-up shows as an item still queued once the loop has nothing left
//! to read.
use fxpay_core::WakeupInbox as Inbox;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The loop's reader callback: reads every byte, then takes the queue. False when there was
/// no byte to read (the loop would not have called it).
fn drain(inbox: &Inbox<u32>, bytes: &AtomicUsize, got: &mut Vec<u32>) -> bool {
    if bytes.swap(0, Ordering::SeqCst) == 0 {
        return false;
    }
    got.extend(inbox.take());
    true
}

fn producer(inbox: &Inbox<u32>, bytes: &AtomicUsize, item: u32) {
    if inbox.push(item) {
        bytes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Two runtime threads that finish a call each (items 1 and 2), started now.
fn push_from_two_threads(
    inbox: &Arc<Inbox<u32>>,
    bytes: &Arc<AtomicUsize>,
) -> Vec<thread::JoinHandle<()>> {
    [1, 2]
        .into_iter()
        .map(|item| {
            let (inbox, bytes) = (inbox.clone(), bytes.clone());
            thread::spawn(move || producer(&inbox, &bytes, item))
        })
        .collect()
}

/// Two runtime threads finish a call each while the loop drains twice; then the loop runs
/// until nothing is readable. Every item must have been delivered, exactly once.
#[test]
fn no_wake_up_is_lost_between_two_pushes_and_a_drain() {
    loom::model(|| {
        let inbox = Arc::new(Inbox::new());
        let bytes = Arc::new(AtomicUsize::new(0));
        let pushers = push_from_two_threads(&inbox, &bytes);
        let mut got = Vec::new();
        // The loop's thread, concurrently with the pushes.
        for _ in 0..2 {
            drain(&inbox, &bytes, &mut got);
        }
        for p in pushers {
            p.join().expect("a producer panicked");
        }
        // The loop goes on for as long as a byte is readable.
        while drain(&inbox, &bytes, &mut got) {}
        got.sort_unstable();
        assert_eq!(
            got,
            vec![1, 2],
            "a pushed item was left with no wake-up coming"
        );
    });
}

/// Wake-ups are shared: two pushes before any drain, in either order, ask for one wake-up
/// (one byte), and its drain takes both.
#[test]
fn two_pushes_before_a_drain_share_one_wake_up() {
    loom::model(|| {
        let inbox = Arc::new(Inbox::new());
        let bytes = Arc::new(AtomicUsize::new(0));
        let pushers = push_from_two_threads(&inbox, &bytes);
        for p in pushers {
            p.join().expect("a producer panicked");
        }
        assert_eq!(
            bytes.load(Ordering::SeqCst),
            1,
            "two pushes before any drain share one wake-up"
        );
        let mut got = Vec::new();
        while drain(&inbox, &bytes, &mut got) {}
        got.sort_unstable();
        assert_eq!(got, vec![1, 2]);
    });
}

//! The journal's work that outlives its call: a claim undone, a result recorded again once
//! the journal answers, a cancelled call's key marked unknown, and the keyed calls still in
//! flight (a payout's rows run as tasks of their own). Each is counted while it runs, so that
//! a process that ends normally can wait for them ([`drain`], bounded) rather than leave its
//! keys `pending` for the next run to find `unknown`.
//!
//! The count belongs to the process that made it: a forked child starts from none (its
//! parent's threads and tasks do not exist in it).
use crate::error::Result;
use crate::runtime::fork::generation;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a failed background write is tried again, waiting for the journal to come back.
const RETRY_FOR: Duration = Duration::from_secs(600);
/// The longest wait between two tries.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

static COUNT: AtomicUsize = AtomicUsize::new(0);
/// The process generation `COUNT` counts for.
static COUNT_OF: AtomicU64 = AtomicU64::new(0);

/// One piece of journal work in flight, counted until it is dropped.
pub(crate) struct Busy(u64);

/// Counts one piece of work in flight.
pub(crate) fn busy() -> Busy {
    let g = generation();
    if COUNT_OF.load(Ordering::Acquire) != g {
        // The first work of a forked child: its parent's count is not its own.
        COUNT.store(0, Ordering::Release);
        COUNT_OF.store(g, Ordering::Release);
    }
    COUNT.fetch_add(1, Ordering::AcqRel);
    Busy(g)
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0 == generation() {
            COUNT.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Runs `f` on a thread of its own (`name`), counted while it runs.
pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    let work = busy();
    let _ = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _work = work;
            f();
        });
}

/// Calls `f` until it succeeds, backing off while the journal fails, for up to
/// [`RETRY_FOR`].
pub(crate) fn retry(mut f: impl FnMut() -> Result<()>) {
    let until = Instant::now() + RETRY_FOR;
    let mut wait = Duration::from_millis(50);
    while f().is_err() && Instant::now() < until {
        std::thread::sleep(wait);
        wait = (wait * 2).min(BACKOFF_MAX);
    }
}

/// Journal work in flight in this process.
pub(crate) fn in_flight() -> usize {
    if COUNT_OF.load(Ordering::Acquire) != generation() {
        return 0;
    }
    COUNT.load(Ordering::Acquire)
}

/// Waits up to `wait` for the journal work in flight to end (a process ending normally
/// calls it): the number still in flight when it returns.
pub fn drain(wait: Duration) -> usize {
    let until = Instant::now() + wait;
    loop {
        let left = in_flight();
        if left == 0 || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_counted_until_it_ends_and_drain_waits_for_it() {
        // Other tests of this process may have work in flight too: only what this one holds
        // is known.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        spawn("test-work", move || {
            let _ = rx.recv_timeout(Duration::from_secs(30));
        });
        assert!(in_flight() >= 1);
        assert!(
            drain(Duration::from_millis(20)) >= 1,
            "drain returns while work is held"
        );
        tx.send(()).expect("the thread waits");
        assert_eq!(drain(Duration::from_secs(20)), 0);
    }
}

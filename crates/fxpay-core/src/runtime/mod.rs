//! The process-wide tokio runtime that serves every client, session and sandbox: started on
//! first use, and started anew in a forked child (whose copy of the parent's runtime has no
//! threads, and shares its epoll instance with the parent: it is forgotten, never used).
//!
//! Every call, blocking or awaited, runs on it: a blocking call's caller polls the call's
//! future itself (`Runtime::block_on`) while the workers drive the sockets and timers; an
//! awaited call is a task of the workers. Beside it: [`fork`], which tells a forked child
//! from the process that made something.
pub(crate) mod fork;

use crate::runtime::fork::ProcessBound;
use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, Ordering};
use tokio::runtime::Runtime;

/// The runtime of the current process generation. Every pointer stored here comes from
/// `Box::into_raw` and is never freed once stored: a runtime lives as long as its process,
/// and one inherited through a fork must not be dropped.
static SHARED: AtomicPtr<ProcessBound<Runtime>> = AtomicPtr::new(std::ptr::null_mut());

/// The shared multi-threaded runtime of this process, started on first use.
pub fn runtime() -> &'static Runtime {
    let seen = SHARED.load(Ordering::Acquire);
    // SAFETY: a non-null pointer in SHARED is a leaked box that is never freed.
    match unsafe { seen.as_ref() } {
        Some(rt) if rt.is_current() => rt,
        _ => start(seen),
    }
}

#[cold]
fn start(seen: *mut ProcessBound<Runtime>) -> &'static Runtime {
    let fresh = Box::into_raw(Box::new(ProcessBound::new(build())));
    match SHARED.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
        // The runtime `seen` (if any) belonged to the parent: it stays where it is, unused.
        // SAFETY: `fresh` is now stored in SHARED and never freed.
        Ok(_) => unsafe { &*fresh },
        Err(_) => {
            // Another thread started one first: use it, and stop ours (no task ever ran on
            // it; `shutdown_background` may be called from inside a runtime, unlike drop).
            // SAFETY: `fresh` was never shared, so this is its only owner.
            let ours = unsafe { Box::from_raw(fresh) };
            ours.into_inner().shutdown_background();
            runtime()
        }
    }
}

fn build() -> Runtime {
    let workers = worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()));
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("fxpay-rt")
        // Blocking-pool threads (DNS lookups, token-store calls) go away soon after a burst.
        .thread_keep_alive(std::time::Duration::from_secs(2))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        // Without a runtime nothing can work; there is no caller to hand an error to.
        Err(e) => panic!("fxpay could not start its tokio runtime: {e}"),
    }
}

/// Runtime workers for a machine with `cores` cores: half of them, 1 to 8. The runtime only
/// moves bytes and parses answers; the other half is left to the Python threads that make
/// the calls (and convert their results), which need a core as much. Each extra worker that
/// has nothing to do still gets woken to look for work, which on a small machine costs more
/// than it brings: on 2 cores one worker halves the context switches of a blocking call.
pub fn worker_threads(cores: usize) -> usize {
    (cores / 2).clamp(1, 8)
}

thread_local! {
    /// Set while this thread polls a blocking call's future ([`Blocking`]).
    static BLOCKING: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread polls a blocking call's future itself (`Runtime::block_on`, with
/// the GIL released, in the binding): a call's hooks that run there keep their Python work
/// for the wait's end, or run it inline, instead of handing it to another thread.
pub fn blocking_here() -> bool {
    BLOCKING.try_with(Cell::get).unwrap_or(false)
}

/// Marks this thread as polling a blocking call until dropped, and puts back what it was (a
/// call nested in a hook's code waits inside the outer one's wait).
pub struct Blocking(bool);

impl Blocking {
    pub fn enter() -> Self {
        Blocking(BLOCKING.with(|b| b.replace(true)))
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        let _ = BLOCKING.try_with(|b| b.set(self.0));
    }
}

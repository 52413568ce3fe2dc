//! Tells a forked child from the process that made something.
//!
//! A process-wide generation number goes up in the child after every `fork` (a
//! `pthread_atfork` hook). Whatever holds threads or sockets (runtimes, connection pools, the
//! asyncio bridge's socket pair) is kept in a [`ProcessBound`], which records the generation
//! it was made in. In a later generation (a forked child) such a value is stale: the child
//! makes a new one, and the stale one is forgotten, never dropped, because dropping it would
//! close or deregister sockets whose other copies (and epoll instances) the parent still uses.
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

#[cfg(unix)]
extern "C" fn in_child() {
    // Async-signal-safe: one atomic add.
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Installs the fork hook, once per process. Called when the module is imported (while one
/// thread holds the GIL) and again whenever the generation is read.
pub fn watch() {
    #[cfg(unix)]
    {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            // SAFETY: `in_child` only does an atomic add, which is allowed in a child
            // between `fork` and `exec`; the hook is registered once and never removed
            // (the library is never unloaded).
            let _ = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        });
    }
}

/// The current generation: 0 in the process that loaded fxpay, one more in a child after
/// every fork.
pub fn generation() -> u64 {
    watch();
    GENERATION.load(Ordering::Acquire)
}

/// A value that belongs to the process (generation) that made it. Dropped normally in that
/// process; in a forked child it is forgotten, so the child never closes, deregisters or
/// shuts down anything of the parent's.
pub struct ProcessBound<T> {
    generation: u64,
    value: ManuallyDrop<T>,
}

impl<T> ProcessBound<T> {
    pub fn new(value: T) -> Self {
        ProcessBound {
            generation: generation(),
            value: ManuallyDrop::new(value),
        }
    }

    /// Whether this value was made in this process (not inherited through a fork).
    pub fn is_current(&self) -> bool {
        self.generation == generation()
    }

    /// The value itself, for a caller that will dispose of it (only ever call in the
    /// process that made it).
    pub fn into_inner(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the value is moved out once.
        unsafe { ManuallyDrop::take(&mut this.value) }
    }
}

impl<T> Deref for ProcessBound<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for ProcessBound<T> {
    fn drop(&mut self) {
        if self.is_current() {
            // SAFETY: `drop` runs once and the value is not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
        // Otherwise the value came from the parent through a fork: forgotten on purpose.
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_current_value_is_dropped() {
        let drops = Arc::new(AtomicUsize::new(0));
        let v = ProcessBound::new(Counted(drops.clone()));
        assert!(v.is_current());
        drop(v);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_value_from_an_earlier_generation_is_forgotten() {
        let drops = Arc::new(AtomicUsize::new(0));
        let v = ProcessBound {
            generation: generation().wrapping_sub(1),
            value: ManuallyDrop::new(Counted(drops.clone())),
        };
        assert!(!v.is_current());
        drop(v);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
    }
}

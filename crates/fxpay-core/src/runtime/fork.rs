//! Tells a forked child from the process that made something.
//!
//! A process-wide generation number goes up in the child after every `fork` (a
//! `pthread_atfork` hook). Whatever holds threads or sockets (runtimes, connection pools, the
//! asyncio bridge's socket pair) is kept in a [`ProcessBound`], which records the generation
//! it was made in. In a later generation (a forked child) such a value is stale: the child
//! makes a new one, and the stale one is forgotten, never dropped, because dropping it would
//! close or deregister sockets whose other copies (and epoll instances) the parent still uses.
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

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
pub(crate) fn generation() -> u64 {
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
    pub(crate) fn into_inner(self) -> T {
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

impl<T> std::ops::DerefMut for ProcessBound<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
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

/// A value made on first use in each process: a forked child makes its own on its first
/// `get`, and the parent's copy stays allocated and untouched (never dropped), so references
/// to it stay valid. For anything a child cannot take over from its parent: connection
/// pools, and locks that a task of the parent may hold at the fork.
pub struct PerProcess<T> {
    /// Null, or a pointer from `Box::into_raw`. It is replaced only when stale (a forked
    /// child), and a replaced box is never freed; the current one is freed on drop.
    ptr: AtomicPtr<ProcessBound<T>>,
    /// Shared between threads like a `OnceLock<T>`: made on one thread, used and dropped on
    /// others.
    _owns: PhantomData<std::sync::OnceLock<T>>,
}

impl<T> PerProcess<T> {
    /// Nothing made yet.
    pub const fn empty() -> Self {
        PerProcess {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Made already, in this process.
    pub(crate) fn new(value: T) -> Self {
        PerProcess {
            ptr: AtomicPtr::new(Box::into_raw(Box::new(ProcessBound::new(value)))),
            _owns: PhantomData,
        }
    }

    /// This process's value, made by `make` if there is none yet.
    pub fn get_or_make(&self, make: impl FnOnce() -> T) -> &T {
        match self.get_or_try_make(|| Ok::<T, std::convert::Infallible>(make())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// This process's value, made by `make` if there is none yet; `make`'s error otherwise.
    pub fn get_or_try_make<E>(&self, make: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let mut seen = self.ptr.load(Ordering::Acquire);
        if let Some(current) = self.current(seen) {
            return Ok(current);
        }
        let fresh = Box::into_raw(Box::new(ProcessBound::new(make()?)));
        loop {
            match self
                .ptr
                .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // `seen` (the parent's, if any) stays allocated and untouched.
                // SAFETY: `fresh` is stored now, and freed only by `drop`.
                Ok(_) => return Ok(unsafe { &*fresh }),
                Err(now) => {
                    if let Some(current) = self.current(now) {
                        // Another thread of this process stored one first: use it.
                        // SAFETY: `fresh` was never shared, so this is its only owner.
                        drop(unsafe { Box::from_raw(fresh) });
                        return Ok(current);
                    }
                    seen = now;
                }
            }
        }
    }

    /// The value behind `ptr` (loaded from `self.ptr`) if it belongs to this process.
    fn current(&self, ptr: *mut ProcessBound<T>) -> Option<&T> {
        // SAFETY: a non-null pointer loaded from `self.ptr` is a live box: the current one
        // is freed only by `drop` (which needs `&mut self`), and a replaced one never.
        unsafe { ptr.as_ref() }
            .filter(|v| v.is_current())
            .map(|v| &**v)
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let ptr = *self.ptr.get_mut();
        if !ptr.is_null() {
            // SAFETY: the pointer came from `Box::into_raw` and nothing can use it any
            // more. Its contents are dropped only if they belong to this process.
            drop(unsafe { Box::from_raw(ptr) });
        }
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
    fn per_process_values_are_made_once_and_dropped_with_the_holder() {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = AtomicUsize::new(0);
        let holder = PerProcess::empty();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let _ = holder.get_or_make(|| {
                        made.fetch_add(1, Ordering::SeqCst);
                        Counted(drops.clone())
                    });
                });
            }
        });
        let first = made.load(Ordering::SeqCst);
        assert!(first >= 1);
        // Losers of a race were dropped at once; the stored one lives on.
        assert_eq!(drops.load(Ordering::SeqCst), first - 1);
        let again: Result<&Counted, ()> = holder.get_or_try_make(|| Err(()));
        assert!(again.is_ok(), "made already");
        drop(holder);
        assert_eq!(drops.load(Ordering::SeqCst), first);
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

    #[test]
    fn a_forked_child_makes_its_own_value_and_forgets_the_parents() {
        let drops = Arc::new(AtomicUsize::new(0));
        let holder = PerProcess::new(Counted(drops.clone()));
        let parents: *const Counted = holder.get_or_make(|| Counted(drops.clone()));
        // SAFETY: the child only runs the code below and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = {
                let mine: *const Counted = holder.get_or_make(|| Counted(drops.clone()));
                let parent_left_alone = drops.load(Ordering::SeqCst) == 0;
                drop(holder); // drops the child's value only
                mine != parents && parent_left_alone && drops.load(Ordering::SeqCst) == 1
            };
            // SAFETY: ends the child without running the test harness's exit code.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child: {status}"
        );
        assert_eq!(
            holder.get_or_make(|| Counted(drops.clone())) as *const _,
            parents
        );
    }
}

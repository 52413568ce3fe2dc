//! Where tokens live beyond one `Client`: a store shared by several clients or processes.
use crate::error::Result;
use crate::models::Token;
use futures_util::future::BoxFuture;

/// A place tokens are loaded from and saved to, under a key naming the service, the client
/// and the grant. `lock` serialises renewals across processes; stores that live in one
/// process may keep the default, which takes no lock.
pub trait TokenStore: Send + Sync {
    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Token>>>;
    fn save<'a>(&'a self, key: &'a str, token: &'a Token) -> BoxFuture<'a, Result<()>>;
    /// Takes a lock named `key` across every user of the store and returns a guard that
    /// releases it when `unlock` is called.
    fn lock<'a>(&'a self, _key: &'a str) -> BoxFuture<'a, Result<Option<StoreLock>>> {
        Box::pin(async { Ok(None) })
    }
}

/// Gives a held lock back.
pub(crate) type Release = Box<dyn FnOnce() -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// A held cross-process lock; `unlock` gives it back. A lock dropped without `unlock` (the
/// call holding it was cancelled or interrupted) is given back from the shared runtime, so an
/// abandoned call never leaves the store locked.
pub struct StoreLock {
    release: Option<Release>,
}

impl StoreLock {
    pub fn new(release: Release) -> Self {
        StoreLock {
            release: Some(release),
        }
    }

    pub(crate) async fn unlock(mut self) -> Result<()> {
        match self.release.take() {
            Some(release) => release().await,
            None => Ok(()),
        }
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            crate::runtime::runtime().spawn(async move {
                // Nobody is left to report a failure to; the store logs its own.
                let _ = release().await;
            });
        }
    }
}

/// A store's lock on one key, taken for a renewal: held, or none because the store takes no
/// lock. The one way fxpay takes, uses and gives back a store's lock.
pub(crate) struct KeyLock(Option<StoreLock>);

impl KeyLock {
    /// Takes `store`'s lock on `key`. `None` when the store failed: the caller renews on its
    /// own and leaves the store alone this time (the store reports its failure).
    pub(crate) async fn take(store: &dyn TokenStore, key: &str) -> Option<KeyLock> {
        store.lock(key).await.ok().map(KeyLock)
    }

    /// Whether other users of the store are kept out (false for a store without locks).
    pub(crate) fn is_held(&self) -> bool {
        self.0.is_some()
    }

    /// Gives the lock back. Nobody is left to report a failure to; the store logs its own.
    pub(crate) async fn release(self) {
        if let Some(lock) = self.0 {
            let _ = lock.unlock().await;
        }
    }

    /// Saves `token`, if there is one, then gives the lock back. A failed save leaves the
    /// store behind; the next renewal writes again.
    pub(crate) async fn save_and_release(
        self,
        store: &dyn TokenStore,
        key: &str,
        token: Option<&Token>,
    ) {
        if let Some(token) = token {
            let _ = store.save(key, token).await;
        }
        self.release().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use std::sync::{Arc, Mutex};
    use std::thread::ThreadId;

    /// A store whose lock is a real mutex, and which notes the thread each release ran on.
    #[derive(Default)]
    struct LockingStore {
        mutex: Arc<tokio::sync::Mutex<()>>,
        released_on: Arc<Mutex<Vec<ThreadId>>>,
    }

    impl TokenStore for LockingStore {
        fn load<'a>(&'a self, _key: &'a str) -> BoxFuture<'a, Result<Option<Token>>> {
            Box::pin(async { Ok(None) })
        }

        fn save<'a>(&'a self, _key: &'a str, _token: &'a Token) -> BoxFuture<'a, Result<()>> {
            Box::pin(async { Ok(()) })
        }

        fn lock<'a>(&'a self, _key: &'a str) -> BoxFuture<'a, Result<Option<StoreLock>>> {
            let (mutex, released_on) = (self.mutex.clone(), self.released_on.clone());
            Box::pin(async move {
                let guard = mutex.lock_owned().await;
                Ok(Some(StoreLock::new(Box::new(move || {
                    Box::pin(async move {
                        if let Ok(mut v) = released_on.lock() {
                            v.push(std::thread::current().id());
                        }
                        drop(guard);
                        Ok(())
                    })
                }))))
            })
        }
    }

    impl LockingStore {
        /// Whether a second locker would get in right now.
        fn free(&self) -> bool {
            matches!(self.lock("k").now_or_never(), Some(Ok(Some(_))))
        }

        fn released_on(&self) -> Vec<ThreadId> {
            self.released_on
                .lock()
                .map(|v| v.clone())
                .unwrap_or_default()
        }
    }

    /// A store that takes no lock (the trait's default).
    struct NoLockStore;

    impl TokenStore for NoLockStore {
        fn load<'a>(&'a self, _key: &'a str) -> BoxFuture<'a, Result<Option<Token>>> {
            Box::pin(async { Ok(None) })
        }

        fn save<'a>(&'a self, _key: &'a str, _token: &'a Token) -> BoxFuture<'a, Result<()>> {
            Box::pin(async { Ok(()) })
        }
    }

    // The tests run on a current-thread runtime: a release that ran on this thread ran
    // inside the call, one that ran elsewhere was left to the shared runtime.

    #[tokio::test]
    async fn unlock_gives_the_lock_back_before_it_returns() {
        let store = LockingStore::default();
        let held = store.lock("k").await.expect("lock").expect("a held lock");
        assert!(
            !store.free(),
            "a second locker is kept out while the lock is held"
        );
        held.unlock().await.expect("unlock");
        assert_eq!(store.released_on(), vec![std::thread::current().id()]);
        assert!(store.free(), "a second locker gets in once unlock returned");
    }

    #[tokio::test]
    async fn a_lock_dropped_without_unlock_is_given_back() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let lock = StoreLock::new(Box::new(move || {
            Box::pin(async move {
                let _ = tx.send(());
                Ok(())
            })
        }));
        drop(lock);
        // A release that is never called drops `tx` unsent, and `rx` fails.
        assert!(rx.await.is_ok(), "the dropped lock's release ran");
    }

    #[tokio::test]
    async fn a_key_lock_is_held_only_when_the_store_locks() {
        let none = KeyLock::take(&NoLockStore, "k").await.expect("no failure");
        assert!(!none.is_held());
        none.release().await;
        let store = LockingStore::default();
        let held = KeyLock::take(&store, "k").await.expect("no failure");
        assert!(held.is_held());
        assert!(!store.free());
        held.release().await;
        assert_eq!(store.released_on(), vec![std::thread::current().id()]);
        assert!(store.free());
    }
}

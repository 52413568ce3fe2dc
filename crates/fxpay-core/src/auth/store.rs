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
pub type Release = Box<dyn FnOnce() -> BoxFuture<'static, Result<()>> + Send + Sync>;

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

    pub async fn unlock(mut self) -> Result<()> {
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
pub struct KeyLock(Option<StoreLock>);

impl KeyLock {
    /// Takes `store`'s lock on `key`. `None` when the store failed: the caller renews on its
    /// own and leaves the store alone this time (the store reports its failure).
    pub async fn take(store: &dyn TokenStore, key: &str) -> Option<KeyLock> {
        store.lock(key).await.ok().map(KeyLock)
    }

    /// Whether other users of the store are kept out (false for a store without locks).
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }

    /// Gives the lock back. Nobody is left to report a failure to; the store logs its own.
    pub async fn release(self) {
        if let Some(lock) = self.0 {
            let _ = lock.unlock().await;
        }
    }

    /// Saves `token`, if there is one, then gives the lock back. A failed save leaves the
    /// store behind; the next renewal writes again.
    pub async fn save_and_release(self, store: &dyn TokenStore, key: &str, token: Option<&Token>) {
        if let Some(token) = token {
            let _ = store.save(key, token).await;
        }
        self.release().await;
    }
}

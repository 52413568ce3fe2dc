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

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

/// A held cross-process lock; `release` gives it back.
pub struct StoreLock {
    pub release: Box<dyn FnOnce() -> BoxFuture<'static, Result<()>> + Send + Sync>,
}

impl StoreLock {
    pub async fn unlock(self) -> Result<()> {
        (self.release)().await
    }
}

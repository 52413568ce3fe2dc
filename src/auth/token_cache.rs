//! A cached token with single-flight renewal: however many threads and tasks ask at once,
//! one of them fetches and the others wait for its result.
use super::store::TokenStore;
use crate::error::Result;
use crate::models::token::unix_now;
use crate::models::Token;
use std::future::Future;
use std::sync::{Arc, RwLock};

pub struct TokenCache {
    key: String,
    current: RwLock<Option<Arc<Token>>>,
    /// Per process: in a forked child, a task of the parent may hold the parent's lock.
    renewing: crate::fork::PerProcess<tokio::sync::Mutex<()>>,
    store: Option<Arc<dyn TokenStore>>,
}

impl TokenCache {
    pub fn new(key: String, store: Option<Arc<dyn TokenStore>>) -> Self {
        TokenCache {
            key,
            current: RwLock::new(None),
            renewing: crate::fork::PerProcess::empty(),
            store,
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The cached token while it is fresh.
    pub fn cached(&self) -> Option<Arc<Token>> {
        let guard = self.current.read().ok()?;
        let t = guard.as_ref()?;
        t.fresh_at(unix_now(), t.renew_margin()).then(|| t.clone())
    }

    fn set(&self, token: Arc<Token>) {
        if let Ok(mut g) = self.current.write() {
            *g = Some(token);
        }
    }

    /// A fresh token: the cached one, or one renewed by `fetch` (once for all waiters).
    pub async fn get<F, Fut>(&self, fetch: F) -> Result<Arc<Token>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        if let Some(t) = self.cached() {
            return Ok(t);
        }
        self.renew(None, fetch).await
    }

    /// A token other than `rejected`, which the service refused with 401.
    pub async fn renew_after_reject<F, Fut>(&self, rejected: &str, fetch: F) -> Result<Arc<Token>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        self.renew(Some(rejected), fetch).await
    }

    async fn renew<F, Fut>(&self, rejected: Option<&str>, fetch: F) -> Result<Arc<Token>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        let _single_flight = self.renewing.get_or_make(Default::default).lock().await;
        let usable = |t: &Token| {
            t.fresh_at(unix_now(), t.renew_margin()) && Some(t.access_token.as_str()) != rejected
        };
        if let Some(t) = self.current.read().ok().and_then(|g| g.clone()) {
            if usable(&t) {
                return Ok(t);
            }
        }
        let Some(store) = &self.store else {
            let t = Arc::new(fetch().await?);
            self.set(t.clone());
            return Ok(t);
        };
        if let Some(t) = store.load(&self.key).await? {
            if usable(&t) {
                let t = Arc::new(t);
                self.set(t.clone());
                return Ok(t);
            }
        }
        // Another process may be renewing: take the store's lock and look again.
        let lock = store.lock(&self.key).await?;
        let outcome = async {
            if lock.is_some() {
                if let Some(t) = store.load(&self.key).await? {
                    if usable(&t) {
                        return Ok(t);
                    }
                }
            }
            let t = fetch().await?;
            store.save(&self.key, &t).await?;
            Ok(t)
        }
        .await;
        if let Some(l) = lock {
            l.unlock().await?;
        }
        let t = Arc::new(outcome?);
        self.set(t.clone());
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn token(name: &str) -> Token {
        Token {
            access_token: name.into(),
            token_type: "Bearer".into(),
            expires_in: 3599,
            expires_at: unix_now() + 3599.0,
            refresh_token: None,
            scope: Some("payments".into()),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn many_waiters_one_fetch() {
        let cache = Arc::new(TokenCache::new("k".into(), None));
        let fetches = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get(|| async {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        Ok(token("t1"))
                    })
                    .await
                    .map(|t| t.access_token.clone())
            }));
        }
        for t in tasks {
            assert_eq!(t.await.ok().and_then(|r| r.ok()).as_deref(), Some("t1"));
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_rejected_token_is_replaced_once() {
        let cache = TokenCache::new("k".into(), None);
        let first = cache
            .get(|| async { Ok(token("t1")) })
            .await
            .map(|t| t.access_token.clone());
        assert_eq!(first.ok().as_deref(), Some("t1"));
        let second = cache
            .renew_after_reject("t1", || async { Ok(token("t2")) })
            .await
            .map(|t| t.access_token.clone());
        assert_eq!(second.ok().as_deref(), Some("t2"));
        // A late waiter that also saw t1 rejected gets t2 without another fetch.
        let third = cache
            .renew_after_reject("t1", || async { Ok(token("t3")) })
            .await
            .map(|t| t.access_token.clone());
        assert_eq!(third.ok().as_deref(), Some("t2"));
    }
}

//! A cached token with single-flight renewal: however many threads and tasks ask at once,
//! one of them fetches and the others wait for its result.
use super::store::{KeyLock, TokenStore};
use crate::error::Result;
use crate::models::token::unix_now;
use crate::models::Token;
use arc_swap::ArcSwapOption;
use std::future::Future;
use std::sync::Arc;

pub(crate) struct TokenCache {
    key: String,
    /// Read on every call and swapped on renewal, with no lock: a lock that another thread
    /// held (even to read) when the process forked would stay held in the child, whose next
    /// renewal would then wait for ever.
    current: ArcSwapOption<Token>,
    /// Per process: in a forked child, a task of the parent may hold the parent's lock.
    renewing: crate::runtime::fork::PerProcess<tokio::sync::Mutex<()>>,
    store: Option<Arc<dyn TokenStore>>,
}

impl TokenCache {
    pub(crate) fn new(key: String, store: Option<Arc<dyn TokenStore>>) -> Self {
        TokenCache {
            key,
            current: ArcSwapOption::empty(),
            renewing: crate::runtime::fork::PerProcess::empty(),
            store,
        }
    }

    /// The cached token while it is fresh.
    pub(crate) fn cached(&self) -> Option<Arc<Token>> {
        let t = self.current.load_full()?;
        t.fresh_at(unix_now(), t.renew_margin()).then_some(t)
    }

    fn set(&self, token: Arc<Token>) {
        self.current.store(Some(token));
    }

    /// A fresh token: the cached one, or one renewed by `fetch` (once for all waiters).
    pub(crate) async fn get<F, Fut>(&self, fetch: F) -> Result<Arc<Token>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        if let Some(t) = self.cached() {
            return Ok(t);
        }
        // Boxed: a renewal holds a token request with its retries (kilobytes), and inline it
        // would make every call's future that large, though few calls renew
        // (tests/future_sizes.rs).
        Box::pin(self.renew(None, fetch)).await
    }

    /// A token other than `rejected`, which the service refused with 401.
    pub(crate) async fn renew_after_reject<F, Fut>(
        &self,
        rejected: &str,
        fetch: F,
    ) -> Result<Arc<Token>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        Box::pin(self.renew(Some(rejected), fetch)).await
    }

    async fn renew<F, Fut>(&self, rejected: Option<&str>, fetch: F) -> Result<Arc<Token>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        // A call with a deadline waits for another call's token request only until its own
        // deadline: the request it waits on is bounded by the other call's.
        let lock = self.renewing.get_or_make(Default::default).lock();
        let _single_flight = match crate::deadline::ends_at() {
            Some(end) => tokio::time::timeout_at(end.into(), lock)
                .await
                .map_err(|_| {
                    crate::deadline::passed_while(
                        "while it waited for a token request another call started",
                        true,
                    )
                })?,
            None => lock.await,
        };
        let usable = |t: &Token| {
            t.fresh_at(unix_now(), t.renew_margin()) && Some(t.access_token.as_str()) != rejected
        };
        let held = self.current.load_full();
        if let Some(t) = &held {
            if usable(t) {
                return Ok(t.clone());
            }
        }
        let Some(store) = &self.store else {
            let t = Arc::new(fetch().await?);
            self.set(t.clone());
            return Ok(t);
        };
        // A store that fails (Redis down) is passed over: the client renews on its own and
        // keeps serving, and tries the store again at the next renewal. The store reports
        // its failures; here they only decide the way.
        // A stored token counts only if it is newer than the one held: an older one (restored
        // by the store after an outage, say) was replaced for a reason, and replaying it
        // into a call could only fail it.
        let stored_usable =
            |t: &Token| usable(t) && held.as_ref().is_none_or(|h| t.expires_at > h.expires_at);
        let t = match Self::renew_through(store.as_ref(), &self.key, &stored_usable, fetch).await {
            Shared::Found(t) | Shared::Fetched(Ok(t)) => t,
            Shared::Fetched(Err(e)) => return Err(e),
        };
        let t = Arc::new(t);
        self.set(t.clone());
        Ok(t)
    }

    /// Finds a usable token in `store`, or fetches one under the store's lock and saves it.
    async fn renew_through<F, Fut>(
        store: &dyn TokenStore,
        key: &str,
        usable: &(dyn Fn(&Token) -> bool + Sync),
        fetch: F,
    ) -> Shared
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Token>>,
    {
        match store.load(key).await {
            Ok(Some(t)) if usable(&t) => return Shared::Found(t),
            Ok(_) => {}
            Err(_) => return Shared::Fetched(fetch().await),
        }
        // Another process may be renewing: take the store's lock and look again.
        let Some(lock) = KeyLock::take(store, key).await else {
            return Shared::Fetched(fetch().await);
        };
        if lock.is_held() {
            if let Ok(Some(t)) = store.load(key).await {
                if usable(&t) {
                    lock.release().await;
                    return Shared::Found(t);
                }
            }
        }
        let fetched = fetch().await;
        lock.save_and_release(store, key, fetched.as_ref().ok())
            .await;
        Shared::Fetched(fetched)
    }
}

/// How a renewal through a store ended.
enum Shared {
    /// Another user of the store renewed already.
    Found(Token),
    /// This client asked the token endpoint.
    Fetched(Result<Token>),
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

    /// A store in memory whose `load` can be made to fail.
    #[derive(Default)]
    struct TestStore {
        tokens: std::sync::Mutex<std::collections::HashMap<String, Token>>,
        down: std::sync::atomic::AtomicBool,
    }

    impl TokenStore for TestStore {
        fn load<'a>(
            &'a self,
            key: &'a str,
        ) -> futures_util::future::BoxFuture<'a, Result<Option<Token>>> {
            Box::pin(async move {
                if self.down.load(Ordering::SeqCst) {
                    return Err(crate::error::Error::Internal("store down".into()));
                }
                Ok(self.tokens.lock().ok().and_then(|m| m.get(key).cloned()))
            })
        }

        fn save<'a>(
            &'a self,
            key: &'a str,
            token: &'a Token,
        ) -> futures_util::future::BoxFuture<'a, Result<()>> {
            Box::pin(async move {
                if self.down.load(Ordering::SeqCst) {
                    return Err(crate::error::Error::Internal("store down".into()));
                }
                if let Ok(mut m) = self.tokens.lock() {
                    m.insert(key.to_string(), token.clone());
                }
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn a_store_outage_renews_alone_and_an_older_stored_token_is_passed_over() {
        let store = Arc::new(TestStore::default());
        let cache = TokenCache::new("k".into(), Some(store.clone()));
        let got = |r: Result<Arc<Token>>| r.ok().map(|t| t.access_token.clone());
        assert_eq!(
            got(cache.get(|| async { Ok(token("t1")) }).await).as_deref(),
            Some("t1")
        );
        let mut t2 = token("t2");
        t2.expires_at += 10.0;
        store.down.store(true, Ordering::SeqCst);
        let renewed = cache.renew_after_reject("t1", || async { Ok(t2) }).await;
        assert_eq!(got(renewed).as_deref(), Some("t2"));
        // Back with t1, older than t2: after t2 is refused, t1 is not handed out.
        store.down.store(false, Ordering::SeqCst);
        let mut t3 = token("t3");
        t3.expires_at += 20.0;
        let renewed = cache.renew_after_reject("t2", || async { Ok(t3) }).await;
        assert_eq!(got(renewed).as_deref(), Some("t3"));
        let saved = store.load("k").await.ok().flatten().map(|t| t.access_token);
        assert_eq!(saved.as_deref(), Some("t3"));
    }

    #[tokio::test]
    async fn cached_is_the_token_only_while_it_is_fresh() {
        let cache = TokenCache::new("k".into(), None);
        assert!(cache.cached().is_none());
        cache.get(|| async { Ok(token("t1")) }).await.expect("t1");
        assert_eq!(
            cache.cached().map(|t| t.access_token.clone()).as_deref(),
            Some("t1")
        );
        // One that expires within its renewal margin (5 s at least) is not handed out.
        let short = TokenCache::new("k".into(), None);
        let mut t = token("short");
        t.expires_at = unix_now() + 1.0;
        short.get(|| async { Ok(t) }).await.expect("short");
        assert!(short.cached().is_none());
    }

    /// A cache over `store` holding `t1`, and `store` holding `other` (saved by another
    /// client) with `t1`'s expiry moved by `later` seconds.
    async fn held_and_stored(later: f64) -> (TokenCache, Arc<TestStore>) {
        let store = Arc::new(TestStore::default());
        let cache = TokenCache::new("k".into(), Some(store.clone()));
        let held = cache.get(|| async { Ok(token("t1")) }).await.expect("t1");
        let mut other = (*held).clone();
        other.access_token = "other".into();
        other.expires_at = held.expires_at + later;
        store.save("k", &other).await.expect("save");
        (cache, store)
    }

    /// Renews after `t1` was refused; the name of the token got and how many fetches ran.
    async fn renew_after_t1(cache: &TokenCache) -> (String, usize) {
        let fetches = AtomicUsize::new(0);
        let got = cache
            .renew_after_reject("t1", || async {
                fetches.fetch_add(1, Ordering::SeqCst);
                Ok(token("fetched"))
            })
            .await
            .expect("a token");
        (got.access_token.clone(), fetches.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_newer_token_in_the_store_is_adopted_without_a_fetch() {
        let (cache, _store) = held_and_stored(10.0).await;
        assert_eq!(renew_after_t1(&cache).await, ("other".into(), 0));
        assert_eq!(
            cache.cached().map(|t| t.access_token.clone()).as_deref(),
            Some("other")
        );
    }

    #[tokio::test]
    async fn a_stored_token_no_newer_than_the_held_one_is_passed_over() {
        // Exactly as old: the edge of "newer".
        let (cache, store) = held_and_stored(0.0).await;
        assert_eq!(renew_after_t1(&cache).await, ("fetched".into(), 1));
        let saved = store.load("k").await.ok().flatten().map(|t| t.access_token);
        assert_eq!(saved.as_deref(), Some("fetched"));
        let (cache, _store) = held_and_stored(-10.0).await;
        assert_eq!(renew_after_t1(&cache).await, ("fetched".into(), 1));
    }
}

//! A user's account-information session: a `gca-aisp` token refreshed before expiry (and
//! once after a 401) with the refresh token of the most recent response, single-flight.
//!
//! A new token is offered to `on_token` before any request carries it: until `on_token` has
//! returned, the token is kept but not handed out, and every call waits for (or makes) the
//! offer. If `on_token` fails, the call that made the offer fails with that error, and the
//! next call offers the same token again.
use super::grants::{request_token, Grant};
use super::store::TokenStore;
use crate::error::{Error, Result};
use crate::models::token::unix_now;
use crate::models::Token;
use crate::transport::{Observer, Transport};
use futures_util::future::BoxFuture;
use std::sync::{Arc, RwLock};

/// Called with each new token before it is first used, so the caller can persist it. The
/// hook decides where its code runs (a slow one must not hold up a runtime worker).
pub type OnToken = Arc<dyn Fn(&Token) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// The session's token, and whether `on_token` has accepted it (so requests may carry it).
struct Current {
    token: Arc<Token>,
    offered: bool,
}

pub struct UserSession {
    transport: Arc<Transport>,
    current: RwLock<Current>,
    refreshing: tokio::sync::Mutex<()>,
    on_token: Option<OnToken>,
    /// A store shared with other processes, and this user's key in it.
    shared: Option<(Arc<dyn TokenStore>, String)>,
}

impl UserSession {
    pub fn new(
        transport: Arc<Transport>,
        token: Token,
        on_token: Option<OnToken>,
        shared: Option<(Arc<dyn TokenStore>, String)>,
    ) -> Self {
        UserSession {
            transport,
            // The caller's own token needs no offer: the caller has it.
            current: RwLock::new(Current {
                token: Arc::new(token),
                offered: true,
            }),
            refreshing: tokio::sync::Mutex::new(()),
            on_token,
            shared,
        }
    }

    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The current token, whether or not it is fresh (or offered to `on_token` yet).
    pub fn current(&self) -> Arc<Token> {
        self.snapshot().0
    }

    fn snapshot(&self) -> (Arc<Token>, bool) {
        let g = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (g.token.clone(), g.offered)
    }

    fn set(&self, token: Arc<Token>, offered: bool) {
        let mut g = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = Current { token, offered };
    }

    /// A fresh token that `on_token` has accepted, refreshed first when the current one is
    /// about to expire.
    pub async fn token(&self, observer: Option<&dyn Observer>) -> Result<Arc<Token>> {
        let (t, offered) = self.snapshot();
        if offered && t.fresh_at(unix_now(), t.renew_margin()) {
            return Ok(t);
        }
        self.refresh(None, observer).await
    }

    /// A token other than `rejected`, which the service refused with 401.
    pub async fn renew_after_reject(
        &self,
        rejected: &str,
        observer: Option<&dyn Observer>,
    ) -> Result<Arc<Token>> {
        self.refresh(Some(rejected), observer).await
    }

    async fn refresh(
        &self,
        rejected: Option<&str>,
        observer: Option<&dyn Observer>,
    ) -> Result<Arc<Token>> {
        let _single_flight = self.refreshing.lock().await;
        let usable = |t: &Token| {
            t.fresh_at(unix_now(), t.renew_margin()) && Some(t.access_token.as_str()) != rejected
        };
        let (t, offered) = self.snapshot();
        let next = if usable(&t) {
            if offered {
                return Ok(t);
            }
            // Renewed earlier, but `on_token` has not accepted it yet.
            t
        } else {
            match &self.shared {
                None => self.refresh_from(&t, observer).await?,
                Some((store, key)) => {
                    self.refresh_shared(store.as_ref(), key, &t, &usable, observer)
                        .await?
                }
            }
        };
        self.offer(&next).await?;
        Ok(next)
    }

    /// Hands `t` to `on_token`; once it returns, requests may carry `t`.
    async fn offer(&self, t: &Arc<Token>) -> Result<()> {
        if let Some(cb) = &self.on_token {
            cb(t).await?;
        }
        let mut g = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if Arc::ptr_eq(&g.token, t) {
            g.offered = true;
        }
        Ok(())
    }

    /// Renews through the shared store, under its lock: another process may have rotated the
    /// token already. A store that fails is passed over (the store reports it): the session
    /// renews on its own rather than fail the call.
    async fn refresh_shared(
        &self,
        store: &dyn TokenStore,
        key: &str,
        t: &Arc<Token>,
        usable: &(dyn Fn(&Token) -> bool + Sync),
        observer: Option<&dyn Observer>,
    ) -> Result<Arc<Token>> {
        let (lock, reachable) = match store.lock(key).await {
            Ok(l) => (l, true),
            Err(_) => (None, false),
        };
        let outcome = async {
            let mut base = t.clone();
            if reachable {
                if let Ok(Some(stored)) = store.load(key).await {
                    // Only a newer token than ours counts: an older one (saved before a
                    // store outage, say) carries a spent refresh token, and replaying it
                    // could only fail the call.
                    if stored.refresh_token.is_some()
                        && stored.access_token != base.access_token
                        && stored.expires_at > base.expires_at
                    {
                        let stored = Arc::new(stored);
                        if usable(&stored) {
                            self.set(stored.clone(), false);
                            return Ok(stored);
                        }
                        base = stored;
                    }
                }
            }
            let fresh = self.refresh_from(&base, observer).await?;
            if reachable {
                // A failed save leaves the store behind; the next renewal writes again.
                let _ = store.save(key, &fresh).await;
            }
            Ok(fresh)
        }
        .await;
        if let Some(l) = lock {
            let _ = l.unlock().await;
        }
        outcome
    }

    /// Refreshes with `t`'s refresh token; the new token becomes current, not yet offered.
    async fn refresh_from(&self, t: &Token, observer: Option<&dyn Observer>) -> Result<Arc<Token>> {
        let rt = t.refresh_token.as_deref().ok_or_else(|| Error::OAuth {
            error: "invalid_grant".into(),
            description: Some(
                "the session's token has expired and carries no refresh token".into(),
            ),
            status: None,
        })?;
        let mut fresh = request_token(
            &self.transport,
            Grant::RefreshToken { refresh_token: rt },
            observer,
        )
        .await?;
        if fresh.refresh_token.is_none() {
            // No rotation this time: the old refresh token stays valid.
            fresh.refresh_token = t.refresh_token.clone();
        }
        let fresh = Arc::new(fresh);
        // Kept at once, whatever `on_token` does later: the old refresh token is spent.
        self.set(fresh.clone(), false);
        Ok(fresh)
    }
}

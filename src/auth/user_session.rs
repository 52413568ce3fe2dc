//! A user's account-information session: a `gca-aisp` token refreshed before expiry (and
//! once after a 401) with the refresh token of the most recent response, single-flight.
use super::grants::{request_token, Grant};
use super::store::TokenStore;
use crate::error::{Error, Result};
use crate::models::token::unix_now;
use crate::models::Token;
use crate::transport::{Observer, Transport};
use std::sync::{Arc, RwLock};

/// Called with each new token before it is first used, so the caller can persist it.
pub type OnToken = Arc<dyn Fn(&Token) -> Result<()> + Send + Sync>;

pub struct UserSession {
    transport: Arc<Transport>,
    current: RwLock<Arc<Token>>,
    /// Per process: in a forked child, a task of the parent may hold the parent's lock.
    refreshing: crate::fork::PerProcess<tokio::sync::Mutex<()>>,
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
            current: RwLock::new(Arc::new(token)),
            refreshing: crate::fork::PerProcess::empty(),
            on_token,
            shared,
        }
    }

    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The current token, whether or not it is fresh.
    pub fn current(&self) -> Arc<Token> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, t: Arc<Token>) {
        match self.current.write() {
            Ok(mut g) => *g = t,
            Err(poisoned) => *poisoned.into_inner() = t,
        }
    }

    /// A fresh token, refreshed first when the current one is about to expire.
    pub async fn token(&self, observer: Option<&dyn Observer>) -> Result<Arc<Token>> {
        let t = self.current();
        if t.fresh_at(unix_now(), t.renew_margin()) {
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
        let _single_flight = self.refreshing.get_or_make(Default::default).lock().await;
        let usable = |t: &Token| {
            t.fresh_at(unix_now(), t.renew_margin()) && Some(t.access_token.as_str()) != rejected
        };
        let t = self.current();
        if usable(&t) {
            return Ok(t);
        }
        let Some((store, key)) = &self.shared else {
            return self.refresh_from(&t, observer).await;
        };
        let lock = store.lock(key).await?;
        let outcome = async {
            // Another process may have rotated the token already: its answer is the newest.
            let latest = match store.load(key).await? {
                Some(s) if s.refresh_token.is_some() && s.access_token != t.access_token => {
                    Arc::new(s)
                }
                _ => t.clone(),
            };
            if usable(&latest) {
                self.set(latest.clone());
                return Ok(latest);
            }
            let fresh = self.refresh_from(&latest, observer).await?;
            store.save(key, &fresh).await?;
            Ok(fresh)
        }
        .await;
        if let Some(l) = lock {
            l.unlock().await?;
        }
        outcome
    }

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
        // Keep the new token even if the callback fails: the old refresh token is spent.
        self.set(fresh.clone());
        if let Some(cb) = &self.on_token {
            cb(&fresh)?;
        }
        Ok(fresh)
    }
}

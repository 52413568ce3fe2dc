//! A user's account-information session: a `gca-aisp` token refreshed before expiry (and
//! once after a 401) with the refresh token of the most recent response, single-flight.
//!
//! A new token is offered to `on_token` before any request carries it: until `on_token` has
//! returned, the token is kept but not handed out, and every call waits for (or makes) the
//! offer. If `on_token` fails, the call that made the offer fails with that error, and the
//! next call offers the same token again.
//!
//! A refresh, once sent, runs to its end even if the call that started it is cancelled or
//! interrupted: the service may have rotated the refresh token already, and dropping its
//! answer would end the session. It runs as a task on the shared runtime that keeps the
//! session's single-flight lock (and the store's lock) until the new token is kept.
use super::grants::{request_token, Grant};
use super::store::{KeyLock, TokenStore};
use crate::error::{Error, Result};
use crate::models::token::unix_now;
use crate::models::Token;
use crate::transport::{AttemptLog, Observer, Transport};
use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::OwnedMutexGuard;

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
    /// Read on every call and swapped on refresh with no lock (see `TokenCache::current`: a
    /// lock held by another thread at a fork stays held in the child).
    current: Arc<ArcSwap<Current>>,
    /// Per process: in a forked child, a task of the parent may hold the parent's lock.
    refreshing: crate::runtime::fork::PerProcess<Arc<tokio::sync::Mutex<()>>>,
    on_token: Option<OnToken>,
    /// A store shared with other processes, and this user's key in it.
    shared: Option<(Arc<dyn TokenStore>, String)>,
}

impl UserSession {
    // Public, as `token` and `renew_after_reject`, for tests/user_session_refresh.rs only.
    pub fn new(
        transport: Arc<Transport>,
        token: Token,
        on_token: Option<OnToken>,
        shared: Option<(Arc<dyn TokenStore>, String)>,
    ) -> Self {
        UserSession {
            transport,
            // The caller's own token needs no offer: the caller has it.
            current: Arc::new(ArcSwap::from_pointee(Current {
                token: Arc::new(token),
                offered: true,
            })),
            refreshing: crate::runtime::fork::PerProcess::empty(),
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
        let g = self.current.load();
        (g.token.clone(), g.offered)
    }

    fn set(&self, token: Arc<Token>, offered: bool) {
        set_current(&self.current, token, offered);
    }

    /// A fresh token that `on_token` has accepted, refreshed first when the current one is
    /// about to expire.
    pub async fn token(&self, observer: Option<&dyn Observer>) -> Result<Arc<Token>> {
        let (t, offered) = self.snapshot();
        if offered && t.fresh_at(unix_now(), t.renew_margin()) {
            return Ok(t);
        }
        // Boxed, as `TokenCache::get` boxes its renewal: few calls refresh.
        Box::pin(self.refresh(None, observer)).await
    }

    /// A token other than `rejected`, which the service refused with 401.
    pub async fn renew_after_reject(
        &self,
        rejected: &str,
        observer: Option<&dyn Observer>,
    ) -> Result<Arc<Token>> {
        Box::pin(self.refresh(Some(rejected), observer)).await
    }

    async fn refresh(
        &self,
        rejected: Option<&str>,
        observer: Option<&dyn Observer>,
    ) -> Result<Arc<Token>> {
        let single_flight = self
            .refreshing
            .get_or_make(Default::default)
            .clone()
            .lock_owned()
            .await;
        let usable = |t: &Token| {
            t.fresh_at(unix_now(), t.renew_margin()) && Some(t.access_token.as_str()) != rejected
        };
        let (t, offered) = self.snapshot();
        let (next, _single_flight) = if usable(&t) {
            if offered {
                return Ok(t);
            }
            // Renewed earlier, but `on_token` has not accepted it yet.
            (t, single_flight)
        } else {
            match &self.shared {
                None => self.refresh_from(t, None, single_flight, observer).await?,
                Some((store, key)) => {
                    self.refresh_shared(store, key, t, &usable, single_flight, observer)
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
        // Marked offered only if `t` is still the current token (a later refresh may have
        // replaced it meanwhile).
        self.current.rcu(|g| {
            if Arc::ptr_eq(&g.token, t) {
                Arc::new(Current {
                    token: g.token.clone(),
                    offered: true,
                })
            } else {
                g.clone()
            }
        });
        Ok(())
    }

    /// Renews through the shared store, under its lock: another process may have rotated the
    /// token already. A store that fails is passed over (the store reports it): the session
    /// renews on its own rather than fail the call.
    async fn refresh_shared(
        &self,
        store: &Arc<dyn TokenStore>,
        key: &str,
        t: Arc<Token>,
        usable: &(dyn Fn(&Token) -> bool + Sync),
        single_flight: OwnedMutexGuard<()>,
        observer: Option<&dyn Observer>,
    ) -> Result<(Arc<Token>, OwnedMutexGuard<()>)> {
        let Some(lock) = KeyLock::take(store.as_ref(), key).await else {
            // The store is down: renew on our own, and leave the store alone this time.
            return self.refresh_from(t, None, single_flight, observer).await;
        };
        let mut base = t;
        if let Ok(Some(stored)) = store.load(key).await {
            // Only a newer token than ours counts: an older one (saved before a store
            // outage, say) carries a spent refresh token, and replaying it could only fail
            // the call.
            if stored.refresh_token.is_some()
                && stored.access_token != base.access_token
                && stored.expires_at > base.expires_at
            {
                let stored = Arc::new(stored);
                if usable(&stored) {
                    self.set(stored.clone(), false);
                    lock.release().await;
                    return Ok((stored, single_flight));
                }
                base = stored;
            }
        }
        let save = SaveTo {
            store: store.clone(),
            key: key.to_string(),
            lock,
        };
        self.refresh_from(base, Some(save), single_flight, observer)
            .await
    }

    /// Refreshes with `t`'s refresh token; the new token becomes current, not yet offered.
    /// The exchange runs as a task of its own that finishes even if this call is dropped
    /// (see the module's notes); it holds `single_flight` (and the store's lock) until the
    /// new token is kept (and saved), and hands `single_flight` back.
    async fn refresh_from(
        &self,
        t: Arc<Token>,
        save: Option<SaveTo>,
        single_flight: OwnedMutexGuard<()>,
        observer: Option<&dyn Observer>,
    ) -> Result<(Arc<Token>, OwnedMutexGuard<()>)> {
        let rt = t.refresh_token.clone().ok_or_else(|| Error::OAuth {
            error: "invalid_grant".into(),
            description: Some(
                "the session's token has expired and carries no refresh token".into(),
            ),
            status: None,
            headers: Vec::new(),
            body: None,
        })?;
        let (transport, current) = (self.transport.clone(), self.current.clone());
        let attempts = Arc::new(Recorder::default());
        let recorder = observer.map(|_| attempts.clone());
        let task = crate::runtime::runtime().spawn(async move {
            let obs = recorder.as_deref().map(|r| r as &dyn Observer);
            let fresh = async {
                let grant = Grant::RefreshToken { refresh_token: &rt };
                let mut fresh = request_token(&transport, grant, obs).await?;
                if fresh.refresh_token.is_none() {
                    // No rotation this time: the old refresh token stays valid.
                    fresh.refresh_token = Some(rt.clone());
                }
                let fresh = Arc::new(fresh);
                // Kept at once, whatever `on_token` does later: the old refresh token is spent.
                set_current(&current, fresh.clone(), false);
                Ok(fresh)
            }
            .await;
            if let Some(save) = save {
                let saved = fresh.as_deref().ok();
                save.lock
                    .save_and_release(save.store.as_ref(), &save.key, saved)
                    .await;
            }
            (fresh, single_flight)
        });
        let joined = task.await;
        if let Some(obs) = observer {
            attempts.replay(obs);
        }
        match joined {
            Ok((fresh, single_flight)) => fresh.map(|f| (f, single_flight)),
            Err(e) => match e.try_into_panic() {
                Ok(payload) => std::panic::resume_unwind(payload),
                Err(e) => Err(Error::Internal(format!("the refresh did not finish: {e}"))),
            },
        }
    }
}

fn set_current(current: &ArcSwap<Current>, token: Arc<Token>, offered: bool) {
    current.store(Arc::new(Current { token, offered }));
}

/// Where a refresh made through a shared store saves its token, and the lock it releases.
struct SaveTo {
    store: Arc<dyn TokenStore>,
    key: String,
    lock: KeyLock,
}

/// One attempt's log line, owned, to hand on to the caller's observer later.
struct Attempt {
    method: String,
    path: String,
    attempt: u32,
    status: Option<u16>,
    duration: Duration,
    error: Option<String>,
    retry_in: Option<Duration>,
    request_id: Option<String>,
}

/// Keeps the attempts of a refresh run as a task of its own.
#[derive(Default)]
struct Recorder(Mutex<Vec<Attempt>>);

impl Observer for Recorder {
    fn attempt(&self, log: &AttemptLog<'_>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Attempt {
                method: log.method.to_string(),
                path: log.path.to_string(),
                attempt: log.attempt,
                status: log.status,
                duration: log.duration,
                error: log.error.clone(),
                retry_in: log.retry_in,
                request_id: log.request_id.map(str::to_owned),
            });
    }
}

impl Recorder {
    fn replay(&self, to: &dyn Observer) {
        let kept = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for a in kept {
            to.attempt(&AttemptLog {
                method: &a.method,
                path: &a.path,
                attempt: a.attempt,
                status: a.status,
                duration: a.duration,
                error: a.error,
                // The error itself stayed with the task that made the attempt.
                failure: None,
                retry_in: a.retry_in,
                request_id: a.request_id.as_deref(),
            });
        }
    }
}

//! `fxpay_core::UserSession` against a scripted token endpoint on loopback: when it
//! refreshes, with which refresh token, what it keeps and offers to `on_token`, what the
//! caller's observer sees, and which token of a shared store it adopts instead of refreshing.
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use fxpay_core::{
    unix_now, AttemptLog, Error, Observer, OnToken, Result, Token, TokenStore, UserSession,
};
use support::token_server::{token_body, TokenServer};

/// A user token named `name` with refresh token `refresh`, expiring `life` seconds from now
/// (negative: expired).
fn token(name: &str, refresh: Option<&str>, life: f64) -> Token {
    Token {
        access_token: name.into(),
        token_type: "Bearer".into(),
        expires_in: 3600,
        expires_at: unix_now() + life,
        refresh_token: refresh.map(Into::into),
        scope: Some("gca-aisp".into()),
    }
}

/// Records the tokens offered to `on_token`; fails the first offer when asked to.
#[derive(Default)]
struct Offers {
    seen: Mutex<Vec<String>>,
    fail_first: AtomicBool,
}

impl Offers {
    fn hook(self: &Arc<Self>) -> OnToken {
        let me = self.clone();
        Arc::new(move |t: &Token| {
            let name = t.access_token.clone();
            let me = me.clone();
            Box::pin(async move {
                if let Ok(mut s) = me.seen.lock() {
                    s.push(name);
                }
                if me.fail_first.swap(false, Ordering::SeqCst) {
                    return Err(Error::Internal("the hook failed".into()));
                }
                Ok(())
            })
        })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// The caller's observer: the attempts it is told about, as (path, status).
#[derive(Default)]
struct Seen(Mutex<Vec<(String, Option<u16>)>>);

impl Observer for Seen {
    fn attempt(&self, log: &AttemptLog<'_>) {
        if let Ok(mut v) = self.0.lock() {
            v.push((log.path.to_string(), log.status));
        }
    }
}

/// A store in one process that takes no lock.
#[derive(Default)]
struct MemoryTokenStore(Mutex<HashMap<String, Token>>);

impl TokenStore for MemoryTokenStore {
    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Token>>> {
        Box::pin(async move { Ok(self.0.lock().ok().and_then(|m| m.get(key).cloned())) })
    }

    fn save<'a>(&'a self, key: &'a str, token: &'a Token) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if let Ok(mut m) = self.0.lock() {
                m.insert(key.to_string(), token.clone());
            }
            Ok(())
        })
    }
}

const KEY: &str = "user:1";

fn name(t: &Token) -> String {
    t.access_token.clone()
}

#[tokio::test]
async fn an_expired_token_is_refreshed_kept_offered_and_reported() {
    let server = TokenServer::start(vec![(200, token_body("t1", Some("r1"), None))]).await;
    let offers = Arc::new(Offers::default());
    let session = UserSession::new(
        Arc::new(server.transport()),
        token("t0", Some("r0"), -10.0),
        Some(offers.hook()),
        None,
    );
    let seen = Seen::default();
    let got = session.token(Some(&seen)).await.expect("a token");
    assert_eq!(name(&got), "t1");
    assert_eq!(server.field(0, "refresh_token").as_deref(), Some("r0"));
    assert_eq!(offers.seen(), vec!["t1"]);
    assert_eq!(name(&session.current()), "t1");
    assert_eq!(session.current().refresh_token.as_deref(), Some("r1"));
    let attempts = seen.0.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert!(attempts[0].0.ends_with("/oauth/token"), "{attempts:?}");
    assert_eq!(attempts[0].1, Some(200));
    // The new token is fresh and offered: the next call neither refreshes nor offers.
    assert_eq!(name(&session.token(None).await.expect("a token")), "t1");
    assert_eq!(server.forms().len(), 1);
    assert_eq!(offers.seen(), vec!["t1"]);
}

#[tokio::test]
async fn a_fresh_token_the_service_refused_is_refreshed() {
    let server = TokenServer::start(vec![(200, token_body("t1", Some("r1"), None))]).await;
    let session = UserSession::new(
        Arc::new(server.transport()),
        token("t0", Some("r0"), 3600.0),
        None,
        None,
    );
    assert_eq!(name(&session.token(None).await.expect("t0")), "t0");
    assert!(server.forms().is_empty());
    let got = session.renew_after_reject("t0", None).await.expect("t1");
    assert_eq!(name(&got), "t1");
    assert_eq!(server.field(0, "refresh_token").as_deref(), Some("r0"));
}

#[tokio::test]
async fn a_token_on_token_refused_is_offered_again_before_use() {
    let server = TokenServer::start(vec![(200, token_body("t1", Some("r1"), None))]).await;
    let offers = Arc::new(Offers::default());
    offers.fail_first.store(true, Ordering::SeqCst);
    let session = UserSession::new(
        Arc::new(server.transport()),
        token("t0", Some("r0"), -10.0),
        Some(offers.hook()),
        None,
    );
    assert!(session.token(None).await.is_err());
    // Kept (the old refresh token is spent), but not handed out until on_token accepts it.
    assert_eq!(name(&session.current()), "t1");
    assert_eq!(name(&session.token(None).await.expect("t1")), "t1");
    assert_eq!(offers.seen(), vec!["t1", "t1"]);
    assert_eq!(
        server.forms().len(),
        1,
        "offered again, not refreshed again"
    );
}

/// A session holding an expired `t0` (refresh token `r0`) over a store holding `stored`,
/// and a token endpoint that would answer `t1`.
async fn shared(stored: Token) -> (UserSession, TokenServer, Arc<Offers>, Arc<MemoryTokenStore>) {
    let server = TokenServer::start(vec![(200, token_body("t1", Some("r1"), None))]).await;
    let store = Arc::new(MemoryTokenStore::default());
    store.save(KEY, &stored).await.expect("save");
    let offers = Arc::new(Offers::default());
    let session = UserSession::new(
        Arc::new(server.transport()),
        token("t0", Some("r0"), -10.0),
        Some(offers.hook()),
        Some((store.clone() as Arc<dyn TokenStore>, KEY.to_string())),
    );
    (session, server, offers, store)
}

#[tokio::test]
async fn a_newer_token_in_the_shared_store_is_adopted_without_a_refresh() {
    let (session, server, offers, _store) = shared(token("s1", Some("rs1"), 3600.0)).await;
    assert_eq!(name(&session.token(None).await.expect("s1")), "s1");
    assert!(server.forms().is_empty(), "no refresh was sent");
    assert_eq!(name(&session.current()), "s1");
    assert_eq!(offers.seen(), vec!["s1"]);
    // Kept and offered: the next call uses it as it is.
    assert_eq!(name(&session.token(None).await.expect("s1")), "s1");
    assert_eq!(offers.seen(), vec!["s1"]);
}

/// Asserts the session refreshed with its own refresh token and saved the answer.
async fn refreshed_with_its_own(
    session: UserSession,
    server: TokenServer,
    store: Arc<MemoryTokenStore>,
) {
    assert_eq!(name(&session.token(None).await.expect("t1")), "t1");
    assert_eq!(server.forms().len(), 1);
    assert_eq!(server.field(0, "refresh_token").as_deref(), Some("r0"));
    let saved = store.load(KEY).await.expect("load").map(|t| name(&t));
    assert_eq!(saved.as_deref(), Some("t1"));
}

#[tokio::test]
async fn an_older_stored_token_is_not_used() {
    let (session, server, _offers, store) = shared(token("s0", Some("rs0"), -100.0)).await;
    refreshed_with_its_own(session, server, store).await;
}

#[tokio::test]
async fn a_stored_token_exactly_as_old_as_ours_is_not_used() {
    let (session, server, _offers, store) = shared(token("s0", Some("rs0"), 0.0)).await;
    // The edge of "newer": the stored token expires at the very instant ours does.
    let mut stored = store.load(KEY).await.expect("load").expect("stored");
    stored.expires_at = session.current().expires_at;
    store.save(KEY, &stored).await.expect("save");
    refreshed_with_its_own(session, server, store).await;
}

#[tokio::test]
async fn a_stored_token_without_a_refresh_token_is_not_adopted() {
    let (session, server, _offers, store) = shared(token("s1", None, 3600.0)).await;
    refreshed_with_its_own(session, server, store).await;
}

#[tokio::test]
async fn our_own_token_in_the_store_is_not_adopted_again() {
    // The store holds the very token the service refused (same access token, later expiry
    // as another process may have written it): it is refreshed, not handed out again.
    let (session, server, _offers, store) = shared(token("t0", Some("r0"), 3600.0)).await;
    refreshed_with_its_own(session, server, store).await;
}

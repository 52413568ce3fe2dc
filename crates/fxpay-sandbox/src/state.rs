//! The emulator's in-memory state: clients, users, tokens, quotes, beneficiaries, deals.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::http::faults::Faults;
use crate::stats::Stats;

/// Access-token lifetime in seconds.
pub const ACCESS_TTL: u64 = 3599;
/// Refresh-token lifetime in seconds.
pub const REFRESH_TTL: u64 = 2_592_000;
/// Authorization-code lifetime in seconds.
pub const CODE_TTL: f64 = 600.0;
/// How long a login may wait for its consent answer.
pub const CONSENT_TTL: f64 = 600.0;
/// A deal is `Paid` this many seconds after its creation.
pub const PAID_AFTER: f64 = 86_400.0;
/// Fee-free deals per client.
pub const FREEBIES: u32 = 3;

pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

pub fn lock<T>(l: &Mutex<T>) -> MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

/// A registered OAuth client.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub secret: String,
    pub redirect_uris: Vec<String>,
}

/// An end user who can log in and consent.
#[derive(Debug, Clone)]
pub struct User {
    pub password: String,
    /// The precomputed `GET /v1/gca/virtual-accounts` body.
    pub accounts: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Payments,
    GcaAisp,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Payments => "payments",
            Scope::GcaAisp => "gca-aisp",
        }
    }
}

#[derive(Debug, Clone)]
pub struct AccessToken {
    pub client_id: String,
    pub scope: Scope,
    pub user: Option<String>,
    pub expires_at: f64,
    /// The refresh-token family (one per redeemed authorization code).
    pub family: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct AuthCode {
    pub client_id: String,
    pub redirect_uri: String,
    pub user: String,
    pub expires_at: f64,
    /// Set once redeemed: the family of the tokens it gave.
    pub redeemed: Option<u64>,
    /// The RFC 7636 `S256` challenge of the authorization request, if it carried one.
    pub code_challenge: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RefreshRecord {
    pub client_id: String,
    pub user: String,
    pub family: u64,
    pub expires_at: f64,
}

#[derive(Debug, Clone)]
pub struct Family {
    /// The only refresh token of the family that may still be used; empty once a newer token
    /// response to the same client and user superseded the family.
    pub current: String,
    pub revoked: bool,
    /// The client and user the family's tokens were issued to.
    pub client_id: String,
    pub user: String,
}

/// A logged-in user waiting on the consent page.
#[derive(Debug, Clone)]
pub struct Consent {
    pub session: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub user: String,
    pub expires_at: f64,
    /// The RFC 7636 `S256` challenge of the authorization request, if it carried one.
    pub code_challenge: Option<String>,
}

#[derive(Debug, Default)]
pub struct OAuthStore {
    pub codes: HashMap<String, AuthCode>,
    pub refresh: HashMap<String, RefreshRecord>,
    pub families: HashMap<u64, Family>,
    pub consents: HashMap<String, Consent>,
    pub next_family: u64,
}

#[derive(Debug)]
pub struct Quote {
    pub id: String,
    pub client_id: String,
    pub sell_currency: String,
    pub sell_amount: Decimal,
    pub beneficiaries: u32,
    /// The fee was waived: a deal on this quote claims a freebie.
    pub freebie: bool,
    /// The precomputed `GET /v1/payments/quotes/{id}` body.
    pub body: Bytes,
}

#[derive(Debug, Clone)]
pub struct Beneficiary {
    pub client_id: String,
    pub currency: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DealKind {
    Deal,
    Spot,
}

#[derive(Debug, Clone)]
pub struct Deal {
    pub id: String,
    pub quote_id: String,
    pub process_id: Option<String>,
    pub kind: DealKind,
    pub client_id: String,
    pub funding_source: String,
    pub channel: Option<String>,
    pub beneficiaries: Vec<Value>,
    pub created_at: f64,
}

impl Deal {
    pub fn status(&self, now: f64) -> &'static str {
        if now >= self.created_at + PAID_AFTER {
            "Paid"
        } else {
            "Booked"
        }
    }

    pub fn to_json(&self, now: f64) -> Value {
        json!({
            "dealId": self.id,
            "quoteId": self.quote_id,
            "processId": self.process_id,
            "kind": match self.kind { DealKind::Deal => "deal", DealKind::Spot => "spot" },
            "clientId": self.client_id,
            "fundingSource": self.funding_source,
            "channel": self.channel,
            "beneficiaries": self.beneficiaries,
            "status": self.status(now),
            "createdAt": self.created_at,
        })
    }
}

/// Everything deal booking must change atomically.
#[derive(Debug, Default)]
pub struct Ledger {
    pub beneficiaries: HashMap<String, Beneficiary>,
    pub deals: Vec<Deal>,
    pub deal_index: HashMap<String, usize>,
    /// quote id → deal id.
    pub used_quotes: HashMap<String, String>,
    /// client id → freebies claimed.
    pub claimed: HashMap<String, u32>,
}

impl Ledger {
    pub fn freebies(&self, client_id: &str) -> (u32, u32, u32) {
        let claimed = self
            .claimed
            .get(client_id)
            .copied()
            .unwrap_or(0)
            .min(FREEBIES);
        (FREEBIES, claimed, FREEBIES - claimed)
    }
}

/// A spot deal's `DealCreated` as first sent: what `redeliver` sends again, byte for byte.
#[derive(Debug, Clone)]
pub struct SentEvent {
    pub url: url::Url,
    pub nonce: Option<axum::http::HeaderValue>,
    pub payload: String,
}

/// Accounts set by `Sandbox::set_virtual_accounts`: every user gets these, served in pages
/// of `page_size` linked by `next` (a path with `?page=N`).
#[derive(Debug, Clone)]
pub struct Paged {
    pub accounts: Vec<Value>,
    pub page_size: Option<usize>,
}

/// The whole emulator state, shared by the server tasks.
#[derive(Debug)]
pub struct State {
    pub clock: Clock,
    pub clients: RwLock<HashMap<String, Client>>,
    pub users: HashMap<String, User>,
    pub tokens: RwLock<HashMap<String, AccessToken>>,
    pub oauth: Mutex<OAuthStore>,
    pub quotes: RwLock<HashMap<String, Arc<Quote>>>,
    pub ledger: Mutex<Ledger>,
    pub deliveries: Mutex<Vec<Value>>,
    /// process id → the spot deal's `DealCreated` as first sent (for `redeliver`).
    pub events: Mutex<HashMap<String, SentEvent>>,
    /// Accounts set by `set_virtual_accounts` (served in pages), instead of each user's own.
    pub paged_accounts: RwLock<Option<Arc<Paged>>>,
    pub stats: Stats,
    pub faults: Faults,
    /// Client for callback deliveries (no proxy, no redirects).
    pub http: reqwest::Client,
    /// Becomes `true` when the sandbox shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// The served OpenAPI document.
    pub openapi: Bytes,
    /// How long a request body may take to arrive once its headers are read.
    pub body_timeout: std::time::Duration,
    /// How long a connection may stay with no request in progress before it is closed.
    pub idle_timeout: std::time::Duration,
    /// The opt-in rate limit (`SandboxConfig::rate_limit`).
    pub rate_limit: Option<crate::http::rate_limit::RateLimit>,
    /// Counted requests per whole second, for `stats()["per_second"]`.
    pub timeline: crate::http::rate_limit::Timeline,
    /// The admin API (`/_sandbox/`) needs: its token, the identity it reports.
    pub admin: Admin,
}

/// The admin API's token and what `GET /_sandbox/info` reports.
#[derive(Debug, Default)]
pub struct Admin {
    /// Compared in constant time; an empty token refuses every request.
    pub token: String,
    /// `base_url`, `client_id`, `redirect_uri`, `username`, `password`, `ca_bundle`.
    pub info: Value,
    pub username: String,
    pub password: String,
    /// The CA a TLS sandbox's certificate chains to (`approve` trusts it).
    pub root: Option<reqwest::Certificate>,
}

impl State {
    pub fn new(http: reqwest::Client, shutdown: watch::Receiver<bool>, openapi: Bytes) -> Self {
        Self {
            clock: Clock::new(),
            clients: RwLock::new(HashMap::new()),
            users: HashMap::new(),
            tokens: RwLock::new(HashMap::new()),
            oauth: Mutex::new(OAuthStore::default()),
            quotes: RwLock::new(HashMap::new()),
            ledger: Mutex::new(Ledger::default()),
            deliveries: Mutex::new(Vec::new()),
            events: Mutex::new(HashMap::new()),
            paged_accounts: RwLock::new(None),
            stats: Stats::default(),
            faults: Faults::default(),
            http,
            shutdown,
            openapi,
            admin: Admin::default(),
            body_timeout: crate::config::DEFAULT_BODY_TIMEOUT,
            idle_timeout: crate::config::DEFAULT_IDLE_TIMEOUT,
            rate_limit: None,
            timeline: crate::http::rate_limit::Timeline::default(),
        }
    }

    /// `Booked`, or `Paid` once `PAID_AFTER` seconds (sandbox clock) have passed.
    pub fn deal_status(&self, deal_id: &str) -> Option<String> {
        let now = self.clock.now();
        let ledger = lock(&self.ledger);
        let i = *ledger.deal_index.get(deal_id)?;
        ledger.deals.get(i).map(|d| d.status(now).to_owned())
    }

    /// Every deal booked, oldest first.
    pub fn deals(&self) -> Vec<Value> {
        let now = self.clock.now();
        lock(&self.ledger)
            .deals
            .iter()
            .map(|d| d.to_json(now))
            .collect()
    }

    /// Forgets every quote, beneficiary, deal, delivery and fault, and zeroes the request
    /// counters. Clients, users, tokens and the clock stay.
    pub fn reset(&self) {
        write(&self.quotes).clear();
        *lock(&self.ledger) = Ledger::default();
        lock(&self.deliveries).clear();
        lock(&self.events).clear();
        self.faults.clear();
        self.stats.reset();
        self.timeline.clear();
        if let Some(rl) = &self.rate_limit {
            rl.refill();
        }
    }

    pub fn is_shut_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Registers (or replaces) a client. A redirect URI it may not have (spec 5.1: https for
    /// a web application, a custom scheme for a native one; `oauth::registration`) refuses
    /// the whole registration, with a message naming it.
    pub fn register_client(
        &self,
        id: &str,
        secret: &str,
        redirect_uris: &[&str],
    ) -> Result<(), String> {
        if let Some(bad) = redirect_uris
            .iter()
            .find(|u| !crate::oauth::registration::registrable(u))
        {
            return Err(format!(
                "redirect_uris: {bad:?} cannot be registered: a redirect URI must be {}",
                crate::oauth::registration::RULE
            ));
        }
        let client = Client {
            id: id.to_owned(),
            secret: secret.to_owned(),
            redirect_uris: redirect_uris.iter().map(|s| (*s).to_owned()).collect(),
        };
        write(&self.clients).insert(id.to_owned(), client);
        Ok(())
    }

    pub fn client(&self, id: &str) -> Option<Client> {
        read(&self.clients).get(id).cloned()
    }

    /// The `stats()` document.
    pub fn stats_json(&self) -> Value {
        let mut v = self.stats.to_json();
        let deliveries = lock(&self.deliveries);
        let ok = deliveries
            .iter()
            .filter(|d| {
                d["status"]
                    .as_u64()
                    .is_some_and(|s| (200..300).contains(&s))
            })
            .count();
        if let Value::Object(m) = &mut v {
            m.insert("deliveries".to_owned(), json!(deliveries.len()));
            m.insert("deliveries_ok".to_owned(), json!(ok));
            m.insert("faults_fired".to_owned(), json!(self.faults.fired()));
            m.insert("faults_pending".to_owned(), json!(self.faults.pending()));
            m.insert(
                "rate_limit".to_owned(),
                json!(self.rate_limit.as_ref().map(|r| r.per_second())),
            );
            m.insert("per_second".to_owned(), self.timeline.to_json());
            m.insert("quotes".to_owned(), json!(read(&self.quotes).len()));
            let ledger = lock(&self.ledger);
            m.insert(
                "beneficiaries".to_owned(),
                json!(ledger.beneficiaries.len()),
            );
            m.insert("deals".to_owned(), json!(ledger.deals.len()));
        }
        v
    }
}

//! The local sandbox: an embedded, stateful emulator of the whole service, served on
//! loopback (axum on the caller's tokio runtime, state in memory, its own movable clock).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fxpay_sandbox::{Sandbox, SandboxConfig};
//! let sb = Sandbox::start(SandboxConfig::default()).await?;
//! println!("{} {} {}", sb.base_url(), sb.client_id(), sb.client_secret());
//! sb.advance(86_400.0);
//! sb.shutdown();
//! # Ok(()) }
//! ```
//!
//! Layout: `oauth/` (the token endpoint, the authorize/login/consent pages, the bearer check,
//! the browser behind `approve`), `payments/` (quotes and rates, beneficiaries, deals and
//! their booking, spot-deal callbacks, field validation), `http/` (routes and connections,
//! bodies, extractors, errors, faults, the admin API under `/_sandbox/`, `/openapi.json`),
//! `accounts.rs` (virtual accounts), `state.rs`, `clock.rs`, `stats.rs`, `ids.rs`, `tls.rs`
//! (https with a certificate made at start), `config.rs` and `error.rs`.
mod accounts;
mod clock;
mod config;
mod error;
mod http;
mod ids;
mod oauth;
mod payments;
mod state;
mod stats;
mod tls;

pub use accounts::MAX_GENERATED as MAX_GENERATED_ACCOUNTS;
pub use config::{SandboxConfig, DEFAULT_BODY_TIMEOUT, DEFAULT_IDLE_TIMEOUT};
pub use error::SandboxError;
pub use http::errors;
pub use payments::callbacks::SendError;
pub use payments::rates;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use http::faults::Action;
use http::{openapi, server};
use oauth::browser;
use payments::callbacks;
use state::{lock, State, User};

/// The registered https redirect URI of the default client.
pub const DEFAULT_REDIRECT_URI: &str = "https://app.example.test/callback";
/// The registered custom-scheme redirect URI of the default client (native apps).
pub const DEFAULT_NATIVE_REDIRECT_URI: &str = "com.example.app:/oauth/callback";
/// The sandbox user's name.
pub const DEFAULT_USERNAME: &str = "sandbox-user";

#[derive(Debug)]
struct Inner {
    state: Arc<State>,
    addr: SocketAddr,
    base_url: String,
    client_id: String,
    client_secret: String,
    username: String,
    password: String,
    admin_token: String,
    /// The TLS material of an https sandbox; dropping it removes the CA file.
    tls: Option<tls::Tls>,
    shutdown: watch::Sender<bool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

/// A running sandbox. Cheap to clone; the server stops on `shutdown()` or when the last
/// clone is dropped.
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

fn base_url_of(addr: SocketAddr, https: bool) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let scheme = if https { "https" } else { "http" };
    format!("{scheme}://{}", SocketAddr::new(ip, addr.port()))
}

impl Sandbox {
    /// Binds and spawns the server on the current tokio runtime; returns once listening.
    pub async fn start(config: SandboxConfig) -> std::io::Result<Sandbox> {
        let listener = TcpListener::bind((config.host, config.port)).await?;
        let addr = listener.local_addr()?;
        let base_url = base_url_of(addr, config.tls);
        let tls = if config.tls {
            Some(tls::make(config.host, config.client_auth)?)
        } else {
            None
        };
        let root = match &tls {
            Some(t) => Some(
                reqwest::Certificate::from_pem(t.ca_pem.as_bytes())
                    .map_err(std::io::Error::other)?,
            ),
            None => None,
        };
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(callbacks::DELIVERY_TIMEOUT)
            .user_agent("fxpay-sandbox/0.1")
            .build()
            .map_err(std::io::Error::other)?;
        let (tx, rx) = watch::channel(false);
        let client_id = format!("sandbox-client-{}", ids::hex_tag(4));
        let client_secret = ids::token();
        let redirect_uris = [DEFAULT_REDIRECT_URI, DEFAULT_NATIVE_REDIRECT_URI];
        let doc = openapi::bytes(&base_url, &client_id, &redirect_uris);
        let mut st = State::new(http, rx.clone(), doc);
        st.body_timeout = config.body_timeout;
        st.idle_timeout = config.idle_timeout;
        if let Some(n) = config.rate_limit {
            if !(n.is_finite() && (0.001..=1e9).contains(&n)) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "rate_limit must be a number of requests per second of at least 0.001 \
                         and at most 1e9, got {n}"
                    ),
                ));
            }
            st.rate_limit = Some(http::rate_limit::RateLimit::new(n));
        }
        let username = DEFAULT_USERNAME.to_owned();
        let password = format!("pw-{}", ids::hex_tag(8));
        st.users.insert(
            username.clone(),
            User {
                password: password.clone(),
                accounts: accounts::build("Sandbox User", &st.clock.now_rfc3339()),
            },
        );
        let admin_token = ids::token();
        let ca_bundle = tls
            .as_ref()
            .map(|t| t.ca_path.to_string_lossy().into_owned());
        st.admin = state::Admin {
            token: admin_token.clone(),
            info: serde_json::json!({
                "base_url": base_url,
                "client_id": client_id,
                "redirect_uri": DEFAULT_REDIRECT_URI,
                "username": username,
                "password": password,
                "ca_bundle": ca_bundle,
            }),
            username: username.clone(),
            password: password.clone(),
            root,
        };
        let state = Arc::new(st);
        state
            .register_client(&client_id, &client_secret, &redirect_uris)
            .map_err(std::io::Error::other)?;
        let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
        tokio::spawn(server::serve(listener, state.clone(), rx, acceptor));
        Ok(Sandbox {
            inner: Arc::new(Inner {
                state,
                addr,
                base_url,
                client_id,
                client_secret,
                username,
                password,
                admin_token,
                tls,
                shutdown: tx,
            }),
        })
    }

    /// `http://127.0.0.1:PORT`, or `https://` with `tls` (no `/v1`).
    pub fn base_url(&self) -> String {
        self.inner.base_url.clone()
    }

    /// The bound socket address.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.addr
    }

    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    pub fn client_secret(&self) -> &str {
        &self.inner.client_secret
    }

    /// A registered https redirect URI of the default client.
    pub fn redirect_uri(&self) -> &str {
        DEFAULT_REDIRECT_URI
    }

    pub fn username(&self) -> &str {
        &self.inner.username
    }

    pub fn password(&self) -> &str {
        &self.inner.password
    }

    /// The token of the admin API (`Authorization: Bearer <token>` under `/_sandbox/`).
    pub fn admin_token(&self) -> &str {
        &self.inner.admin_token
    }

    /// With `client_auth`: a client certificate (PEM) the sandbox's CA issued, and its key.
    pub fn client_identity(&self) -> Option<(&std::path::Path, &std::path::Path)> {
        let t = self.inner.tls.as_ref()?;
        Some((
            t.client_cert_path.as_deref()?,
            t.client_key_path.as_deref()?,
        ))
    }

    /// The CA file (PEM) an https sandbox's certificate chains to; `None` without `tls`.
    pub fn ca_bundle(&self) -> Option<&std::path::Path> {
        self.inner.tls.as_ref().map(|t| t.ca_path.as_path())
    }

    /// Forgets every quote, beneficiary, deal, delivery and fault; zeroes the counters.
    pub fn reset(&self) {
        self.inner.state.reset();
    }

    /// Registers (or replaces) an OAuth client.
    /// Registers (or replaces) a client; a redirect URI it may not have refuses it
    /// (`oauth::registration`), with a message naming that URI.
    pub fn register_client(
        &self,
        client_id: &str,
        client_secret: &str,
        redirect_uris: &[&str],
    ) -> Result<(), String> {
        self.inner
            .state
            .register_client(client_id, client_secret, redirect_uris)
    }

    /// Drives login + consent over HTTP like a browser; returns the final redirect URL
    /// (with `code`&`state`, or `error=access_denied`&`state`).
    pub async fn approve(&self, auth_url: &str, allow: bool) -> Result<String, SandboxError> {
        let root = self.inner.state.admin.root.as_ref();
        let auth_url = browser::own_authorize_url(&self.inner.base_url, auth_url)?;
        browser::approve(
            &auth_url,
            allow,
            &self.inner.username,
            &self.inner.password,
            root,
        )
        .await
    }

    /// Moves the sandbox clock forward (non-positive or non-finite values are ignored).
    pub fn advance(&self, seconds: f64) {
        self.inner.state.clock.advance(seconds);
    }

    /// The sandbox clock, unix seconds.
    pub fn now(&self) -> f64 {
        self.inner.state.clock.now()
    }

    /// `Booked`, or `Paid` once 86400 s (sandbox clock) have passed since creation.
    pub fn deal_status(&self, deal_id: &str) -> Option<String> {
        self.inner.state.deal_status(deal_id)
    }

    /// Every deal booked, oldest first.
    pub fn deals(&self) -> Vec<Value> {
        self.inner.state.deals()
    }

    /// Every callback delivery attempt, in order.
    pub fn deliveries(&self) -> Vec<Value> {
        lock(&self.inner.state.deliveries).clone()
    }

    /// Sends a spot deal's recorded `DealCreated` again (same body, nonce and URL; one
    /// attempt) and returns the delivery, also recorded in `deliveries`. `None` when the
    /// sandbox sent no event for `process_id`.
    pub async fn redeliver(&self, process_id: &str) -> Option<Value> {
        callbacks::redeliver(&self.inner.state, process_id).await
    }

    /// POSTs a `DealCreated` body of the caller's making to `url` once (with `nonce` as
    /// `callback-nonce`) and returns the delivery, also recorded in `deliveries`.
    pub async fn send_event(
        &self,
        url: &str,
        payload: &str,
        nonce: Option<&str>,
    ) -> Result<Value, callbacks::SendError> {
        callbacks::send(&self.inner.state, url, payload, nonce).await
    }

    /// From now on every user has `count` generated accounts, served in pages of
    /// `page_size` (all in one page when `None`) linked by `next`. `count` 0 is no accounts.
    /// `count` is at most [`MAX_GENERATED_ACCOUNTS`] (more is cut to it; callers check).
    pub fn set_virtual_accounts(&self, count: usize, page_size: Option<usize>) {
        accounts::set_generated(&self.inner.state, count, page_size);
    }

    /// Request counters: `requests`, `token_requests`, `paths`, `tokens_issued`, deliveries, faults.
    pub fn stats(&self) -> Value {
        self.inner.state.stats_json()
    }

    /// The next `times` requests matching `path` answer `status` without being processed.
    pub fn fail_next(&self, path: &str, status: u16, times: u32, retry_after: Option<u64>) {
        self.inner.state.faults.add(
            path,
            Action::Fail {
                status,
                retry_after,
            },
            times,
        );
    }

    /// The next request matching `path` loses its connection, before or after processing.
    pub fn drop_next(&self, path: &str, after_processing: bool) {
        self.inner
            .state
            .faults
            .add(path, Action::Drop { after_processing }, 1);
    }

    /// The next request matching `path` waits `seconds` (real time) before processing.
    pub fn delay_next(&self, path: &str, seconds: f64) {
        self.inner
            .state
            .faults
            .add(path, Action::Delay { seconds }, 1);
    }

    /// The faults that have not fired (all their uses), described as the calls that added them.
    pub fn unfired_faults(&self) -> Vec<String> {
        self.inner.state.faults.unfired()
    }

    /// Stops accepting and ends every connection. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn send_sync_clone<T: Send + Sync + Clone + 'static>() {}

    #[test]
    fn sandbox_is_shareable() {
        send_sync_clone::<Sandbox>();
        send_sync_clone::<SandboxError>();
    }

    #[test]
    fn defaults_and_base_urls() {
        let c = SandboxConfig::default();
        assert_eq!(
            (c.host, c.port, c.tls),
            (IpAddr::V4(Ipv4Addr::LOCALHOST), 0, false)
        );
        assert_eq!(c.body_timeout, Duration::from_secs(10));
        assert_eq!(c.idle_timeout, Duration::from_secs(60));
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080);
        assert_eq!(base_url_of(any, false), "http://127.0.0.1:8080");
        let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 9);
        assert_eq!(base_url_of(v6, true), "https://[::1]:9");
    }
}

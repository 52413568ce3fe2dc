//! Request counters for `Sandbox::stats`.
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::Method;
use serde_json::{json, Map, Value};

/// The routes counted one by one; anything else counts as "other".
pub const ROUTES: [(&str, &str); 11] = [
    ("POST", "/v1/oauth/token"),
    ("GET", "/v1/oauth/authorize"),
    ("POST", "/v1/oauth/login"),
    ("POST", "/v1/oauth/consent"),
    ("POST", "/v1/payments/quotes"),
    ("GET", "/v1/payments/quotes/{id}"),
    ("POST", "/v1/payments/beneficiaries"),
    ("POST", "/v1/payments/deals"),
    ("POST", "/v1/payments/deals/spot"),
    ("GET", "/v1/gca/virtual-accounts"),
    ("GET", "/openapi.json"),
];
const OTHER: usize = ROUTES.len();
const TOKEN: usize = 0;
const QUOTE_PREFIX: &str = "/v1/payments/quotes/";

/// Grant types counted when a token is issued.
pub const GRANTS: [&str; 3] = ["client_credentials", "authorization_code", "refresh_token"];

#[derive(Debug, Default)]
pub struct Stats {
    requests: AtomicU64,
    routes: [AtomicU64; ROUTES.len() + 1],
    issued: [AtomicU64; GRANTS.len()],
    connections: AtomicU64,
    open: AtomicU64,
    /// Requests the rate limit answered 429.
    rate_limited: AtomicU64,
}

fn route_index(method: &Method, path: &str) -> usize {
    let template = match path.strip_prefix(QUOTE_PREFIX) {
        Some(rest) if !rest.is_empty() && !rest.contains('/') => "/v1/payments/quotes/{id}",
        _ => path,
    };
    ROUTES
        .iter()
        .position(|(m, p)| *p == template && method.as_str() == *m)
        .unwrap_or(OTHER)
}

impl Stats {
    /// Counts one request (faulted ones included).
    pub fn request(&self, method: &Method, path: &str) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(c) = self.routes.get(route_index(method, path)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a request the rate limit refused (it was counted by `request` too).
    pub fn rate_limited(&self) {
        self.rate_limited.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a token issued by `grant`.
    pub fn issued(&self, grant: &str) {
        if let Some(i) = GRANTS.iter().position(|g| *g == grant) {
            if let Some(c) = self.issued.get(i) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Zeroes the counters (not the number of connections open now).
    pub fn reset(&self) {
        self.requests.store(0, Ordering::Relaxed);
        for c in self.routes.iter().chain(self.issued.iter()) {
            c.store(0, Ordering::Relaxed);
        }
        self.connections.store(0, Ordering::Relaxed);
        self.rate_limited.store(0, Ordering::Relaxed);
    }

    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn token_requests(&self) -> u64 {
        self.routes
            .get(TOKEN)
            .map(|c| c.load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    /// The counters as JSON (without deliveries and faults, which the caller adds).
    pub fn to_json(&self) -> Value {
        let mut paths = Map::new();
        for (i, (m, p)) in ROUTES.iter().enumerate() {
            let n = self
                .routes
                .get(i)
                .map(|c| c.load(Ordering::Relaxed))
                .unwrap_or(0);
            paths.insert(format!("{m} {p}"), json!(n));
        }
        let other = self
            .routes
            .get(OTHER)
            .map(|c| c.load(Ordering::Relaxed))
            .unwrap_or(0);
        paths.insert("other".to_owned(), json!(other));
        let mut grants = Map::new();
        for (i, g) in GRANTS.iter().enumerate() {
            let n = self
                .issued
                .get(i)
                .map(|c| c.load(Ordering::Relaxed))
                .unwrap_or(0);
            grants.insert((*g).to_owned(), json!(n));
        }
        json!({
            "requests": self.requests(),
            "token_requests": self.token_requests(),
            "paths": paths,
            "tokens_issued": grants,
            "connections": self.connections.load(Ordering::Relaxed),
            "open_connections": self.open.load(Ordering::Relaxed),
            "rate_limited": self.rate_limited.load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_template() {
        let s = Stats::default();
        s.request(&Method::GET, "/v1/payments/quotes/abc");
        s.request(&Method::POST, "/v1/oauth/token");
        s.request(&Method::GET, "/nope");
        s.issued("client_credentials");
        let j = s.to_json();
        assert_eq!(j["requests"], 3);
        assert_eq!(j["token_requests"], 1);
        assert_eq!(j["paths"]["GET /v1/payments/quotes/{id}"], 1);
        assert_eq!(j["paths"]["other"], 1);
        assert_eq!(j["tokens_issued"]["client_credentials"], 1);
    }
}

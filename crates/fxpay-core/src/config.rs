//! Client configuration: base URL rules, timeouts and the retry policy.
use crate::error::{Error, Result};
use crate::seconds::seconds_text;
use std::net::IpAddr;
use std::time::Duration;

/// How failed attempts are retried (see `crate::transport` for which ones may be).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// First backoff; doubled on each retry, with full jitter.
    pub backoff_base: Duration,
    /// Longest backoff between two attempts.
    pub backoff_max: Duration,
    /// Longest `Retry-After` honoured; a longer one is not waited for.
    pub(crate) retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            retry_after_cap: Duration::from_secs(30),
        }
    }
}

/// Everything a `crate::client::Client` needs.
#[derive(Clone)]
pub struct ClientConfig {
    /// `scheme://host[:port][/prefix]` with no trailing slash and no `/v1`.
    pub base_url: String,
    pub client_id: String,
    pub(crate) client_secret: String,
    /// Total time for one attempt, from connect to the last byte of the answer.
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    // Public for tests/transport_retry.rs, which shortens the backoffs.
    pub retry: RetryPolicy,
    /// Appended to `fxpay/<version>` in `User-Agent`.
    pub user_agent_suffix: Option<String>,
    /// PEM file of extra trusted CA certificates.
    pub ca_bundle: Option<String>,
    /// Records or replays every exchange (`crate::cassette`).
    pub cassette: Option<std::sync::Arc<crate::cassette::Cassette>>,
    /// The total time of one call: every attempt, backoff, `Retry-After` wait and token
    /// request inside it (`crate::deadline`). `None`: only `timeout` per attempt.
    pub deadline: Option<Duration>,
    /// `http://host:port` (or `https://`): this client's proxy, whatever the environment
    /// says. `None`: `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` are read as before.
    pub(crate) proxy: Option<String>,
    /// A TLS client identity: the PEM file of the certificate, and of its key (`None`: the
    /// certificate's file holds the key too).
    pub client_cert: Option<(String, Option<String>)>,
    /// Caps every request this client sends (`crate::rate_limit`); shared by every client
    /// given the same one. `None`: no cap, and no cost.
    pub rate_limit: Option<std::sync::Arc<crate::rate_limit::RateLimit>>,
    /// The largest answer body read (`Client(max_response_bytes=...)`); a larger one is a
    /// transport error.
    pub(crate) max_response_bytes: u64,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("client_id", &self.client_id)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    pub fn new(client_id: &str, client_secret: &str, base_url: &str) -> Result<Self> {
        if client_id.is_empty() {
            return Err(Error::config("client_id must not be empty"));
        }
        if client_secret.is_empty() {
            return Err(Error::config("client_secret must not be empty"));
        }
        Ok(ClientConfig {
            base_url: normalize_base_url(base_url)?,
            client_id: client_id.to_string(),
            client_secret: client_secret.to_string(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            user_agent_suffix: None,
            ca_bundle: None,
            cassette: None,
            deadline: None,
            proxy: None,
            client_cert: None,
            rate_limit: None,
            max_response_bytes: crate::http_client::DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Sets the per-attempt timeout in seconds; the connect timeout is the smaller of it and 10 s.
    pub fn with_timeout(mut self, seconds: f64) -> Result<Self> {
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
            return Err(Error::config(format!(
                "timeout must be a number of seconds greater than 0 and at most 86400 (a day), got {}",
                seconds_text(seconds)
            )));
        }
        self.timeout = Duration::from_secs_f64(seconds);
        self.connect_timeout = self.timeout.min(Duration::from_secs(10));
        Ok(self)
    }

    /// `proxy`: an `http://` or `https://` URL with a host (and no path beyond `/`).
    /// Its text in every error hides the password; a raw `@` in the user or password, or a
    /// space, tab or newline anywhere, is refused.
    pub fn with_proxy(mut self, proxy: &str) -> Result<Self> {
        crate::connector::check_proxy_url("proxy", proxy, false).map_err(Error::config)?;
        let url = url::Url::parse(proxy).map_err(|e| {
            Error::config(format!("proxy must be a URL like http://host:port: {e}"))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
            return Err(Error::config(
                "proxy must be an http:// or https:// URL with a host, like http://proxy.internal:3128",
            ));
        }
        if !(url.path().is_empty() || url.path() == "/") || url.query().is_some() {
            return Err(Error::config("proxy must not have a path or a query"));
        }
        self.proxy = Some(proxy.to_owned());
        Ok(self)
    }

    /// `deadline` in seconds: a finite number greater than 0 (at most a day).
    pub fn with_deadline(mut self, seconds: f64) -> Result<Self> {
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
            return Err(Error::config(format!(
                "deadline must be a number of seconds greater than 0 and at most 86400 (a day), got {}",
                seconds_text(seconds)
            )));
        }
        self.deadline = Some(Duration::from_secs_f64(seconds));
        Ok(self)
    }

    /// `max_response_bytes`: the largest answer body this client reads, greater than 0.
    pub fn with_max_response_bytes(mut self, n: i64) -> Result<Self> {
        self.max_response_bytes = u64::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::config(format!(
                "max_response_bytes must be a number of bytes greater than 0, got {n}"
            ))
        })?;
        Ok(self)
    }

    pub fn with_max_retries(mut self, n: i64) -> Result<Self> {
        self.retry.max_retries = u32::try_from(n).ok().filter(|n| *n <= 10).ok_or_else(|| {
            Error::config(format!("max_retries must be between 0 and 10, got {n}"))
        })?;
        Ok(self)
    }

    pub(crate) fn user_agent(&self) -> String {
        let base = concat!("fxpay/", env!("CARGO_PKG_VERSION"));
        match &self.user_agent_suffix {
            Some(s) if !s.is_empty() => format!("{base} {s}"),
            _ => base.to_string(),
        }
    }

    /// `<base_url>/v1<path>`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/v1{}", self.base_url, path)
    }
}

/// True for 127.0.0.0/8, `localhost` and `[::1]`.
pub(crate) fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => IpAddr::V4(*ip).is_loopback(),
        url::Host::Ipv6(ip) => IpAddr::V6(*ip).is_loopback(),
    }
}

/// Checks the base URL: `https://`, or `http://` on a loopback host; no query, fragment,
/// credentials or `/v1` suffix.
pub(crate) fn normalize_base_url(raw: &str) -> Result<String> {
    let url = url::Url::parse(raw.trim())
        .map_err(|e| Error::config(format!("base_url {raw:?} is not a URL: {e}")))?;
    let host = url
        .host()
        .ok_or_else(|| Error::config(format!("base_url {raw:?} has no host")))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback_host(&host) => {}
        "http" => {
            return Err(Error::config(format!(
                "base_url must use https:// (plain http is allowed only for loopback hosts), got {raw:?}"
            )))
        }
        other => {
            return Err(Error::config(format!(
                "base_url must use https://, got scheme {other:?}"
            )))
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::config("base_url must not carry credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::config("base_url must not have a query or fragment"));
    }
    let path = url.path().trim_end_matches('/');
    if path.ends_with("/v1") {
        return Err(Error::config(format!(
            "base_url is the service address without /v1, got {raw:?}"
        )));
    }
    let mut out = format!("{}://{}", url.scheme(), host);
    if let Some(port) = url.port() {
        out.push_str(&format!(":{port}"));
    }
    out.push_str(path);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_shown_as_written_or_in_exponent_form() {
        let shown = [
            (100_000.0, "100000"),
            (0.5, "0.5"),
            (-1.0, "-1"),
            (0.0, "0"),
            (1e300, "1e300"),
            (1e-9, "1e-9"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
        ];
        for (seconds, text) in shown {
            assert_eq!(seconds_text(seconds), text);
        }
    }

    #[test]
    fn accepts_https_and_loopback_http() {
        assert_eq!(
            normalize_base_url("https://api.example.com/")
                .ok()
                .as_deref(),
            Some("https://api.example.com")
        );
        assert_eq!(
            normalize_base_url("http://127.0.0.1:8080").ok().as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            normalize_base_url("http://127.5.0.1:1").ok().as_deref(),
            Some("http://127.5.0.1:1")
        );
        assert_eq!(
            normalize_base_url("http://localhost:9").ok().as_deref(),
            Some("http://localhost:9")
        );
        assert_eq!(
            normalize_base_url("http://[::1]:9").ok().as_deref(),
            Some("http://[::1]:9")
        );
        assert_eq!(
            normalize_base_url("https://gw.example.com/fx/")
                .ok()
                .as_deref(),
            Some("https://gw.example.com/fx")
        );
    }

    #[test]
    fn refuses_the_rest() {
        for bad in [
            "http://api.example.com",
            "http://10.0.0.1",
            "ftp://x.example",
            "api.example.com",
            "https://api.example.com/v1",
            "https://u:p@api.example.com",
            "https://api.example.com?x=1",
            "",
        ] {
            assert!(
                matches!(normalize_base_url(bad), Err(Error::Configuration(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let c = ClientConfig::new("id", "TOPSECRET", "https://a.example").expect("config");
        assert!(!format!("{c:?}").contains("TOPSECRET"));
    }
}

//! Where and how the sandbox listens.
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// Where the sandbox listens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SandboxConfig {
    /// Interface to bind; default 127.0.0.1.
    pub host: IpAddr,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Serve https with a CA and a certificate made at start (`Sandbox::ca_bundle`).
    pub tls: bool,
    /// With `tls`: require a client certificate issued by the sandbox's CA (mutual TLS).
    pub client_auth: bool,
    /// How long a request body may take to arrive in full once its headers are read
    /// (default [`DEFAULT_BODY_TIMEOUT`]). A body still incomplete then is answered 408 and
    /// its connection closed, so stalled uploads cannot hold the sandbox's connections.
    pub body_timeout: Duration,
    /// How long a connection may stay with no request in progress (kept alive after an
    /// answer, or silent since it opened) before the sandbox closes it (default
    /// [`DEFAULT_IDLE_TIMEOUT`]), so no client can hold the sandbox's sockets forever.
    pub idle_timeout: Duration,
    /// Requests per second beyond which the sandbox answers 429 with `Retry-After`
    /// (`http::rate_limit` says what is counted and how). `None` (the default): no limit.
    /// Finite and above 0 (`Sandbox::start` refuses anything else).
    pub rate_limit: Option<f64>,
}

/// The default [`SandboxConfig::body_timeout`]: 10 seconds.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The default [`SandboxConfig::idle_timeout`]: 60 seconds.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            tls: false,
            client_auth: false,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            rate_limit: None,
        }
    }
}

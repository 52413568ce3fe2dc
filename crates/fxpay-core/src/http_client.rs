//! One client's connection pool, and one exchange on it: hyper-util's pooled client (HTTP/1.1,
//! or HTTP/2 where the server chose it by ALPN) over [`crate::connector`]. An exchange sends a
//! request and reads its whole answer within a time limit.
//!
//! What this does not do, on purpose: follow redirects (the service answers none; a 3xx is
//! returned as it came), retry (`crate::transport` decides that), decompress (nothing asks
//! for compressed answers), or keep cookies.
use crate::connector::{self, Connector, TimedOut};
use bytes::Bytes;
use http::header::{HeaderMap, PROXY_AUTHORIZATION};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::sync::Arc;
use std::time::Duration;

/// How long an idle connection is kept for the next request.
const IDLE: Duration = Duration::from_secs(60);
/// The idle connections kept per host (enough for every task of a busy event loop).
const IDLE_PER_HOST: usize = 256;

/// One client's pooled connections, and what every request of it carries.
pub(crate) struct Pool {
    client: Client<Connector, Full<Bytes>>,
    proxies: Option<Arc<Matcher>>,
    /// Sent with every request that has none of its own (`Accept`, `User-Agent`).
    defaults: HeaderMap,
}

/// A whole answer.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// Why an exchange got no whole answer.
#[derive(Debug)]
pub(crate) enum Failed {
    /// The request could not be sent, or its answer did not come (`is_connect` tells whether
    /// no connection was made, so nothing was sent).
    Client(hyper_util::client::legacy::Error),
    /// The answer's head came, its body did not.
    Body(hyper::Error),
    /// The exchange's time limit passed.
    TimedOut,
}

impl Failed {
    /// No connection could be made: nothing of the request was sent.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, Failed::Client(e) if e.is_connect())
    }

    /// A time limit passed: the exchange's, the connect's, or the system's.
    pub(crate) fn is_timeout(&self) -> bool {
        if matches!(self, Failed::TimedOut) {
            return true;
        }
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            if e.is::<TimedOut>()
                || e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
                || e.downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_timeout)
            {
                return true;
            }
            source = e.source();
        }
        false
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Failed::Client(_) => "error sending request",
            Failed::Body(_) => "error reading the answer's body",
            Failed::TimedOut => "error sending request",
        })
    }
}

impl std::error::Error for Failed {
    /// What went wrong below: its chain is what `transport_error` shows.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failed::Client(e) => Some(e),
            Failed::Body(e) => Some(e),
            Failed::TimedOut => Some(&TimedOut),
        }
    }
}

impl Pool {
    /// A pool with the client's TLS configuration, proxy (None: the environment's), connect
    /// timeout and default headers.
    pub(crate) fn new(
        tls: Arc<rustls::ClientConfig>,
        proxy: Option<&str>,
        connect_timeout: Duration,
        defaults: HeaderMap,
    ) -> Result<Pool, String> {
        let proxies = connector::proxies(proxy)?;
        let connector = connector::connector(tls, proxies.clone(), connect_timeout);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .pool_max_idle_per_host(IDLE_PER_HOST)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        Ok(Pool {
            client,
            proxies,
            defaults,
        })
    }

    /// Sends one request and reads its whole answer, all within `limit`.
    pub(crate) async fn exchange(
        &self,
        method: Method,
        uri: Uri,
        mut headers: HeaderMap,
        body: Bytes,
        limit: Duration,
    ) -> Result<Answer, Failed> {
        for (name, value) in &self.defaults {
            if !headers.contains_key(name) {
                headers.insert(name.clone(), value.clone());
            }
        }
        if let Some(auth) = connector::forward_auth(self.proxies.as_deref(), &uri) {
            headers.insert(PROXY_AUTHORIZATION, auth);
        }
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        let exchange = async {
            let answer = self.client.request(req).await.map_err(Failed::Client)?;
            let (head, body) = answer.into_parts();
            let body = body.collect().await.map_err(Failed::Body)?.to_bytes();
            Ok(Answer {
                status: head.status.as_u16(),
                headers: head.headers,
                body,
            })
        };
        match tokio::time::timeout(limit, exchange).await {
            Ok(done) => done,
            Err(_) => Err(Failed::TimedOut),
        }
    }
}

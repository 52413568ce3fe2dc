//! One client's connection pool, and one exchange on it: hyper-util's pooled client (HTTP/1.1,
//! or HTTP/2 where the server chose it by ALPN) over [`crate::connector`]. An exchange sends a
//! request and reads its whole answer within a time limit.
//!
//! - **Creating calls take fresh connections.** A request that must not be sent twice
//!   (`fresh`: a POST that creates, a single-use grant) goes through a pool of its own whose
//!   connections are reused only within [`FRESH`] of their last answer. A keep-alive
//!   connection idle for longer may be one the server is closing (its idle timeout): a request
//!   written on it can meet the close and get no answer although the server read nothing, and
//!   such a request cannot be retried (nothing proves it unsent). Reads keep the shared pool.
//! - **What proves a request unsent** ([`Failed::is_unsent`]): no connection was made (or
//!   none had been handed the request when the time limit passed), or the HTTP/2 server
//!   refused its stream (`RST_STREAM` with `REFUSED_STREAM`) or announced with `GOAWAY` that it
//!   stopped before it (RFC 9113 section 8.7: neither was processed).
//! - **Limits.** An answer's body is read up to the client's `max_response_bytes` (its
//!   `Content-Length` is checked before any of it is read); its header section up to
//!   [`MAX_HEADER_BYTES`], over HTTP/1.1 and HTTP/2 alike.
//!
//! What this does not do, on purpose: follow redirects (the service answers none; a 3xx is
//! returned as it came), retry (`crate::transport` decides that), decompress (nothing asks
//! for compressed answers), or keep cookies.
use crate::connector::{self, Connector, TimedOut};
use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, CONTENT_LENGTH, PROXY_AUTHORIZATION};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::capture_connection;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::sync::Arc;
use std::time::Duration;

/// How long an idle connection is kept for the next request.
const IDLE: Duration = Duration::from_secs(60);
/// The idle connections kept per host (enough for every task of a busy event loop).
const IDLE_PER_HOST: usize = 256;
/// The longest a connection of the creating calls' pool may have been idle and still be
/// reused: a quarter of the shortest idle timeout servers and load balancers are set to in
/// practice (1 s, the least AWS's load balancers take; gunicorn's default is 2 s, uvicorn's
/// and Node's 5 s, nginx's 75 s, the sandbox's 60 s). Creates made together (a group commit
/// lets a batch of keyed calls go at once) share connections; at 5 ms, async 64 keyed creates
/// over TLS opened a new connection, and made a TLS handshake, for 0.4 of their calls
/// (bench/README.md, "The creating calls' connections").
pub(crate) const FRESH: Duration = Duration::from_millis(250);
/// The largest header section of an answer, HTTP/1.1 or HTTP/2: 64 KiB (hyper's own defaults
/// were about 400 KB for HTTP/1.1 and 16 KiB for HTTP/2). A larger one fails the exchange.
pub(crate) const MAX_HEADER_BYTES: usize = 64 * 1024;
/// `Client(max_response_bytes=...)`'s default: 8 MiB.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// One client's pooled connections, and what every request of it carries.
pub(crate) struct Pool {
    client: Client<Connector, Full<Bytes>>,
    /// The connections of requests that must not be sent twice: none idle past [`FRESH`]
    /// is reused.
    creating: Client<Connector, Full<Bytes>>,
    /// The largest body read; a larger answer fails the exchange.
    max_body: u64,
    proxies: Option<Arc<connector::Proxies>>,
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
    /// The exchange's time limit passed; `connected`: the request had been handed to a
    /// connection by then (always assumed unless the request was `fresh`).
    TimedOut { connected: bool },
    /// The answer's body is larger than `cap` (`declared`: its `Content-Length`).
    TooLarge { cap: u64, declared: Option<u64> },
    /// The answer's header section is larger than [`MAX_HEADER_BYTES`] (`size`, counted as
    /// HTTP/2 does: each header's name and value and 32 bytes).
    HeadTooLarge { size: usize },
}

impl Failed {
    /// Nothing of the request was processed: no connection was made (or none had the
    /// request when the time ran out), or an HTTP/2 server refused its stream or went away
    /// before it (see the module's notes).
    pub(crate) fn is_unsent(&self) -> bool {
        match self {
            Failed::Client(e) if e.is_connect() => true,
            Failed::Client(e) => {
                let mut source = std::error::Error::source(e);
                while let Some(s) = source {
                    if let Some(h2) = s.downcast_ref::<h2::Error>() {
                        return h2_unprocessed(h2);
                    }
                    source = s.source();
                }
                false
            }
            Failed::TimedOut { connected } => !connected,
            Failed::Body(_) | Failed::TooLarge { .. } | Failed::HeadTooLarge { .. } => false,
        }
    }

    /// The answer was larger than the client takes: trying again would get the same.
    pub(crate) fn is_too_large(&self) -> bool {
        matches!(self, Failed::TooLarge { .. } | Failed::HeadTooLarge { .. })
    }

    /// Trying again would fail the same way: an answer too large, or a proxy's 407.
    pub(crate) fn is_final(&self) -> bool {
        if self.is_too_large() {
            return true;
        }
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            if e.is::<connector::ProxyAuthRequired>() {
                return true;
            }
            source = e.source();
        }
        false
    }

    /// A time limit passed: the exchange's, the connect's, or the system's.
    pub(crate) fn is_timeout(&self) -> bool {
        if matches!(self, Failed::TimedOut { .. }) {
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
        match self {
            Failed::Client(_) | Failed::TimedOut { .. } => f.write_str("error sending request"),
            Failed::Body(_) => f.write_str("error reading the answer's body"),
            Failed::HeadTooLarge { size } => write!(
                f,
                "the answer's header section ({size} bytes, counted as HTTP/2 counts it) is \
                 too large: fxpay reads at most {MAX_HEADER_BYTES} bytes of headers, over \
                 HTTP/1.1 and HTTP/2 alike"
            ),
            Failed::TooLarge { cap, declared } => {
                match declared {
                    Some(n) => write!(
                        f,
                        "the answer's body of {n} bytes (its Content-Length) is larger than \
                         the client's max_response_bytes of {cap} bytes and was not read"
                    )?,
                    None => write!(
                        f,
                        "the answer's body is larger than the client's max_response_bytes of \
                         {cap} bytes: reading it stopped there"
                    )?,
                }
                f.write_str(
                    " (give Client(max_response_bytes=...) a larger value if such answers are \
                     expected)",
                )
            }
        }
    }
}

impl std::error::Error for Failed {
    /// What went wrong below: its chain is what `transport_error` shows.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failed::Client(e) => Some(e),
            Failed::Body(e) => Some(e),
            Failed::TimedOut { .. } => Some(&TimedOut),
            Failed::TooLarge { .. } | Failed::HeadTooLarge { .. } => None,
        }
    }
}

/// An HTTP/2 error that proves its request was not processed: the server refused the stream
/// (`REFUSED_STREAM`), or its `GOAWAY` named a last stream below this one (h2 fails only those
/// streams with the `GOAWAY`'s error; the streams it took end otherwise).
fn h2_unprocessed(e: &h2::Error) -> bool {
    e.is_remote()
        && (e.is_go_away() || (e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM)))
}

impl Pool {
    /// A pool with the client's TLS configuration, proxy (None: the environment's), connect
    /// timeout, default headers and largest answer body.
    pub(crate) fn new(
        tls: Arc<rustls::ClientConfig>,
        proxy: Option<&str>,
        connect_timeout: Duration,
        defaults: HeaderMap,
        max_body: u64,
    ) -> Result<Pool, String> {
        let proxies = connector::proxies(proxy)?;
        let user_agent = defaults.get(http::header::USER_AGENT).cloned();
        let connector = connector::connector(tls, proxies.clone(), connect_timeout, user_agent);
        let client = |idle: Duration| {
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(idle)
                .pool_max_idle_per_host(IDLE_PER_HOST)
                .http1_max_buf_size(MAX_HEADER_BYTES)
                .http2_max_header_list_size(MAX_HEADER_BYTES as u32)
                .pool_timer(TokioTimer::new())
                .timer(TokioTimer::new())
                .build(connector.clone())
        };
        Ok(Pool {
            client: client(IDLE),
            creating: client(FRESH),
            max_body,
            proxies,
            defaults,
        })
    }

    /// Sends one request and reads its whole answer, all within `limit`. `fresh`: the request
    /// must not be sent twice, and goes on a fresh connection (see the module's notes).
    pub(crate) async fn exchange(
        &self,
        method: Method,
        uri: Uri,
        mut headers: HeaderMap,
        body: Bytes,
        limit: Duration,
        fresh: bool,
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
        // Whether a connection had the request when the time ran out: asked only where it
        // decides something (a request that must not be sent twice).
        let captured = fresh.then(|| capture_connection(&mut req));
        let client = if fresh { &self.creating } else { &self.client };
        let exchange = async {
            let answer = client.request(req).await.map_err(Failed::Client)?;
            let (head, body) = answer.into_parts();
            // One rule for both protocols: HTTP/2's accounting (RFC 9113 section 6.5.2).
            // hyper's own limits (its HTTP/1.1 read buffer, h2's header list size) bound the
            // memory; this makes the limit the same number whichever was spoken.
            let size: usize = head
                .headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 32)
                .sum();
            if size > MAX_HEADER_BYTES {
                return Err(Failed::HeadTooLarge { size });
            }
            let body = read_body(body, &head.headers, self.max_body).await?;
            Ok(Answer {
                status: head.status.as_u16(),
                headers: head.headers,
                body,
            })
        };
        match tokio::time::timeout(limit, exchange).await {
            Ok(done) => done,
            Err(_) => Err(Failed::TimedOut {
                connected: captured
                    .as_ref()
                    .is_none_or(|c| c.connection_metadata().is_some()),
            }),
        }
    }
}

/// An answer's whole body, if it is no larger than `cap`: a larger `Content-Length` fails
/// before any of it is read, and a body without one fails as soon as it passes `cap`.
async fn read_body(
    mut body: hyper::body::Incoming,
    headers: &HeaderMap,
    cap: u64,
) -> Result<Bytes, Failed> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > cap) {
        return Err(Failed::TooLarge {
            cap,
            declared: Some(n),
        });
    }
    // One chunk (the usual answer) is kept as it came; more are joined.
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut total: u64 = 0;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Failed::Body)?.into_data() else {
            continue; // trailers
        };
        total += data.len() as u64;
        if total > cap {
            return Err(Failed::TooLarge {
                cap,
                declared: None,
            });
        }
        match (&mut joined, first.take()) {
            (Some(all), _) => all.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(one)) => {
                let size = declared.unwrap_or(0).max(total);
                let mut all = BytesMut::with_capacity(usize::try_from(size).unwrap_or(0));
                all.extend_from_slice(&one);
                all.extend_from_slice(&data);
                joined = Some(all);
            }
        }
    }
    Ok(match joined {
        Some(all) => all.freeze(),
        None => first.unwrap_or_default(),
    })
}

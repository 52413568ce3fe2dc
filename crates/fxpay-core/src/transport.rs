//! The HTTP layer: one connection pool per `Client` (`crate::http_client`), the retry rules,
//! and the mapping of error answers onto `Error`.
//!
//! Retry rules (the policy a payments client needs):
//! - `Retry::Safe` requests (GETs and client-credentials token requests) are retried on
//!   connection errors, timeouts, 429 and 502/503/504 (each honouring a `Retry-After` up to a cap).
//! - `Retry::CreateOnce` requests (POSTs that create something, and the authorization-code
//!   and refresh grants, which spend a single-use code or a rotating refresh token) are
//!   retried only when nothing of them was processed: the connection could not be opened, or
//!   an HTTP/2 server refused the stream or went away before it (`Failed::is_unsent`). They
//!   go out on fresh connections only (`crate::http_client`). Anything later is final.
//! - An answer larger than the client's `max_response_bytes` is final too.
//! - A 401 is handled one level up (`crate::client`): renew the token and replay once.
use crate::config::ClientConfig;
use crate::error::{Error, Result};
pub(crate) use crate::headers::header_pairs;
use crate::http_client::{Failed, Pool};
use crate::models::FieldError;
use crate::runtime::fork::PerProcess;
use bytes::Bytes;
use http::header::{HeaderMap, ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
pub(crate) use http::header::{HeaderName, HeaderValue};
use http::{Method, Uri};
use rustls::pki_types::CertificateDer;
use std::time::{Duration, Instant};

/// Whether a request may be sent again after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reading, or asking for a client-credentials token: safe to repeat.
    Safe,
    /// Creating something, or spending a single-use credential (an authorization code, a
    /// rotating refresh token): repeat only if nothing was sent.
    CreateOnce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    None,
    Json,
    Form,
}

/// One logical request, sent once or more.
// Public for the core's own loopback tests only: tests/transport_retry.rs sends requests through a
// `Transport` of its own (the binding only reads a transport's configuration).
pub struct Request<'a> {
    pub(crate) method: Method,
    pub(crate) path: &'a str,
    pub(crate) body_kind: Body,
    pub(crate) body: Bytes,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) retry: Retry,
}

impl<'a> Request<'a> {
    pub fn get(path: &'a str) -> Self {
        Request {
            method: Method::GET,
            path,
            body_kind: Body::None,
            body: Bytes::new(),
            headers: Vec::new(),
            retry: Retry::Safe,
        }
    }

    pub fn post_json(path: &'a str, body: Vec<u8>) -> Self {
        Request {
            method: Method::POST,
            path,
            body_kind: Body::Json,
            body: Bytes::from(body),
            headers: Vec::new(),
            retry: Retry::CreateOnce,
        }
    }

    pub(crate) fn post_form(path: &'a str, body: String) -> Self {
        Request {
            method: Method::POST,
            path,
            body_kind: Body::Form,
            body: Bytes::from(body),
            headers: Vec::new(),
            retry: Retry::Safe,
        }
    }
}

/// A complete answer.
#[derive(Debug)]
pub struct Response {
    // Public for tests/transport_retry.rs, which reads what `Transport::send` returns.
    pub status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Why an answer that would have been retried was not: the wait its `Retry-After` (or
    /// the backoff) asked for would end past the call's deadline. Its error says so.
    pub(crate) cut: Option<String>,
}

/// What happened on one attempt, for DEBUG logging. Carries no secret.
#[derive(Debug, Clone)]
pub struct AttemptLog<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub attempt: u32,
    pub status: Option<u16>,
    pub duration: Duration,
    pub error: Option<String>,
    /// The error of an attempt that got no answer.
    pub(crate) failure: Option<&'a Error>,
    pub retry_in: Option<Duration>,
    /// The answer's request id (`x-request-id`, else `request-id`).
    pub request_id: Option<&'a str>,
}

/// Where one attempt is about to go, for tracing. Carries no secret.
#[derive(Debug, Clone)]
pub struct AttemptStart<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) url: &'a str,
    /// `url`, when the transport has it parsed already.
    pub(crate) parsed: Option<&'a url::Url>,
    pub(crate) attempt: u32,
}

/// Headers an observer adds to one attempt (`traceparent`, `baggage`, ...).
pub type ExtraHeaders = Vec<(HeaderName, HeaderValue)>;

/// Receives one `AttemptLog` per attempt; tracing also sees each attempt start.
pub trait Observer: Send + Sync {
    /// Called as an attempt starts; the headers returned are sent with it.
    fn start(&self, _start: &AttemptStart<'_>) -> ExtraHeaders {
        Vec::new()
    }
    fn attempt(&self, log: &AttemptLog<'_>);
}

/// A request's URL: parsed already, or text to parse (and refuse) when it is sent.
enum Target {
    Parsed(url::Url),
    Text(String),
}

impl Target {
    fn as_str(&self) -> &str {
        match self {
            Target::Parsed(u) => u.as_str(),
            Target::Text(t) => t,
        }
    }

    fn parsed(&self) -> Option<&url::Url> {
        match self {
            Target::Parsed(u) => Some(u),
            Target::Text(_) => None,
        }
    }

    /// The URL as a request's target. Text is parsed as a URL first (which escapes what
    /// needs escaping, such as a space in a query); one that is still no valid target is an
    /// error of the request, sent nowhere.
    fn uri(&self) -> Result<Uri> {
        let parsed;
        let text = match self {
            Target::Parsed(u) => u.as_str(),
            Target::Text(t) => {
                parsed = url::Url::parse(t).map_err(|e| unusable_url(t, &e))?;
                parsed.as_str()
            }
        };
        Uri::try_from(text).map_err(|e| unusable_url(text, &e))
    }
}

/// The error of a request whose URL cannot be sent.
fn unusable_url(url: &str, e: &dyn std::fmt::Display) -> Error {
    Error::Transport {
        message: format!("the request's URL {url:?} is not one that can be sent: {e}"),
        timeout: false,
        unsent: true,
    }
}

pub struct Transport {
    /// The connection pool of the current process: made anew on first use in a forked
    /// child, whose copy's sockets, tasks and timers belong to the parent's runtime. Shared
    /// with the transports derived by `with_config` (`Client.with_options`).
    pools: std::sync::Arc<PerProcess<Pool>>,
    /// The extra root certificates of `ca_bundle`, read once.
    roots: Vec<CertificateDer<'static>>,
    /// The TLS client identity of `client_cert`/`client_key`, read once.
    identity: Option<crate::tls::Identity>,
    config: ClientConfig,
    /// `<base_url>/v1`, parsed once: a request's URL is this with its path appended, so the
    /// host is not parsed (and IDNA-checked) again on every request.
    api_base: Option<url::Url>,
}

impl Transport {
    // Public for tests/transport_retry.rs and tests/support/token_server.rs (as `send`).
    pub fn new(config: ClientConfig) -> Result<Self> {
        let roots = match &config.ca_bundle {
            Some(path) => crate::tls::read_roots(path)?,
            None => Vec::new(),
        };
        let identity = match &config.client_cert {
            Some((cert, key)) => Some(crate::tls::read_identity(cert, key.as_deref())?),
            None => None,
        };
        let pools = std::sync::Arc::new(PerProcess::new(build_http(
            &config,
            &roots,
            identity.as_ref(),
        )?));
        let api_base = url::Url::parse(&config.url("")).ok();
        Ok(Transport {
            pools,
            roots,
            identity,
            config,
            api_base,
        })
    }

    /// A transport over the same connection pools with other per-call settings (`timeout`,
    /// `retry`, `deadline`); the base URL, TLS settings and cassette stay this one's.
    pub(crate) fn with_config(&self, config: ClientConfig) -> Transport {
        Transport {
            pools: self.pools.clone(),
            roots: self.roots.clone(),
            identity: self.identity.clone(),
            config,
            api_base: self.api_base.clone(),
        }
    }

    /// This process's connection pool.
    fn pool(&self) -> std::result::Result<&Pool, Error> {
        self.pools
            .get_or_try_make(|| build_http(&self.config, &self.roots, self.identity.as_ref()))
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The URL of `path` (which starts with `/`, below `/v1`).
    fn url(&self, path: &str) -> Target {
        if let Some(base) = &self.api_base {
            // Only a plain path is appended as is; anything with a query or fragment (or
            // that would need escaping) is parsed whole.
            if path.starts_with('/')
                && path
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b))
            {
                let mut url = base.clone();
                url.set_path(&[base.path().trim_end_matches('/'), path].concat());
                return Target::Parsed(url);
            }
        }
        Target::Text(self.config.url(path))
    }

    /// Sends `req` (see `send_live`), through the client's cassette if it has one.
    pub async fn send(
        &self,
        req: &Request<'_>,
        bearer: Option<&str>,
        observer: Option<&dyn Observer>,
    ) -> Result<Response> {
        // Boxed: the live exchange (hyper's futures, the retries) is kilobytes; left
        // inline, it would make every caller's future that large, and each move of one (into
        // a task, a wrapper, a box) copies it whole (tests/future_sizes.rs).
        // A cassette's ways are boxed too, for the same reason: most clients have none.
        let live = Box::pin(self.send_live(req, bearer, observer));
        match &self.config.cassette {
            Some(cassette) if cassette.mode() == crate::cassette::Mode::Replay => {
                let replay = cassette.around(req, bearer, live);
                let result = Box::pin(self.replayed(req, observer, replay)).await;
                if let Ok(r) = &result {
                    crate::raw::record(r.status, &r.headers, 1);
                }
                result
            }
            Some(cassette) => Box::pin(cassette.around(req, bearer, live)).await,
            None => live.await,
        }
    }

    /// A replayed exchange is still one attempt of the call: `observer` sees it start and
    /// end (a span, a DEBUG line), as it would see the request on the network. No header
    /// it returns goes anywhere.
    async fn replayed(
        &self,
        req: &Request<'_>,
        observer: Option<&dyn Observer>,
        replay: impl std::future::Future<Output = Result<Response>>,
    ) -> Result<Response> {
        let Some(obs) = observer else {
            return replay.await;
        };
        let url = self.url(req.path);
        let started = Instant::now();
        let _ = obs.start(&AttemptStart {
            method: req.method.as_str(),
            path: req.path,
            url: url.as_str(),
            parsed: url.parsed(),
            attempt: 1,
        });
        let result = replay.await;
        obs.attempt(&AttemptLog {
            method: req.method.as_str(),
            path: req.path,
            attempt: 1,
            status: result.as_ref().ok().map(|r| r.status),
            duration: started.elapsed(),
            error: result.as_ref().err().map(|e| e.to_string()),
            failure: result.as_ref().err(),
            retry_in: None,
            request_id: result.as_ref().ok().and_then(|r| request_id(&r.headers)),
        });
        result
    }

    /// Sends `req`, retrying as the rules above allow, and returns the last answer whatever
    /// its status. Connection failures that may not be retried become `Error::Transport`.
    async fn send_live(
        &self,
        req: &Request<'_>,
        bearer: Option<&str>,
        observer: Option<&dyn Observer>,
    ) -> Result<Response> {
        let url = self.url(req.path);
        let uri = url.uri()?;
        let http = self.pool()?;
        let policy = &self.config.retry;
        let end = crate::deadline::ends_at();
        let mut attempt: u32 = 0;
        loop {
            if let Some(rl) = &self.config.rate_limit {
                // Every attempt takes a turn, retries included (boxed: most clients have no
                // rate limit, and their futures stay as small as they were).
                Box::pin(rl.acquire(end, req.method.as_str(), uri.path())).await?;
            }
            attempt += 1;
            let started = Instant::now();
            // What is left of the call's deadline bounds this attempt.
            let timeout = match end {
                Some(end) => {
                    let left = end.saturating_duration_since(started);
                    if left.is_zero() {
                        return Err(crate::deadline::passed_while(
                            &format!("before {} {} was sent", req.method, uri.path()),
                            true,
                        ));
                    }
                    self.config.timeout.min(left)
                }
                None => self.config.timeout,
            };
            let extra = match observer {
                Some(obs) => obs.start(&AttemptStart {
                    method: req.method.as_str(),
                    path: req.path,
                    url: url.as_str(),
                    parsed: url.parsed(),
                    attempt,
                }),
                None => Vec::new(),
            };
            let headers = request_headers(req, bearer, extra)?;
            let outcome = self.attempt(http, uri.clone(), req, headers, timeout).await;
            let may_retry = attempt <= policy.max_retries;
            let (retry_in, result) = match outcome {
                Ok(resp) => {
                    let wait = if may_retry && req.retry == Retry::Safe {
                        retry_wait(resp.status, &resp.headers, attempt, policy)
                    } else {
                        None
                    };
                    (wait, Ok(resp))
                }
                Err(e) => {
                    let nothing_sent = e.is_unsent();
                    let timed_out = e.is_timeout();
                    // An answer too large for the client, or a proxy's 407, would come back
                    // the same: not retried.
                    let wait =
                        (may_retry && !e.is_final() && (nothing_sent || req.retry == Retry::Safe))
                            .then(|| backoff(attempt, policy));
                    let asked = self.identity.is_none() && crate::tls::client_cert_asked();
                    let mut err = transport_error(&e, timed_out, nothing_sent, asked);
                    if timed_out {
                        let request = format!("{} {}", req.method, uri.path());
                        err = timed_out_error(err, &request, attempt, timeout, self.config.timeout);
                    }
                    (wait, Err(err))
                }
            };
            // No wait runs past the deadline: the answer (or error) in hand is the result,
            // and says that the deadline cut its retries.
            let (retry_in, result) = match retry_in {
                Some(wait) if end.is_some_and(|end| Instant::now() + wait >= end) => {
                    // A deadline already reached needs no note: the error says it ran out.
                    let reached = end.is_some_and(|end| Instant::now() >= end);
                    let result = if reached {
                        result
                    } else {
                        cut_by_deadline(result, wait, attempt)
                    };
                    (None, result)
                }
                other => (other, result),
            };
            if let Some(obs) = observer {
                obs.attempt(&AttemptLog {
                    method: req.method.as_str(),
                    path: req.path,
                    attempt,
                    status: result.as_ref().ok().map(|r| r.status),
                    duration: started.elapsed(),
                    error: result.as_ref().err().map(|e| e.to_string()),
                    failure: result.as_ref().err(),
                    retry_in,
                    request_id: result.as_ref().ok().and_then(|r| request_id(&r.headers)),
                });
            }
            match retry_in {
                Some(wait) => tokio::time::sleep(wait).await,
                None => {
                    if let Ok(r) = &result {
                        crate::raw::record(r.status, &r.headers, attempt);
                    }
                    return result;
                }
            }
        }
    }

    /// One try over `http`. `timeout` is the client's, or what is left of the call's deadline.
    async fn attempt(
        &self,
        http: &Pool,
        uri: Uri,
        req: &Request<'_>,
        headers: HeaderMap,
        timeout: Duration,
    ) -> std::result::Result<Response, Failed> {
        let answer = http
            .exchange(
                req.method.clone(),
                uri,
                headers,
                req.body.clone(),
                timeout,
                req.retry == Retry::CreateOnce,
            )
            .await?;
        Ok(Response {
            status: answer.status,
            headers: answer.headers,
            body: answer.body,
            cut: None,
        })
    }
}

/// An attempt's headers: the bearer token, the body's type, the request's own and what an
/// observer added. A value that is no valid header (a control character) is an error of the
/// call, and nothing is sent.
fn request_headers(
    req: &Request<'_>,
    bearer: Option<&str>,
    extra: ExtraHeaders,
) -> Result<HeaderMap> {
    let invalid = |name: &str| Error::Transport {
        message: format!(
            "{} {} was not sent: its {name} header is not valid header text",
            req.method, req.path
        ),
        timeout: false,
        unsent: true,
    };
    let mut headers = HeaderMap::with_capacity(2 + req.headers.len() + extra.len());
    if let Some(token) = bearer {
        let v = HeaderValue::try_from(["Bearer ", token].concat())
            .map_err(|_| invalid("Authorization"))?;
        headers.insert(AUTHORIZATION, v);
    }
    match req.body_kind {
        Body::None => {}
        Body::Json => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        Body::Form => {
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-www-form-urlencoded"),
            );
        }
    }
    for (name, value) in &req.headers {
        let v = HeaderValue::try_from(value.as_str()).map_err(|_| invalid(name))?;
        headers.append(*name, v);
    }
    for (name, value) in extra {
        headers.append(name, value);
    }
    Ok(headers)
}

/// One connection pool with the client's settings.
fn build_http(
    config: &ClientConfig,
    roots: &[CertificateDer<'static>],
    identity: Option<&crate::tls::Identity>,
) -> Result<Pool> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    // Printable ASCII only, as the error says: a tab or a byte past ASCII (which HTTP/1.1
    // would pass as obs-text) is refused as well as a control character.
    let ua = config.user_agent();
    if !ua.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return Err(Error::config(
            "user_agent must be printable ASCII (letters, digits, punctuation and spaces; \
             no tab, newline or accented letter)",
        ));
    }
    let ua = HeaderValue::from_str(&ua)
        .map_err(|_| Error::config("user_agent must be printable ASCII"))?;
    headers.insert(USER_AGENT, ua);
    // The process's shared TLS configuration (crate::tls): the system's roots are parsed
    // once, and pools resume each other's TLS sessions.
    let tls = match identity {
        Some(id) => crate::tls::client_config_with_identity(roots, id)?,
        None => crate::tls::client_config(roots)?,
    };
    // A proxy of its own: the environment's (HTTPS_PROXY, NO_PROXY...) is not read.
    Pool::new(
        tls,
        config.proxy.as_deref(),
        config.connect_timeout,
        headers,
        config.max_response_bytes,
    )
    .map_err(Error::config)
}

/// A timed-out attempt's error, naming the request (method and whole path), the limit that
/// ran out (the client's `timeout`, `per_attempt`, or what was left of the call's deadline,
/// `timeout`, shorter) and the attempts made (this one was the `attempt`th).
fn timed_out_error(
    e: Error,
    request: &str,
    attempt: u32,
    timeout: Duration,
    per_attempt: Duration,
) -> Error {
    let Error::Transport {
        message,
        timeout: t,
        unsent,
    } = e
    else {
        return e;
    };
    let limit = if timeout < per_attempt {
        match crate::deadline::limit() {
            Some(l) if l.saturating_sub(timeout) < Duration::from_millis(1) => {
                format!("the call's deadline of {:.3} s", l.as_secs_f64())
            }
            Some(l) => format!(
                "the call's deadline of {:.3} s (the {:.3} s of it left)",
                l.as_secs_f64(),
                timeout.as_secs_f64()
            ),
            None => format!("{:.3} s", timeout.as_secs_f64()),
        }
    } else {
        format!("the client's timeout of {:.3} s", timeout.as_secs_f64())
    };
    let tries = if attempt == 1 {
        "1 attempt made".to_string()
    } else {
        format!("{attempt} attempts made")
    };
    Error::Transport {
        message: format!("{request} got no answer within {limit} ({tries}); {message}"),
        timeout: t,
        unsent,
    }
}

/// `result`, which would have been retried after `wait` had the call's deadline allowed it,
/// saying so.
fn cut_by_deadline(result: Result<Response>, wait: Duration, attempt: u32) -> Result<Response> {
    let limit = crate::deadline::limit()
        .map(|l| format!(" of {:.3} s", l.as_secs_f64()))
        .unwrap_or_default();
    let tries = if attempt == 1 {
        "1 attempt".to_string()
    } else {
        format!("{attempt} attempts")
    };
    let note = format!(
        "not retried after {tries}: the wait of {:.3} s before the next would end past the \
         call's deadline{limit}",
        wait.as_secs_f64()
    );
    match result {
        Ok(mut r) => {
            r.cut = Some(note);
            Ok(r)
        }
        Err(Error::Transport {
            message,
            timeout,
            unsent,
        }) => Err(Error::Transport {
            message: format!("{message} ({note})"),
            timeout,
            unsent,
        }),
        Err(e) => Err(e),
    }
}

/// `cert_asked`: a server asked this client, which has no certificate, for one (see
/// `crate::tls::client_cert_asked`).
fn transport_error(e: &Failed, timeout: bool, nothing_sent: bool, cert_asked: bool) -> Error {
    // The chain below names hosts and causes, never headers or bodies: no secret leaks here.
    if e.is_too_large() {
        return Error::Transport {
            message: e.to_string(),
            timeout: false,
            unsent: false,
        };
    }
    let mut message = if timeout {
        "the request timed out".to_string()
    } else if nothing_sent {
        "could not connect to the service".to_string()
    } else {
        "the connection failed before a complete answer arrived".to_string()
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut detail = Vec::new();
    while let Some(s) = source {
        detail.push(s.to_string());
        source = s.source();
    }
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail.join(": "));
    }
    if detail.iter().any(|d| d.contains("CertificateRequired")) {
        message.push_str(
            " (the server asked for a client certificate in the TLS handshake: give \
             Client(client_cert=..., client_key=...))",
        );
    } else if cert_asked && !timeout {
        message.push_str(
            " (a server asked this client for a client certificate in a TLS handshake, and \
             it has none: give Client(client_cert=..., client_key=...) if that server \
             requires one)",
        );
    }
    Error::Transport {
        message,
        timeout,
        unsent: nothing_sent,
    }
}

/// The wait before retrying a Safe request that got `status`, or None if it is final.
/// A `Retry-After` on any retried status is honoured (capped): RFC 9110 names it for 503 as
/// well as 429, and a gateway may send it with 502 or 504.
fn retry_wait(
    status: u16,
    headers: &HeaderMap,
    attempt: u32,
    policy: &crate::config::RetryPolicy,
) -> Option<Duration> {
    if !matches!(status, 429 | 502..=504) {
        return None;
    }
    Some(match retry_after(headers) {
        Some(secs) => Duration::from_secs(secs).min(policy.retry_after_cap),
        None => backoff(attempt, policy),
    })
}

/// `Retry-After` in whole seconds (the delta-seconds form).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<u64> {
    headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}

/// Exponential backoff with equal jitter: half the step plus a random part of the other half.
pub(crate) fn backoff(attempt: u32, policy: &crate::config::RetryPolicy) -> Duration {
    let step = policy
        .backoff_base
        .saturating_mul(1u32 << (attempt.saturating_sub(1)).min(16))
        .min(policy.backoff_max);
    let mut buf = [0u8; 8];
    let r = match getrandom::fill(&mut buf) {
        Ok(()) => u64::from_le_bytes(buf) as f64 / u64::MAX as f64,
        Err(_) => 0.5,
    };
    step / 2 + step.mul_f64(r / 2.0)
}

/// Turns a non-2xx answer into the matching `Error::Api`.
pub(crate) fn api_error(resp: &Response) -> Error {
    let body = String::from_utf8_lossy(&resp.body).into_owned();
    let errors: Vec<FieldError> = serde_json::from_slice::<serde_json::Value>(&resp.body)
        .ok()
        .and_then(|v| v.get("errors").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let first = errors
        .first()
        .map(|e| match &e.field_name {
            Some(f) if !f.is_empty() => format!(": {} ({}: {})", e.message, f, e.error_code),
            _ => format!(": {} ({})", e.message, e.error_code),
        })
        .unwrap_or_default();
    let more = if errors.len() > 1 {
        format!(" and {} more", errors.len() - 1)
    } else {
        String::new()
    };
    let cut = resp
        .cut
        .as_deref()
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    let id = request_id(&resp.headers)
        .map(|id| format!(" (request id {id})"))
        .unwrap_or_default();
    Error::Api {
        status: resp.status,
        message: format!("HTTP {}{first}{more}{cut}{id}", resp.status),
        errors,
        body,
        retry_after: retry_after(&resp.headers),
        headers: header_pairs(&resp.headers),
    }
}

/// The request id of an answer: `x-request-id`, else `request-id`.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<&str> {
    ["x-request-id", "request-id"]
        .iter()
        .find_map(|n| headers.get(*n)?.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RetryPolicy;

    #[test]
    fn urls_are_the_base_with_the_path() {
        for (base, path, want) in [
            (
                "http://127.0.0.1:8080",
                "/payments/quotes/3f2b-x_1",
                "http://127.0.0.1:8080/v1/payments/quotes/3f2b-x_1",
            ),
            (
                "https://api.example.com/prefix/",
                "/oauth/token",
                "https://api.example.com/prefix/v1/oauth/token",
            ),
            (
                "http://localhost:9",
                "/gca/virtual-accounts?page=2",
                "http://localhost:9/v1/gca/virtual-accounts?page=2",
            ),
        ] {
            let cfg = ClientConfig::new("id", "secret", base).expect("config");
            let expected = cfg.url(path);
            let t = Transport::new(cfg).expect("transport");
            let got = match t.url(path) {
                Target::Parsed(u) => u.to_string(),
                Target::Text(s) => s,
            };
            assert_eq!(got, want);
            assert_eq!(
                url::Url::parse(&expected).map(|u| u.to_string()).ok(),
                Some(got)
            );
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        for attempt in 1..20 {
            let b = backoff(attempt, &p);
            let step = p
                .backoff_base
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(p.backoff_max);
            assert!(b >= step / 2 && b <= step, "{attempt}: {b:?}");
        }
    }

    #[test]
    fn which_statuses_are_retried() {
        let p = RetryPolicy::default();
        let mut h = HeaderMap::new();
        assert!(retry_wait(503, &h, 1, &p).is_some());
        assert!(retry_wait(502, &h, 1, &p).is_some());
        assert!(retry_wait(500, &h, 1, &p).is_none());
        assert!(retry_wait(400, &h, 1, &p).is_none());
        h.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_wait(429, &h, 1, &p), Some(Duration::from_secs(2)));
        h.insert(RETRY_AFTER, HeaderValue::from_static("3600"));
        assert_eq!(retry_wait(429, &h, 1, &p), Some(p.retry_after_cap));
        h.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        for status in [502, 503, 504] {
            assert_eq!(retry_wait(status, &h, 1, &p), Some(Duration::from_secs(7)));
        }
        assert!(retry_wait(500, &h, 1, &p).is_none());
    }

    #[test]
    fn error_bodies_become_field_errors() {
        let resp = Response {
            status: 400,
            headers: HeaderMap::new(),
            cut: None,
            body: Bytes::from_static(br#"{"errors":[{"errorCode":"validation:beneficiary:1004","fieldName":"PaymentReason","message":"must not be empty"}]}"#),
        };
        match api_error(&resp) {
            Error::Api {
                status,
                errors,
                message,
                ..
            } => {
                assert_eq!(status, 400);
                assert_eq!(errors.len(), 1);
                assert_eq!(errors[0].field_name.as_deref(), Some("PaymentReason"));
                assert!(message.contains("PaymentReason"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn other_bodies_are_kept() {
        let resp = Response {
            status: 502,
            headers: HeaderMap::new(),
            cut: None,
            body: Bytes::from_static(b"<html>bad gateway</html>"),
        };
        match api_error(&resp) {
            Error::Api { errors, body, .. } => {
                assert!(errors.is_empty());
                assert_eq!(body, "<html>bad gateway</html>");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// How `api_error` words an error answer (found by cargo-mutants).
    fn api_message(body: &'static str) -> String {
        let resp = Response {
            status: 400,
            headers: HeaderMap::new(),
            body: Bytes::from_static(body.as_bytes()),
            cut: None,
        };
        match api_error(&resp) {
            Error::Api { message, .. } => message,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn one_error_names_its_field_and_code() {
        assert_eq!(
            api_message(
                r#"{"errors":[{"errorCode":"validation:quote:1001","fieldName":"BuyAmount","message":"too small"}]}"#
            ),
            "HTTP 400: too small (BuyAmount: validation:quote:1001)"
        );
    }

    #[test]
    fn an_error_without_a_field_shows_its_code_only() {
        for field in [r#""fieldName":"","#, ""] {
            let body = format!(
                r#"{{"errors":[{{"errorCode":"auth:token:2001",{field}"message":"expired"}}]}}"#
            );
            let body: &'static str = Box::leak(body.into_boxed_str());
            assert_eq!(api_message(body), "HTTP 400: expired (auth:token:2001)");
        }
    }

    #[test]
    fn further_errors_are_counted() {
        let two = r#"{"errors":[{"errorCode":"a:b:1","fieldName":"X","message":"m1"},{"errorCode":"a:b:2","fieldName":"Y","message":"m2"}]}"#;
        assert_eq!(api_message(two), "HTTP 400: m1 (X: a:b:1) and 1 more");
        assert_eq!(api_message(r#"{"errors":[]}"#), "HTTP 400");
        assert_eq!(api_message("not json"), "HTTP 400");
    }
}

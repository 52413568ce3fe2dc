//! The HTTP server: routes, the accept loop, per-connection kill switches, faults and stats.
//!
//! Connections are served by hyper around the axum router: plain http with HTTP/1.1
//! (keep-alive), https with HTTP/1.1 or HTTP/2, whichever the client chose by ALPN (hyper-util's
//! auto builder reads the connection's preface). Each connection runs inside a `select!` with
//! its own kill signal (fired by a drop fault) and the shutdown signal; dropping the connection
//! future closes the socket with no response (for HTTP/2: every stream on it). A connection
//! with no request in progress for the idle timeout (kept alive after an answer, or silent
//! since it opened) is dropped the same way.
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::accounts;
use crate::http::body::BodyTimeout;
use crate::http::errors::{code, ApiError};
use crate::http::faults::Action;
use crate::http::{admin, errors, openapi};
use crate::oauth::{pages, token};
use crate::payments::{beneficiaries, deals, quotes};
use crate::state::State;

/// Every route of the sandbox.
pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/openapi.json", get(openapi::serve))
        .route("/v1/oauth/token", post(token::token))
        .route("/v1/oauth/authorize", get(pages::authorize))
        .route("/v1/oauth/login", post(pages::login))
        .route("/v1/oauth/consent", post(pages::consent))
        .route("/v1/payments/quotes", post(quotes::create))
        .route("/v1/payments/quotes/{id}", get(quotes::get))
        .route("/v1/payments/beneficiaries", post(beneficiaries::create))
        .route("/v1/payments/deals", post(deals::create))
        .route("/v1/payments/deals/spot", post(deals::create_spot))
        .route("/v1/gca/virtual-accounts", get(accounts::list))
        .merge(admin::router())
        .fallback(errors::not_found)
        .method_not_allowed_fallback(errors::method_not_allowed)
        .with_state(state)
}

/// The answer of a `fail_next` fault.
fn injected(status: u16, retry_after: Option<u64>, token_path: bool) -> Response<Body> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = format!("injected failure ({})", status.as_u16());
    let mut err = ApiError::one(status, code::INJECTED, "", message.clone());
    if let Some(secs) = retry_after {
        err = err.with_header(header::RETRY_AFTER, &secs.to_string());
    }
    let mut resp = axum::response::IntoResponse::into_response(err);
    if token_path {
        // The token endpoint's clients read RFC 6749 errors: give both shapes.
        let error = match status.as_u16() {
            400 => "invalid_request",
            401 => "invalid_client",
            503 | 429 => "temporarily_unavailable",
            _ => "server_error",
        };
        let body = json!({
            "error": error,
            "error_description": message,
            "errors": [{"errorCode": code::INJECTED, "fieldName": "", "message": message}],
        });
        *resp.body_mut() = Body::from(body.to_string());
    }
    resp
}

/// The answer of a request beyond the rate limit: 429, `Retry-After`, an `errors` body (and
/// for the token endpoint the RFC 6749 fields too, as its clients read those).
fn rate_limited(
    rl: Option<&crate::http::rate_limit::RateLimit>,
    retry_after: u64,
    token_path: bool,
) -> Response<Body> {
    let per_second = rl.map_or(0.0, |r| r.per_second());
    let message = format!(
        "rate limit exceeded: at most {per_second} requests per second; retry after {retry_after} s"
    );
    let err = ApiError::one(
        StatusCode::TOO_MANY_REQUESTS,
        crate::http::rate_limit::CODE,
        "",
        message.clone(),
    )
    .with_header(header::RETRY_AFTER, &retry_after.to_string());
    let mut resp = axum::response::IntoResponse::into_response(err);
    if token_path {
        let body = json!({
            "error": "temporarily_unavailable",
            "error_description": message,
            "errors": [{"errorCode": crate::http::rate_limit::CODE, "fieldName": "", "message": message}],
        });
        *resp.body_mut() = Body::from(body.to_string());
    }
    resp
}

/// A request body that records when it has been read to its end, and fails with
/// [`BodyTimeout`] when it has not arrived in full by its deadline (a stalled upload).
struct Tracked {
    inner: Incoming,
    done: Arc<AtomicBool>,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.done.store(true, Ordering::Relaxed);
        }
        match polled {
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout)))),
                Poll::Pending => Poll::Pending,
            },
            ready => ready.map(|frame| frame.map(|r| r.map_err(axum::BoxError::from))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Wraps the request body when there is one; returns the flag set once it was read through.
/// The body must arrive in full within `timeout` of now (its headers have just been read).
fn track(req: Request<Incoming>, timeout: Duration) -> (Request<Body>, Option<Arc<AtomicBool>>) {
    if req.body().is_end_stream() {
        return (req.map(Body::new), None);
    }
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let deadline = Box::pin(tokio::time::sleep(timeout));
    (
        req.map(|inner| {
            Body::new(Tracked {
                inner,
                done,
                deadline,
            })
        }),
        Some(flag),
    )
}

/// An answer as it leaves: stamped with its request id ([`stamp_request_id`]), and closing
/// its connection when the request's body was not read through ([`close_if_unread`]).
fn finish(resp: Response<Body>, body: Option<Arc<AtomicBool>>) -> Response<Body> {
    close_if_unread(stamp_request_id(resp), body)
}

/// Every answer carries a fresh `x-request-id` (a UUID), as the service's do.
fn stamp_request_id(mut resp: Response<Body>) -> Response<Body> {
    let mut buf = uuid::Uuid::encode_buffer();
    let id = crate::ids::request_id().hyphenated().encode_lower(&mut buf);
    if let Ok(id) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(REQUEST_ID, id);
    }
    resp
}

/// An answer given before the request body was read through (413, 415, 401, an injected
/// failure...) says `Connection: close`: the unread rest of the body makes the connection
/// unusable, and without the header a keep-alive client would send its next request into a
/// connection the server is closing.
fn close_if_unread(mut resp: Response<Body>, body: Option<Arc<AtomicBool>>) -> Response<Body> {
    if body.is_some_and(|done| !done.load(Ordering::Relaxed)) {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// The response header that carries the request id (a name checked at compile time, not at
/// every answer).
pub const REQUEST_ID: header::HeaderName = header::HeaderName::from_static("x-request-id");

/// One request: stats, faults, then the router.
async fn handle(
    state: Arc<State>,
    router: Router,
    kill: Arc<Notify>,
    counted: Arc<AtomicBool>,
    req: Request<Incoming>,
) -> Response<Body> {
    let (req, body) = track(req, state.body_timeout);
    if req.uri().path().starts_with(admin::PREFIX) {
        // The admin API is neither counted nor faulted: a test's controls must not disturb
        // what it observes.
        return match router.oneshot(req).await {
            Ok(resp) => finish(resp, body),
            Err(never) => match never {},
        };
    }
    if !counted.swap(true, Ordering::Relaxed) {
        // A connection counts from its first request that is not an admin one.
        state.stats.connection_opened();
    }
    state.stats.request(req.method(), req.uri().path());
    if crate::http::rate_limit::counted(req.uri().path()) {
        let refused = state.rate_limit.as_ref().and_then(|rl| rl.take());
        state.timeline.note(refused.is_some());
        if let Some(retry_after) = refused {
            state.stats.rate_limited();
            let token_path = req.uri().path() == "/v1/oauth/token";
            return finish(
                rate_limited(state.rate_limit.as_ref(), retry_after, token_path),
                body,
            );
        }
    }
    match state.faults.take(req.method(), req.uri().path()) {
        Some(Action::Fail {
            status,
            retry_after,
        }) => {
            let token_path = req.uri().path() == "/v1/oauth/token";
            return finish(injected(status, retry_after, token_path), body);
        }
        Some(Action::Drop { after_processing }) => {
            if after_processing {
                let _ = router.oneshot(req).await;
            }
            kill.notify_one();
            return std::future::pending().await;
        }
        Some(Action::Delay { seconds }) => {
            let secs = if seconds.is_finite() {
                seconds.clamp(0.0, 3600.0)
            } else {
                0.0
            };
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        }
        None => {}
    }
    match router.oneshot(req).await {
        Ok(resp) => finish(resp, body),
        Err(never) => match never {},
    }
}

/// What a connection's idle watch needs: how many requests are in progress, and when the
/// last one ended (or the connection opened).
struct Activity {
    in_flight: AtomicUsize,
    last: Mutex<tokio::time::Instant>,
    ended: Notify,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            last: Mutex::new(tokio::time::Instant::now()),
            ended: Notify::new(),
        }
    }

    fn last(&self) -> tokio::time::Instant {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks a request in progress until the guard drops (its answer is ready, or the
    /// request was abandoned).
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }
}

struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self
            .0
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tokio::time::Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_one();
    }
}

/// Returns once the connection has had no request in progress for `idle`.
async fn idle(activity: Arc<Activity>, idle: Duration) {
    loop {
        if activity.in_flight.load(Ordering::SeqCst) > 0 {
            // A request is in progress: wait for one to end (a stored permit covers one that
            // ended between the check and here).
            activity.ended.notified().await;
            continue;
        }
        let deadline = activity.last() + idle;
        if tokio::time::Instant::now() >= deadline {
            if activity.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = activity.ended.notified() => {}
        }
    }
}

async fn shut_down(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// How long a client may take to send a request's headers on an HTTP/1.1 connection.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one connection until it ends, is killed, or the sandbox shuts down. `any_version`:
/// HTTP/1.1 or HTTP/2 (after a TLS handshake that offered both); otherwise HTTP/1.1 only.
async fn connection<S>(
    stream: S,
    any_version: bool,
    state: Arc<State>,
    router: Router,
    shutdown: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let kill = Arc::new(Notify::new());
    let counted = Arc::new(AtomicBool::new(false));
    let activity = Arc::new(Activity::new());
    let idle_timeout = state.idle_timeout;
    let svc = {
        let (state, kill, counted) = (state.clone(), kill.clone(), counted.clone());
        let activity = activity.clone();
        service_fn(move |req| {
            let (state, router) = (state.clone(), router.clone());
            let (kill, counted) = (kill.clone(), counted.clone());
            let in_flight = activity.begin();
            async move {
                let resp = handle(state, router, kill, counted, req).await;
                drop(in_flight);
                Ok::<_, Infallible>(resp)
            }
        })
    };
    let io = TokioIo::new(stream);
    let conn: Pin<Box<dyn Future<Output = ()> + Send>> = if any_version {
        Box::pin(async move {
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .keep_alive(true)
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            builder.http2().timer(TokioTimer::new());
            let _ = builder.serve_connection(io, svc).await;
        })
    } else {
        Box::pin(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .keep_alive(true)
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let _ = builder.serve_connection(io, svc).await;
        })
    };
    tokio::select! {
        () = conn => {}
        _ = kill.notified() => {}
        () = idle(activity, idle_timeout) => {}
        _ = shut_down(shutdown) => {}
    }
    if counted.load(Ordering::Relaxed) {
        state.stats.connection_closed();
    }
}

/// A TLS handshake that has not finished by then is given up.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One accepted socket: the TLS handshake first for an https sandbox, then `connection`.
async fn open_connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    state: Arc<State>,
    router: Router,
    shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let Some(acceptor) = tls else {
        return connection(stream, false, state, router, shutdown).await;
    };
    let handshake = tokio::time::timeout(
        TLS_HANDSHAKE_TIMEOUT,
        acceptor.accept(stream).into_fallible(),
    );
    let stream = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            // A failed handshake (a client that does not trust the CA, or that has no client
            // certificate...) ends here. Its alert is sent; what the client sent meanwhile is
            // read and dropped for a moment before closing, so that the close is not a reset
            // that could discard the alert before the client reads it.
            Ok(Err((_, mut tcp))) => {
                linger(&mut tcp).await;
                return;
            }
            Err(_) => return,
        },
        _ = shut_down(shutdown.clone()) => return,
    };
    connection(stream, true, state, router, shutdown).await
}

/// Half-closes `tcp` and reads what the peer still sends (at most a second), then returns.
async fn linger(tcp: &mut TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tcp.shutdown().await;
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// The accept loop; ends (dropping the listener) when the sandbox shuts down.
pub async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    shutdown: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
) {
    let router = router(state.clone());
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shut_down(shutdown.clone()) => return,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(open_connection(
                    stream,
                    tls.clone(),
                    state.clone(),
                    router.clone(),
                    shutdown.clone(),
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

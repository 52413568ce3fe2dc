//! The transport's retry rules (`fxpay_core::Transport`), against a scripted HTTP server on
//! loopback: how many attempts reach the server for each kind of failure, for max_retries
//! 0, 1 and N; requests that create something are retried only when no connection opened.
mod support;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fxpay_core::{AttemptLog, ClientConfig, Error, Observer, Request, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use support::http::read_request;

/// What the server does with one request, after reading all of it.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// Answers with this status (and `Retry-After: 0` on a 429).
    Status(u16),
    /// Closes the connection without answering.
    Drop,
    /// Never answers (the client's timeout ends the attempt).
    Hang,
}

/// A loopback HTTP/1.1 server that plays `script` one request at a time (then answers 200)
/// and counts the requests it has read.
struct Server {
    addr: SocketAddr,
    requests: Arc<AtomicU32>,
}

impl Server {
    async fn start(script: &[Act]) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Server::serve(listener, script)
    }

    fn serve(listener: TcpListener, script: &[Act]) -> Server {
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(AtomicU32::new(0));
        let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
        let counter = requests.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (script, counter) = (script.clone(), counter.clone());
                tokio::spawn(async move { handle(conn, &script, &counter).await });
            }
        });
        Server { addr, requests }
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> u32 {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn handle(mut conn: TcpStream, script: &Mutex<VecDeque<Act>>, counter: &AtomicU32) {
    if read_request(&mut conn).await.is_none() {
        return;
    }
    counter.fetch_add(1, Ordering::SeqCst);
    let act = script
        .lock()
        .ok()
        .and_then(|mut s| s.pop_front())
        .unwrap_or(Act::Status(200));
    match act {
        Act::Status(status) => {
            let extra = if status == 429 {
                "Retry-After: 0\r\n"
            } else {
                ""
            };
            let answer = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: 2\r\n{extra}Connection: close\r\n\r\n{{}}"
            );
            let _ = conn.write_all(answer.as_bytes()).await;
            let _ = conn.shutdown().await;
        }
        Act::Drop => drop(conn),
        Act::Hang => {
            // Keep the connection open, unanswered, until the client gives up.
            let mut rest = [0u8; 64];
            while matches!(conn.read(&mut rest).await, Ok(n) if n > 0) {}
        }
    }
}

/// Counts attempts as the transport reports them, and can run a hook after the first.
#[derive(Default)]
struct Attempts {
    seen: AtomicU32,
    after_first: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Observer for Attempts {
    fn attempt(&self, log: &AttemptLog<'_>) {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(log.attempt, n, "attempts are numbered from 1");
        if n == 1 {
            if let Some(hook) = self.after_first.lock().ok().and_then(|mut h| h.take()) {
                hook();
            }
        }
    }
}

impl Attempts {
    fn count(&self) -> u32 {
        self.seen.load(Ordering::SeqCst)
    }
}

/// A transport to `base_url` with `max_retries`, fast backoff and a per-attempt timeout.
fn transport(base_url: &str, max_retries: i64, timeout: f64) -> Transport {
    let mut cfg = ClientConfig::new("id", "secret", base_url)
        .and_then(|c| c.with_max_retries(max_retries))
        .and_then(|c| c.with_timeout(timeout))
        .expect("config");
    cfg.retry.backoff_base = Duration::from_millis(1);
    cfg.retry.backoff_max = Duration::from_millis(5);
    Transport::new(cfg).expect("transport")
}

fn create() -> Request<'static> {
    Request::post_json("/payments/deals", br#"{"quoteId":"q"}"#.to_vec())
}

fn read() -> Request<'static> {
    Request::get("/payments/quotes/q1")
}

const COUNTS: [u32; 3] = [0, 1, 4];

#[tokio::test]
async fn a_safe_request_is_sent_one_plus_max_retries_times_then_gives_up() {
    for n in COUNTS {
        let server = Server::start(&[Act::Status(503); 20]).await;
        let t = transport(&server.base_url(), n.into(), 10.0);
        let obs = Attempts::default();
        let resp = t.send(&read(), None, Some(&obs)).await.expect("an answer");
        assert_eq!(
            resp.status, 503,
            "max_retries={n}: the last answer is returned"
        );
        assert_eq!(server.requests(), 1 + n, "max_retries={n}");
        assert_eq!(obs.count(), 1 + n, "max_retries={n}");
    }
}

#[tokio::test]
async fn a_safe_request_succeeds_on_its_last_allowed_attempt() {
    for n in COUNTS {
        let mut script = vec![Act::Status(502); n as usize];
        script.push(Act::Status(200));
        let server = Server::start(&script).await;
        let t = transport(&server.base_url(), n.into(), 10.0);
        let resp = t.send(&read(), None, None).await.expect("an answer");
        assert_eq!(resp.status, 200, "max_retries={n}");
        assert_eq!(server.requests(), 1 + n, "max_retries={n}");
    }
}

#[tokio::test]
async fn a_safe_request_stops_at_the_first_success() {
    let server = Server::start(&[Act::Status(504), Act::Status(429), Act::Status(200)]).await;
    let t = transport(&server.base_url(), 5, 10.0);
    let resp = t.send(&read(), None, None).await.expect("an answer");
    assert_eq!(resp.status, 200);
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn final_statuses_are_not_retried() {
    for status in [200, 201, 400, 401, 404, 409, 500] {
        let server = Server::start(&[Act::Status(status)]).await;
        let t = transport(&server.base_url(), 4, 10.0);
        let resp = t.send(&read(), None, None).await.expect("an answer");
        assert_eq!(resp.status, status);
        assert_eq!(server.requests(), 1, "{status} was retried");
    }
}

#[tokio::test]
async fn a_safe_request_is_retried_after_a_dropped_connection() {
    for n in COUNTS {
        let server = Server::start(&[Act::Drop; 20]).await;
        let t = transport(&server.base_url(), n.into(), 10.0);
        let err = t.send(&read(), None, None).await.expect_err("no answer");
        assert!(
            matches!(err, Error::Transport { timeout: false, .. }),
            "{err:?}"
        );
        assert_eq!(server.requests(), 1 + n, "max_retries={n}");
    }
}

#[tokio::test]
async fn a_safe_request_is_retried_after_a_timeout() {
    let server = Server::start(&[Act::Hang, Act::Status(200)]).await;
    let t = transport(&server.base_url(), 1, 1.0);
    let resp = t.send(&read(), None, None).await.expect("an answer");
    assert_eq!(resp.status, 200);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn a_create_that_reached_the_server_is_never_sent_again() {
    for act in [
        Act::Status(503),
        Act::Status(502),
        Act::Status(429),
        Act::Status(500),
    ] {
        let server = Server::start(&[act; 20]).await;
        let t = transport(&server.base_url(), 4, 10.0);
        let obs = Attempts::default();
        let resp = t
            .send(&create(), None, Some(&obs))
            .await
            .expect("an answer");
        assert_ne!(resp.status, 200, "{act:?}");
        assert_eq!(server.requests(), 1, "{act:?} was sent again");
        assert_eq!(obs.count(), 1, "{act:?}");
    }
    // The connection closes after the request was read: it may have been acted on.
    let server = Server::start(&[Act::Drop; 20]).await;
    let t = transport(&server.base_url(), 4, 10.0);
    let err = t.send(&create(), None, None).await.expect_err("no answer");
    assert!(
        matches!(err, Error::Transport { timeout: false, .. }),
        "{err:?}"
    );
    assert_eq!(server.requests(), 1, "a dropped create was sent again");
}

#[tokio::test]
async fn a_create_that_timed_out_is_never_sent_again() {
    let server = Server::start(&[Act::Hang, Act::Status(200)]).await;
    let t = transport(&server.base_url(), 4, 1.0);
    let err = t.send(&create(), None, None).await.expect_err("no answer");
    assert!(
        matches!(err, Error::Transport { timeout: true, .. }),
        "{err:?}"
    );
    assert_eq!(server.requests(), 1);
}

/// A port bound on loopback but not listening: connecting to it is refused at once.
fn unlistened() -> (TcpSocket, SocketAddr) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let addr = socket.local_addr().expect("local addr");
    (socket, addr)
}

#[tokio::test]
async fn a_create_whose_connection_never_opened_is_retried() {
    let (socket, addr) = unlistened();
    let t = transport(&format!("http://{addr}"), 2, 10.0);
    // After the first attempt was refused, the port starts listening: the retry gets through.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let obs = Attempts::default();
    *obs.after_first.lock().expect("hook") = Some(Box::new(move || {
        let listener = socket.listen(16).expect("listen");
        let _ = tx.send(Server::serve(listener, &[Act::Status(201)]));
    }));
    let resp = t
        .send(&create(), None, Some(&obs))
        .await
        .expect("an answer");
    assert_eq!(resp.status, 201);
    assert_eq!(
        obs.count(),
        2,
        "one refused attempt, then one that was answered"
    );
    let server = rx.await.expect("the server started");
    assert_eq!(server.requests(), 1, "the create reached the server once");
}

#[tokio::test]
async fn a_create_that_cannot_connect_stops_after_max_retries() {
    for n in COUNTS {
        let (_socket, addr) = unlistened();
        let t = transport(&format!("http://{addr}"), n.into(), 10.0);
        let obs = Attempts::default();
        let err = t
            .send(&create(), None, Some(&obs))
            .await
            .expect_err("refused");
        assert!(
            matches!(err, Error::Transport { timeout: false, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("could not connect"), "{err}");
        // The cause is kept in the message.
        assert!(
            err.to_string()
                .to_lowercase()
                .contains("connection refused"),
            "{err}"
        );
        assert_eq!(obs.count(), 1 + n, "max_retries={n}");
    }
}

/// A server that answers each request with `answer` and keeps each request's head.
async fn recording(answer: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                if let Ok(mut s) = seen.lock() {
                    s.push(String::from_utf8_lossy(&buf).to_ascii_lowercase());
                }
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (addr, heads)
}

#[tokio::test]
async fn every_attempt_carries_the_clients_headers_and_redirects_are_not_followed() {
    let (addr, heads) = recording(
        "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    let t = transport(&format!("http://{addr}"), 2, 10.0);
    let resp = t.send(&read(), Some("tok"), None).await.expect("an answer");
    assert_eq!(resp.status, 302, "the redirect is returned, not followed");
    let heads = heads.lock().expect("heads").clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    let head = &heads[0];
    assert!(head.starts_with("get /v1/payments/quotes/q1 "), "{head}");
    assert!(head.contains("\r\nuser-agent: fxpay/"), "{head}");
    assert!(head.contains("\r\naccept: application/json"), "{head}");
    assert!(head.contains("\r\nauthorization: bearer tok"), "{head}");
}

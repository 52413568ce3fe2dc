//! Issue 52: a creating request that an HTTP/2 server proves it did not process is retried
//! (or, with no retry left, fails as unsent, which the journal releases) instead of ending
//! as a lost answer. A TLS server on loopback (ALPN `h2`, as the client offers it) that:
//! - refuses the first stream with `RST_STREAM(REFUSED_STREAM)`, then answers;
//! - answers the first connection's first request with `GOAWAY(last_stream_id=0)` (raw
//!   frames: h2's own server would name the stream it read as processed), then answers;
//! - or resets the first stream with `INTERNAL_ERROR` (the stream may have been processed:
//!   the error must stay a lost answer).
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fxpay_core::{ClientConfig, Error, Request, Transport};
use rcgen::{CertificateParams, KeyPair, SanType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// What the server does with the first request it reads (every later one gets a 200).
#[derive(Clone, Copy)]
enum First {
    Refuse,
    GoAwayBeforeIt,
    ResetInternal,
    /// Every answer carries this many bytes of headers (in 8 KiB values).
    BigHeaders(usize),
}

struct Server {
    addr: SocketAddr,
    /// Streams (requests) the server read, refused ones included.
    streams: Arc<AtomicU32>,
    ca_path: std::path::PathBuf,
}

async fn start(first: First) -> Server {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let cert = params.self_signed(&key).expect("cert");
    let dir = std::env::temp_dir().join(format!(
        "fxpay-h2-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, cert.pem()).expect("write ca");
    let mut tls = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .expect("server config");
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let streams = Arc::new(AtomicU32::new(0));
    let counted = streams.clone();
    tokio::spawn(async move {
        let mut connections = 0u32;
        while let Ok((tcp, _)) = listener.accept().await {
            connections += 1;
            let (acceptor, counted) = (acceptor.clone(), counted.clone());
            let raw_goaway = connections == 1 && matches!(first, First::GoAwayBeforeIt);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if raw_goaway {
                    go_away_before_first_stream(tls, &counted).await;
                } else {
                    serve(tls, first, &counted).await;
                }
            });
        }
    });
    Server {
        addr,
        streams,
        ca_path,
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// An h2 server: the first stream of all (`counted` was 0) as `first` says, the rest 200.
async fn serve<S>(io: S, first: First, counted: &AtomicU32)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        match first {
            First::Refuse if n == 0 => {
                respond.send_reset(h2::Reason::REFUSED_STREAM);
                continue;
            }
            First::ResetInternal if n == 0 => {
                // The request is read whole first: the server may have acted on it.
                let mut body = req.into_body();
                while let Some(Ok(_)) = body.data().await {}
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                continue;
            }
            _ => {}
        }
        let mut answer = http::Response::builder()
            .status(201)
            .header("content-type", "application/json");
        if let First::BigHeaders(size) = first {
            for i in 0..size / 8192 {
                answer = answer.header(format!("x-pad-{i}"), "p".repeat(8150));
            }
        }
        let answer = answer.body(()).expect("answer");
        if let Ok(mut send) = respond.send_response(answer, false) {
            let _ = send.send_data(Bytes::from_static(b"{\"id\":\"q-1\"}"), true);
        }
    }
}

/// Speaks raw HTTP/2 frames: a SETTINGS, then on the client's first HEADERS a
/// `GOAWAY(last_stream_id=0, NO_ERROR)`: the server processed no stream.
async fn go_away_before_first_stream<S>(mut io: S, counted: &AtomicU32)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut preface = [0u8; 24];
    if io.read_exact(&mut preface).await.is_err() {
        return;
    }
    // An empty SETTINGS.
    if io.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.is_err() {
        return;
    }
    loop {
        let mut head = [0u8; 9];
        if io.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        if io.read_exact(&mut payload).await.is_err() {
            return;
        }
        match (head[3], head[4] & 1) {
            // The client's SETTINGS: acknowledged.
            (4, 0) => {
                let ack = io.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await;
                if ack.is_err() {
                    return;
                }
            }
            // HEADERS: the request, not processed.
            (1, _) => {
                counted.fetch_add(1, Ordering::SeqCst);
                let goaway = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                let _ = io.write_all(&goaway).await;
                let _ = io.flush().await;
                // Read on until the client closes (or a while passes).
                let mut sink = [0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    while matches!(io.read(&mut sink).await, Ok(n) if n > 0) {}
                })
                .await;
                return;
            }
            _ => {}
        }
    }
}

fn transport(server: &Server, max_retries: i64) -> Transport {
    let mut cfg = ClientConfig::new("id", "secret", &format!("https://{}", server.addr))
        .expect("config")
        .with_timeout(10.0)
        .expect("timeout")
        .with_max_retries(max_retries)
        .expect("retries");
    cfg.retry.backoff_base = Duration::from_millis(1);
    cfg.retry.backoff_max = Duration::from_millis(5);
    cfg.ca_bundle = Some(server.ca_path.to_string_lossy().into_owned());
    Transport::new(cfg).expect("transport")
}

fn create() -> Request<'static> {
    Request::post_json("/payments/quotes", br#"{"buyCurrency":"USD"}"#.to_vec())
}

async fn unsent_without_retries(first: First) {
    let server = start(first).await;
    let err = transport(&server, 0)
        .send(&create(), Some("token"), None)
        .await
        .expect_err("no answer");
    match err {
        Error::Transport { unsent, .. } => assert!(unsent, "{err:?}"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(server.streams.load(Ordering::SeqCst), 1);
}

async fn retried(first: First) {
    let server = start(first).await;
    let resp = transport(&server, 2)
        .send(&create(), Some("token"), None)
        .await
        .expect("an answer after the retry");
    assert_eq!(resp.status, 201);
    assert_eq!(server.streams.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_refused_stream_is_unsent() {
    unsent_without_retries(First::Refuse).await;
}

#[tokio::test]
async fn a_refused_create_is_retried() {
    retried(First::Refuse).await;
}

#[tokio::test]
async fn a_goaway_below_the_stream_is_unsent() {
    unsent_without_retries(First::GoAwayBeforeIt).await;
}

#[tokio::test]
async fn a_create_the_goaway_did_not_take_is_retried() {
    retried(First::GoAwayBeforeIt).await;
}

#[tokio::test]
async fn a_stream_reset_after_it_was_read_stays_a_lost_answer() {
    let server = start(First::ResetInternal).await;
    let err = transport(&server, 2)
        .send(&create(), Some("token"), None)
        .await
        .expect_err("no answer");
    match err {
        Error::Transport { unsent, .. } => assert!(!unsent, "{err:?}"),
        other => panic!("unexpected {other:?}"),
    }
    // Not retried: the server may have acted on it.
    assert_eq!(server.streams.load(Ordering::SeqCst), 1);
}

/// A connect that never completed (the server takes the TCP connection and never answers the
/// TLS handshake) sent nothing, even when the call's deadline, not the connect's own time
/// limit, ends it: the create is unsent.
#[tokio::test]
async fn a_create_whose_connect_never_completed_is_unsent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    // A connect timeout of 5 s; the call's deadline of 0.5 s ends the attempt first.
    let cfg = ClientConfig::new("id", "secret", &format!("https://{addr}"))
        .expect("config")
        .with_timeout(5.0)
        .expect("timeout")
        .with_max_retries(0)
        .expect("retries");
    let transport = Transport::new(cfg).expect("transport");
    let err = fxpay_core::deadline_scope(
        Some(Duration::from_millis(500)),
        transport.send(&create(), Some("token"), None),
    )
    .await
    .expect_err("no answer");
    match err {
        Error::Transport {
            unsent, timeout, ..
        } => assert!(unsent && timeout, "{err:?}"),
        other => panic!("unexpected {other:?}"),
    }
}

/// One rule for the header section over HTTP/2 as over HTTP/1.1
/// (tests/python/client/test_header_limits.py): 48 KiB is read (h2's default of 16 KiB
/// refused it), 100 KiB is not.
#[tokio::test]
async fn an_h2_header_section_within_64_kib_is_read_and_past_it_is_not() {
    let server = start(First::BigHeaders(48 * 1024)).await;
    let resp = transport(&server, 0)
        .send(&create(), Some("token"), None)
        .await
        .expect("an answer");
    assert_eq!(resp.status, 201);
    let server = start(First::BigHeaders(100 * 1024)).await;
    let err = transport(&server, 0)
        .send(&create(), Some("token"), None)
        .await
        .expect_err("headers too large");
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
}

//! Issue 23.6: a connection with no request in progress for the idle timeout is closed, both
//! one silent since it opened and one kept alive after an answer; a request in progress is
//! not cut, however long it takes.
use std::time::{Duration, Instant};

use fxpay_sandbox::{Sandbox, SandboxConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE: Duration = Duration::from_millis(600);

async fn sandbox() -> Sandbox {
    Sandbox::start(SandboxConfig {
        idle_timeout: IDLE,
        ..SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts")
}

/// Waits until the server closes the connection; returns when (None: not within `limit`),
/// failing if the server sends anything.
async fn closed_after(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    match tokio::time::timeout(limit, stream.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Some(started.elapsed()),
        Ok(Ok(n)) => panic!("unexpected bytes: {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(_) => None,
    }
}

/// Sends one keep-alive request and reads its whole (small) answer.
async fn one_request(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /v1/no-such-path HTTP/1.1\r\nHost: sandbox\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "closed before the answer");
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if body.len() >= len {
                return text;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let sb = sandbox().await;
    let mut silent = TcpStream::connect(sb.local_addr()).await.expect("connect");
    let mut kept = TcpStream::connect(sb.local_addr()).await.expect("connect");
    let answer = one_request(&mut kept).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    // 10x the timeout: a server that keeps idle sockets forever fails here.
    let silent_after = closed_after(&mut silent, IDLE * 10).await;
    let kept_after = closed_after(&mut kept, IDLE * 10).await;
    assert!(
        silent_after.is_some(),
        "a silent connection was never closed"
    );
    assert!(
        kept_after.is_some(),
        "a kept-alive connection was never closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_connection_is_not_closed() {
    let sb = sandbox().await;
    sb.delay_next("/v1/no-such-path", (IDLE * 2).as_secs_f64());
    let mut stream = TcpStream::connect(sb.local_addr()).await.expect("connect");
    let started = Instant::now();
    // A delayed answer (twice the idle timeout) still arrives.
    let answer = one_request(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(started.elapsed() >= IDLE * 2);
    // Requests more often than the idle timeout keep the connection.
    for _ in 0..4 {
        tokio::time::sleep(IDLE / 2).await;
        let answer = one_request(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    }
    // Then it idles, and is closed no sooner than the idle timeout.
    let after = closed_after(&mut stream, IDLE * 10).await;
    assert!(after.is_some_and(|t| t >= IDLE.mul_f64(0.9)), "{after:?}");
}

//! A request body that stalls is cut after the sandbox's body timeout: answered 408 and its
//! connection closed; a body that arrives in time is served.
use std::time::{Duration, Instant};

use fxpay_sandbox::{Sandbox, SandboxConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TIMEOUT: Duration = Duration::from_millis(500);

async fn sandbox() -> Sandbox {
    Sandbox::start(SandboxConfig {
        body_timeout: TIMEOUT,
        ..SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts")
}

/// Everything the server sends until it closes the connection (bounded by `limit`).
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut answer = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_and_closed() {
    let sb = sandbox().await;
    let mut stream = TcpStream::connect(sb.local_addr()).await.expect("connect");
    let head = "POST /v1/oauth/token HTTP/1.1\r\nHost: sandbox\r\n\
                Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n\
                grant_type=cli";
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.expect("write");
    // 20x the timeout: a server that holds stalled bodies forever fails here.
    let answer = read_to_close(&mut stream, TIMEOUT * 20).await;
    let elapsed = started.elapsed();
    let answer = answer.expect("the stalled connection was closed");
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "{}",
        answer.lines().next().unwrap_or_default()
    );
    assert!(answer.to_ascii_lowercase().contains("connection: close"));
    assert!(
        elapsed >= TIMEOUT,
        "cut after {elapsed:?}, before the timeout"
    );
    sb.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_form_that_stalls_is_answered_408() {
    let sb = sandbox().await;
    let mut stream = TcpStream::connect(sb.local_addr()).await.expect("connect");
    // The login page reads its form before anything else: the HTML pages are cut too.
    let head = "POST /v1/oauth/login HTTP/1.1\r\nHost: sandbox\r\n\
                Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nuser";
    stream.write_all(head.as_bytes()).await.expect("write");
    let answer = read_to_close(&mut stream, TIMEOUT * 20)
        .await
        .expect("the stalled connection was closed");
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "{}",
        answer.lines().next().unwrap_or_default()
    );
    sb.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_arrives_in_pieces_within_the_timeout_is_served() {
    let sb = sandbox().await;
    let mut stream = TcpStream::connect(sb.local_addr()).await.expect("connect");
    let form = format!(
        "grant_type=client_credentials&scope=payments&client_id={}&client_secret={}",
        sb.client_id(),
        sb.client_secret()
    );
    let head = format!(
        "POST /v1/oauth/token HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        form.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
        .write_all(&form.as_bytes()[..10])
        .await
        .expect("write");
    tokio::time::sleep(TIMEOUT / 10).await;
    stream
        .write_all(&form.as_bytes()[10..])
        .await
        .expect("write");
    let answer = read_to_close(&mut stream, Duration::from_secs(30))
        .await
        .expect("answered");
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        answer.lines().next().unwrap_or_default()
    );
    sb.shutdown();
}

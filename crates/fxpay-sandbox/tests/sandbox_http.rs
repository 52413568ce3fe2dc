//! The sandbox as an HTTP server: fault injection (fail, drop before/after processing,
//! delay), stats, bad inputs (JSON, media type, size, routing), openapi.json, shutdown.
mod sandbox_support;

use std::time::{Duration, Instant};

use sandbox_support::*;
use serde_json::{json, Value};

fn quote_body() -> Value {
    json!({"buyCurrency": "GBP", "buyAmount": num("1000.00"), "sellCurrency": "USD"})
}

#[tokio::test]
async fn fail_next_answers_without_processing() {
    let t = start().await;
    let tok = t.cc_token().await;
    t.sb.fail_next("/v1/payments/quotes", 503, 2, Some(7));
    for _ in 0..2 {
        let r = t
            .post_json("/v1/payments/quotes", &tok, &quote_body())
            .await;
        assert_eq!(r.status, 503);
        assert_eq!(r.header("retry-after").as_deref(), Some("7"));
        assert_eq!(r.codes(), ["sandbox:fault:5001"]);
    }
    assert_eq!(
        t.sb.stats()["quotes"],
        0,
        "failed requests were not processed"
    );
    let r = t
        .post_json("/v1/payments/quotes", &tok, &quote_body())
        .await;
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_str().expect("id").to_owned();

    // Method-qualified prefix rules.
    t.sb.fail_next("GET /v1/payments/quotes/*", 429, 1, None);
    assert_eq!(
        t.post_json("/v1/payments/quotes", &tok, &quote_body())
            .await
            .status,
        201
    );
    let r = t.get(&format!("/v1/payments/quotes/{id}"), &tok).await;
    assert_eq!(r.status, 429);
    assert!(r.header("retry-after").is_none());
    assert_eq!(
        t.get(&format!("/v1/payments/quotes/{id}"), &tok)
            .await
            .status,
        200
    );

    // On the token endpoint the body also has the RFC 6749 shape.
    t.sb.fail_next("POST /v1/oauth/token", 503, 1, Some(1));
    let r = t
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", t.sb.client_id()),
            ("client_secret", t.sb.client_secret()),
        ])
        .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"], "temporarily_unavailable");
    assert_eq!(r.codes(), ["sandbox:fault:5001"]);
    let s = t.sb.stats();
    assert_eq!(s["faults_fired"], 4);
    assert_eq!(s["faults_pending"], 0);
    assert_eq!(s["tokens_issued"]["client_credentials"], 1);
    assert_eq!(s["token_requests"], 2, "faulted requests count");
}

#[tokio::test]
async fn drop_before_and_after_processing() {
    let t = start().await;
    let tok = t.cc_token().await;
    let ben = t.beneficiary(&tok, "USD").await;
    let q = t.quote(&tok, "GBP", "1000.00", "USD", 1).await;
    let body = Ctx::deal_body(&q, &ben, "1263.65");

    t.sb.drop_next("POST /v1/payments/deals", false);
    let err = t
        .http
        .post(t.url("/v1/payments/deals"))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    assert!(err.is_err(), "no HTTP response: {err:?}");
    assert!(
        t.sb.deals().is_empty(),
        "dropped before processing: nothing booked"
    );

    t.sb.drop_next("/v1/payments/deals", true);
    let err = t
        .http
        .post(t.url("/v1/payments/deals"))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    assert!(err.is_err(), "no HTTP response: {err:?}");
    let deals = t.sb.deals();
    assert_eq!(
        deals.len(),
        1,
        "dropped after processing: the deal is booked"
    );
    assert_eq!(deals[0]["quoteId"], q.as_str());
    // A replay now hits the quote-reuse rule: the response was lost, not the deal.
    let r = t.post_json("/v1/payments/deals", &tok, &body).await;
    assert_eq!(
        (r.status, r.codes()),
        (409, vec!["business:deal:2002".to_owned()])
    );
    let s = t.sb.stats();
    assert_eq!(s["paths"]["POST /v1/payments/deals"], 3);
    assert_eq!(s["faults_fired"], 2);
}

#[tokio::test]
async fn delay_next_waits_then_processes() {
    let t = start().await;
    let tok = t.cc_token().await;
    t.sb.delay_next("/v1/payments/quotes", 0.6);
    let started = Instant::now();
    let r = t
        .post_json("/v1/payments/quotes", &tok, &quote_body())
        .await;
    assert_eq!(r.status, 201);
    assert!(started.elapsed() >= Duration::from_millis(600));
    let started = Instant::now();
    assert_eq!(
        t.post_json("/v1/payments/quotes", &tok, &quote_body())
            .await
            .status,
        201
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "used up after one request"
    );
}

#[tokio::test]
async fn stats_count_requests() {
    let t = start().await;
    let tok = t.cc_token().await;
    let id = t.quote(&tok, "GBP", "10", "USD", 1).await;
    for _ in 0..3 {
        t.get_quote(&tok, &id).await;
    }
    let _ = t.get("/v1/nowhere", &tok).await;
    let s = t.sb.stats();
    assert_eq!(s["requests"], 6);
    assert_eq!(s["token_requests"], 1);
    assert_eq!(s["paths"]["POST /v1/oauth/token"], 1);
    assert_eq!(s["paths"]["POST /v1/payments/quotes"], 1);
    assert_eq!(s["paths"]["GET /v1/payments/quotes/{id}"], 3);
    assert_eq!(s["paths"]["other"], 1);
    assert_eq!(
        s["tokens_issued"],
        json!({"client_credentials": 1, "authorization_code": 0, "refresh_token": 0})
    );
    assert_eq!(s["deliveries"], 0);
    assert!(s["connections"].as_u64().is_some_and(|c| c >= 1));
}

async fn raw_post(t: &Ctx, path: &str, tok: &str, ctype: Option<&str>, body: Vec<u8>) -> Resp {
    let mut req = t.http.post(t.url(path)).bearer_auth(tok).body(body);
    if let Some(c) = ctype {
        req = req.header("content-type", c);
    }
    finish(req.send().await.expect("send")).await
}

#[tokio::test]
async fn bad_inputs_never_break_it() {
    let t = start().await;
    let tok = t.cc_token().await;
    let p = "/v1/payments/quotes";
    let json_ct = Some("application/json");
    let cases: Vec<(Option<&str>, Vec<u8>, u16, &str)> = vec![
        (
            json_ct,
            b"{\"buyCurrency\":".to_vec(),
            400,
            "validation:request:1001",
        ),
        (json_ct, b"[1,2]".to_vec(), 400, "validation:request:1002"),
        (json_ct, b"null".to_vec(), 400, "validation:request:1002"),
        (json_ct, b"".to_vec(), 400, "validation:request:1001"),
        (
            json_ct,
            vec![0xff, 0xfe, b'{'],
            400,
            "validation:request:1001",
        ),
        (
            json_ct,
            "[".repeat(100_000).into_bytes(),
            400,
            "validation:request:1001",
        ),
        (
            Some("text/plain"),
            b"{}".to_vec(),
            415,
            "validation:request:1003",
        ),
        (None, b"{}".to_vec(), 415, "validation:request:1003"),
        (
            Some("application/x-www-form-urlencoded"),
            b"a=b".to_vec(),
            415,
            "validation:request:1003",
        ),
    ];
    for (ct, body, status, code) in cases {
        let r = raw_post(&t, p, &tok, ct, body).await;
        assert_eq!(r.status, status, "{ct:?}: {}", r.text);
        assert_eq!(r.codes(), [code]);
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json")
        );
    }
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(1_100_000)).into_bytes();
    let r = raw_post(&t, p, &tok, json_ct, big).await;
    assert_eq!(
        (r.status, r.codes()),
        (413, vec!["validation:request:1004".to_owned()])
    );
    // Unknown fields are ignored; a body just under the limit is read.
    let mut ok = quote_body();
    ok["pad"] = json!("y".repeat(1_000_000));
    assert_eq!(t.post_json(p, &tok, &ok).await.status, 201);

    // Routing: JSON 404 and 405 with Allow.
    let r = t.get("/v1/unknown", &tok).await;
    assert_eq!(
        (r.status, r.codes()),
        (404, vec!["resource:route:3002".to_owned()])
    );
    let r = t.get("/v1/payments/deals", &tok).await;
    assert_eq!(
        (r.status, r.codes()),
        (405, vec!["resource:route:3003".to_owned()])
    );
    assert_eq!(r.header("allow").as_deref(), Some("POST"));
    let r = finish(
        t.http
            .put(t.url("/v1/oauth/token"))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(r.status, 405);
    let r = finish(
        t.http
            .delete(t.url("/v1/payments/quotes/x"))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(r.status, 405);
    assert!(r.header("allow").is_some_and(|a| a.contains("GET")));
    let r = t.get("/v1/payments/quotes/", &tok).await;
    assert_eq!(r.status, 404);
    // Token endpoint: oversized form → 413.
    let r = raw_post(
        &t,
        "/v1/oauth/token",
        "x",
        Some("application/x-www-form-urlencoded"),
        format!(
            "grant_type=client_credentials&pad={}",
            "z".repeat(1_100_000)
        )
        .into_bytes(),
    )
    .await;
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"], "invalid_request");

    // Still healthy.
    let id = t.quote(&tok, "EUR", "1523.45", "GBP", 1).await;
    assert_eq!(
        t.get_quote(&tok, &id).await["sellAmount"].to_string(),
        "1295.02"
    );
}

#[tokio::test]
async fn openapi_document_parses_and_covers_every_endpoint() {
    let t = start().await;
    let r = finish(
        t.http
            .get(t.url("/openapi.json"))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], t.sb.base_url());
    for (path, method) in [
        ("/v1/oauth/authorize", "get"),
        ("/v1/oauth/token", "post"),
        ("/v1/oauth/login", "post"),
        ("/v1/oauth/consent", "post"),
        ("/v1/gca/virtual-accounts", "get"),
        ("/v1/payments/quotes", "post"),
        ("/v1/payments/quotes/{quoteId}", "get"),
        ("/v1/payments/beneficiaries", "post"),
        ("/v1/payments/deals", "post"),
        ("/v1/payments/deals/spot", "post"),
    ] {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path}");
        assert!(
            op["responses"].as_object().is_some_and(|r| !r.is_empty()),
            "{path}"
        );
    }
    let supported = doc["components"]["schemas"]["SupportedCurrency"]["enum"]
        .as_array()
        .map(Vec::len);
    assert_eq!(supported, Some(fxpay_sandbox::rates::supported().len()));
    assert!(doc["components"]["securitySchemes"].is_object());
}

#[tokio::test]
async fn shutdown_ends_connections_and_is_idempotent() {
    let t = start().await;
    let tok = t.cc_token().await;
    assert_eq!(
        t.post_json("/v1/payments/quotes", &tok, &quote_body())
            .await
            .status,
        201
    );
    t.sb.shutdown();
    t.sb.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = t
        .http
        .post(t.url("/v1/payments/quotes"))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body(quote_body().to_string())
        .send()
        .await;
    assert!(r.is_err(), "the server is gone: {r:?}");
    let fresh = http_client();
    assert!(fresh.get(t.url("/openapi.json")).send().await.is_err());
    assert_eq!(t.sb.stats()["open_connections"], 0);
}

/// Sends raw bytes on a fresh connection and reads until the server closes it or `wait`
/// passes; returns everything read and whether the server closed.
async fn raw_exchange(t: &Ctx, request: &[u8], wait: Duration) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(t.sb.local_addr())
        .await
        .expect("connect");
    s.write_all(request).await.expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Ok(Err(_)) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Err(_) => return (String::from_utf8_lossy(&out).into_owned(), false),
        }
    }
}

#[tokio::test]
async fn answers_before_the_body_is_read_say_connection_close() {
    let t = start().await;
    let tok = t.cc_token().await;
    // 413 on a declared 2 MB body of which only a little is sent: the rest of the body would
    // be read as the next request, so the answer must say `Connection: close` and close.
    let head = format!(
        "POST /v1/payments/quotes HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\n\
content-type: application/json\r\ncontent-length: 2000000\r\n\r\n{{\"pad\":\""
    );
    let (text, closed) = raw_exchange(&t, head.as_bytes(), Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{text}"
    );
    assert!(closed, "the server closes the connection");

    // Chunked upload over the limit, no Content-Length: same.
    let mut chunked = format!(
        "POST /v1/payments/beneficiaries HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\n\
content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..17 {
        chunked.extend_from_slice(b"10000\r\n");
        chunked.extend_from_slice(&[b' '; 0x10000]);
        chunked.extend_from_slice(b"\r\n");
    }
    let (text, closed) = raw_exchange(&t, &chunked, Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text
        .to_ascii_lowercase()
        .contains("\r\nconnection: close\r\n"));
    assert!(closed);

    // A body that was read through keeps the connection open (keep-alive), even on errors.
    let body = "{\"buyCurrency\":\"usd\"}";
    let req = format!(
        "POST /v1/payments/quotes HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\n\
content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (text, closed) = raw_exchange(&t, req.as_bytes(), Duration::from_millis(500)).await;
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(!text.to_ascii_lowercase().contains("connection: close"));
    assert!(!closed, "keep-alive");
    // So does a request without a body.
    let req = format!(
        "GET /v1/payments/quotes/x HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {tok}\r\n\r\n"
    );
    let (text, closed) = raw_exchange(&t, req.as_bytes(), Duration::from_millis(500)).await;
    assert!(text.starts_with("HTTP/1.1 404 "), "{text}");
    assert!(!closed);
}

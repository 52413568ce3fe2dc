//! The opt-in rate limit: requests beyond it are answered 429 with `Retry-After` and the
//! usual `errors` body; the admin API, `/openapi.json` and the login pages are never limited;
//! `stats` counts the refusals and `reset` refills the bucket.
use std::time::Duration;

use fxpay_sandbox::{Sandbox, SandboxConfig};
use serde_json::Value;

async fn sandbox(rate_limit: Option<f64>) -> Sandbox {
    Sandbox::start(SandboxConfig {
        rate_limit,
        ..SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts")
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
}

async fn json(r: reqwest::Response) -> Value {
    let bytes = r.bytes().await.expect("a body");
    serde_json::from_slice(&bytes).expect("a JSON body")
}

async fn get(sb: &Sandbox, path: &str) -> reqwest::Response {
    http()
        .get(format!("{}{path}", sb.base_url()))
        .bearer_auth(sb.admin_token())
        .send()
        .await
        .expect("an answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_limit_are_answered_429_with_retry_after() {
    // One per second: a bucket of 1, refilled a second after it is taken (slow enough that no
    // token comes back between two requests of this test, however loaded the host).
    let sb = sandbox(Some(1.0)).await;
    // The first call passes (its own answer is 401: no bearer token)...
    let r = get(&sb, "/v1/payments/quotes/q").await;
    assert_eq!(r.status().as_u16(), 401);
    // ...the second is refused before it is processed.
    let r = get(&sb, "/v1/payments/quotes/q").await;
    assert_eq!(r.status().as_u16(), 429);
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    assert_eq!(retry_after.as_deref(), Some("1"));
    let body = json(r).await;
    assert_eq!(body["errors"][0]["errorCode"], "rate:limit:4290");
    assert_eq!(body["errors"][0]["fieldName"], "");
    // The token endpoint counts too, and answers both shapes.
    let r = http()
        .post(format!("{}/v1/oauth/token", sb.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .expect("an answer");
    assert_eq!(r.status().as_u16(), 429);
    let body = json(r).await;
    assert_eq!(body["error"], "temporarily_unavailable");
    assert_eq!(body["errors"][0]["errorCode"], "rate:limit:4290");
    // Never limited: the admin API, /openapi.json, the login page.
    for _ in 0..10 {
        assert_eq!(get(&sb, "/_sandbox/now").await.status().as_u16(), 200);
        assert_eq!(get(&sb, "/openapi.json").await.status().as_u16(), 200);
        assert_ne!(get(&sb, "/v1/oauth/authorize").await.status().as_u16(), 429);
    }
    let stats = json(get(&sb, "/_sandbox/stats").await).await;
    assert_eq!(stats["rate_limited"], 2);
    assert_eq!(stats["rate_limit"], 1.0);
    let seconds = stats["per_second"].as_array().cloned().unwrap_or_default();
    let sum = |k: &str| -> u64 { seconds.iter().filter_map(|s| s[k].as_u64()).sum() };
    assert_eq!((sum("requests"), sum("rate_limited")), (3, 2));
    // A token is back a second later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        get(&sb, "/v1/payments/quotes/q").await.status().as_u16(),
        401
    );
    // reset refills the bucket and zeroes the counts.
    sb.reset();
    assert_eq!(
        get(&sb, "/v1/payments/quotes/q").await.status().as_u16(),
        401
    );
    assert_eq!(
        get(&sb, "/v1/payments/quotes/q").await.status().as_u16(),
        429
    );
    let stats = sb.stats();
    assert_eq!(stats["rate_limited"], 1);
    sb.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_limit_nothing_is_refused() {
    let sb = sandbox(None).await;
    for _ in 0..50 {
        assert_eq!(
            get(&sb, "/v1/payments/quotes/q").await.status().as_u16(),
            401
        );
    }
    let stats = sb.stats();
    assert_eq!(stats["rate_limited"], 0);
    assert_eq!(stats["rate_limit"], Value::Null);
    sb.shutdown();
}

#[tokio::test]
async fn a_limit_that_is_not_a_positive_number_is_refused() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(sandbox_result(bad).await.is_err(), "{bad}");
    }
}

async fn sandbox_result(n: f64) -> std::io::Result<Sandbox> {
    Sandbox::start(SandboxConfig {
        rate_limit: Some(n),
        ..SandboxConfig::default()
    })
    .await
}

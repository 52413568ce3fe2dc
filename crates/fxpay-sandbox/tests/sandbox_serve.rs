//! Not a test: serves a sandbox for manual tools (schemathesis, wrk) when run explicitly:
//! `FXPAY_SANDBOX_PORT=8080 FXPAY_SANDBOX_SECONDS=600 FXPAY_SANDBOX_INFO=/tmp/sb.json \
//!  cargo test --test sandbox_serve -- --ignored --nocapture`
//! The info file gets the base URL, the credentials, a `payments` token, a `gca-aisp` token
//! and a quote id.
mod sandbox_support;

use std::time::Duration;

use fxpay_sandbox::{Sandbox, SandboxConfig};
use sandbox_support::Ctx;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "serves a sandbox for manual tools; run explicitly"]
async fn serve_for_manual_tools() {
    let env = |k: &str| std::env::var(k).ok();
    let port = env("FXPAY_SANDBOX_PORT")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let seconds: u64 = env("FXPAY_SANDBOX_SECONDS")
        .and_then(|p| p.parse().ok())
        .unwrap_or(60);
    let sb = Sandbox::start(SandboxConfig {
        port,
        ..SandboxConfig::default()
    })
    .await
    .expect("start");
    let t = Ctx {
        sb: sb.clone(),
        http: sandbox_support::http_client(),
    };
    let cc = t.cc_token().await;
    let user = t.user_tokens().await;
    let quote = t.quote(&cc, "GBP", "1000.00", "USD", 1).await;
    let info = json!({
        "base_url": sb.base_url(),
        "client_id": sb.client_id(),
        "client_secret": sb.client_secret(),
        "username": sb.username(),
        "password": sb.password(),
        "payments_token": cc,
        "user_token": user["access_token"],
        "quote_id": quote,
    });
    println!("{info}");
    if let Some(path) = env("FXPAY_SANDBOX_INFO") {
        std::fs::write(path, info.to_string()).expect("write info");
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    println!("{}", sb.stats());
    sb.shutdown();
}

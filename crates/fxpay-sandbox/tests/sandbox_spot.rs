//! Spot deals: a receiver that keeps failing, and one nobody listens on, get four delivery
//! attempts and no more. (The rest of the spot contract is tests/python/sandbox/test_sandbox_http_spot.py's.)
mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use serde_json::Value;

async fn spot(t: &Ctx, tok: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
    let mut req = t
        .http
        .post(t.url("/v1/payments/deals/spot"))
        .bearer_auth(tok)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    finish(req.send().await.expect("send")).await
}

/// A token, a USD beneficiary and a GBP→USD quote selling 1263.65.
async fn setup(t: &Ctx) -> (String, String, String) {
    let tok = t.cc_token().await;
    let ben = t.beneficiary(&tok, "USD").await;
    let q = t.quote(&tok, "GBP", "1000.00", "USD", 1).await;
    (tok, ben, q)
}

async fn wait_deliveries(t: &Ctx, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let d = t.sb.deliveries();
        if d.len() >= n {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("only {} deliveries, wanted {n}", t.sb.deliveries().len());
}

#[tokio::test]
async fn gives_up_after_four_attempts() {
    let t = start().await;
    let (tok, ben, q) = setup(&t).await;
    let rx = receiver(vec![500; 10]).await;
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q, &ben, "1263.65"),
        &[("callback-location", &rx.url)],
    )
    .await;
    assert_eq!(r.status, 202);
    rx.wait_for(4).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.received().len(), 4);
    let d = t.sb.deliveries();
    assert_eq!(d.len(), 4);
    assert!(d.iter().all(|x| x["status"] == 500));

    // A connection error is retried the same way.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let q2 = t.quote(&tok, "GBP", "1000.00", "USD", 1).await;
    let url = format!("http://127.0.0.1:{closed}/hook");
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q2, &ben, "1263.65"),
        &[("callback-location", &url)],
    )
    .await;
    assert_eq!(r.status, 202);
    let d = wait_deliveries(&t, 8).await;
    let tail = &d[4..];
    assert!(tail
        .iter()
        .all(|x| x["status"].is_null() && x["error"].as_str().is_some_and(|e| !e.is_empty())));
    assert_eq!(tail[3]["attempt"], 4);
    assert_eq!(
        t.sb.deals().len(),
        2,
        "the deal is booked even when nobody listens"
    );
}

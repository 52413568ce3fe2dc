//! Spot deals: 202 at once, DealCreated delivered to a local receiver with the nonce echoed,
//! fail events, retries after 5xx and connection errors, synchronous header/body errors.
mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use serde_json::{json, Value};

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
async fn success_event_with_nonce() {
    let t = start().await;
    let (tok, ben, q) = setup(&t).await;
    let rx = receiver(vec![]).await;
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q, &ben, "1263.65"),
        &[
            ("callback-location", &rx.url),
            ("callback-nonce", "n0nce-123"),
        ],
    )
    .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let pid = r.json()["processId"]
        .as_str()
        .expect("processId")
        .to_owned();
    assert!(uuid::Uuid::parse_str(&pid).is_ok());
    let got = rx.wait_for(1).await;
    assert_eq!(got[0].nonce.as_deref(), Some("n0nce-123"));
    assert_eq!(got[0].content_type.as_deref(), Some("application/json"));
    let ev = &got[0].body;
    assert_eq!(ev["eventType"], "DealCreated");
    assert_eq!(ev["status"], "success");
    assert_eq!(ev["eventBody"]["processId"], pid.as_str());
    let deals = t.sb.deals();
    assert_eq!(deals.len(), 1);
    assert_eq!(ev["eventBody"]["dealId"], deals[0]["dealId"]);
    assert_eq!(deals[0]["kind"], "spot");
    assert_eq!(deals[0]["processId"], pid.as_str());
    assert_eq!(deals[0]["channel"], "ExampleSecure");
    let dealid = deals[0]["dealId"].as_str().expect("id").to_owned();
    assert_eq!(t.sb.deal_status(&dealid).as_deref(), Some("Booked"));

    let d = wait_deliveries(&t, 1).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["processId"], pid.as_str());
    assert_eq!(d[0]["url"], rx.url.as_str());
    assert_eq!(d[0]["attempt"], 1);
    assert_eq!(d[0]["nonce"], "n0nce-123");
    assert_eq!(d[0]["status"], 200);
    assert_eq!(d[0]["error"], Value::Null);
    assert_eq!(&d[0]["body"], ev);
    assert!(d[0]["at"].as_f64().is_some());
    assert_eq!(t.sb.stats()["deliveries"], 1);
}

#[tokio::test]
async fn fail_event_lists_errors_and_books_nothing() {
    let t = start().await;
    let (tok, ben, q) = setup(&t).await;
    let rx = receiver(vec![]).await;
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q, &ben, "1263.60"),
        &[("callback-url", &rx.url), ("callback-nonce", "abc")],
    )
    .await;
    assert_eq!(r.status, 202);
    let pid = r.json()["processId"].as_str().expect("pid").to_owned();
    let got = rx.wait_for(1).await;
    let ev = &got[0].body;
    assert_eq!(ev["status"], "fail");
    assert_eq!(ev["eventType"], "DealCreated");
    assert_eq!(ev["eventBody"]["processId"], pid.as_str());
    assert!(ev["eventBody"].get("dealId").is_none());
    assert_eq!(
        ev["eventBody"]["errors"],
        json!([{"errorCode": "business:deal:2006", "fieldName": "Beneficiaries",
            "message": "the amounts sum to 1263.60, the quote's sellAmount is 1263.65"}])
    );
    assert!(t.sb.deals().is_empty());

    // The quote of a booked deal cannot be reused. When both callback headers are sent,
    // callback-location is the one used.
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q, &ben, "1263.65"),
        &[("callback-url", &rx.url)],
    )
    .await;
    assert_eq!(r.status, 202);
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q, &ben, "1263.65"),
        &[
            ("callback-url", "https://unused.example.test/hook"),
            ("callback-location", &rx.url),
        ],
    )
    .await;
    assert_eq!(r.status, 202);
    let got = rx.wait_for(3).await;
    let statuses: Vec<&str> = got
        .iter()
        .filter_map(|g| g.body["status"].as_str())
        .collect();
    assert_eq!(statuses, ["fail", "success", "fail"]);
    assert_eq!(
        got[2].body["eventBody"]["errors"][0]["errorCode"],
        "business:deal:2002"
    );
    assert_eq!(got[1].nonce, None, "no nonce sent, none echoed");
    assert_eq!(t.sb.deals().len(), 1);
}

#[tokio::test]
async fn retries_after_server_errors() {
    let t = start().await;
    let (tok, ben, q) = setup(&t).await;
    let rx = receiver(vec![500, 503]).await;
    let r = spot(
        &t,
        &tok,
        &Ctx::deal_body(&q, &ben, "1263.65"),
        &[("callback-location", &rx.url), ("callback-nonce", "k")],
    )
    .await;
    assert_eq!(r.status, 202);
    let got = rx.wait_for(3).await;
    assert!(got
        .iter()
        .all(|g| g.nonce.as_deref() == Some("k") && g.body == got[0].body));
    let d = wait_deliveries(&t, 3).await;
    let statuses: Vec<Value> = d.iter().map(|x| x["status"].clone()).collect();
    assert_eq!(statuses, [json!(500), json!(503), json!(200)]);
    let attempts: Vec<Value> = d.iter().map(|x| x["attempt"].clone()).collect();
    assert_eq!(attempts, [json!(1), json!(2), json!(3)]);
    let gap = d[2]["at"].as_f64().unwrap_or(0.0) - d[0]["at"].as_f64().unwrap_or(0.0);
    assert!(gap >= 0.55, "backoff 0.2 s + 0.4 s, got {gap}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(t.sb.deliveries().len(), 3, "no attempt after a 2xx");
    assert_eq!(t.sb.deals().len(), 1, "booked once despite the retries");
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

#[tokio::test]
async fn synchronous_errors() {
    let t = start().await;
    let (tok, ben, q) = setup(&t).await;
    let body = Ctx::deal_body(&q, &ben, "1263.65");
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    for (headers, want) in [
        (
            vec![("callback-location", "ftp://example.com/hook")],
            pair("validation:callback:1016", "callback-location"),
        ),
        (
            vec![("callback-location", "http://example.com/hook")],
            pair("validation:callback:1016", "callback-location"),
        ),
        (
            vec![("callback-url", "not a url")],
            pair("validation:callback:1016", "callback-url"),
        ),
        (
            vec![
                ("callback-location", "https://a.example/x"),
                ("callback-url", "http://example.com/y"),
            ],
            pair("validation:callback:1016", "callback-url"),
        ),
        (
            vec![("callback-nonce", &*"n".repeat(1025))],
            pair("validation:callback:1003", "callback-nonce"),
        ),
    ] {
        let r = spot(&t, &tok, &body, &headers).await;
        assert_eq!((r.status, r.fields()), (400, vec![want]), "{headers:?}");
    }
    // Malformed JSON and wrong types answer synchronously.
    let r = finish(
        t.http
            .post(t.url("/v1/payments/deals/spot"))
            .bearer_auth(&tok)
            .header("content-type", "application/json")
            .body("{\"quoteId\":")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(
        (r.status, r.codes()),
        (400, vec!["validation:request:1001".to_owned()])
    );
    let r = spot(
        &t,
        &tok,
        &json!({"quoteId": 5, "fundingSource": "Own account", "beneficiaries": {}}),
        &[],
    )
    .await;
    assert_eq!(
        r.fields(),
        [
            pair("validation:deal:1002", "QuoteId"),
            pair("validation:deal:1002", "Beneficiaries")
        ]
    );
    // Unauthenticated.
    let r = spot(&t, "bad-token", &body, &[]).await;
    assert_eq!(r.status, 401);
    assert!(t.sb.deals().is_empty());
    // Without a callback the deal is still processed (https callbacks are accepted too).
    let r = spot(&t, &tok, &body, &[]).await;
    assert_eq!(r.status, 202);
    for _ in 0..100 {
        if !t.sb.deals().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(t.sb.deals().len(), 1);
    assert!(t.sb.deliveries().is_empty());
}

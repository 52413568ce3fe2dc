//! Spot-deal processing and `DealCreated` deliveries.
//!
//! After the 202, a task runs the business checks, books the deal (kind `spot`) on success,
//! and POSTs `{"eventType":"DealCreated","status":"success"|"fail","eventBody":{...}}` to the
//! callback URL with `Content-Type: application/json` and the `callback-nonce` header echoed
//! byte for byte. A non-2xx answer or a connection error is retried: 4 attempts in all,
//! after 0.2 s, 0.4 s and 0.8 s (real time), or after the answer's `Retry-After` (delta
//! seconds, at most 60) when that is longer, so a receiver that answers 503 with
//! `Retry-After` during an outage is not given up on before it is back. Redirects are not
//! followed; each attempt has a 5 s timeout. Every attempt is recorded for
//! `Sandbox::deliveries`.
use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderValue;
use serde_json::{json, Value};

use crate::http::errors::FieldError;
use crate::payments::booking::{book, DealRequest};
use crate::state::{lock, DealKind, State};

/// Attempts per event.
pub const ATTEMPTS: u32 = 4;
/// Waits before attempts 2, 3 and 4.
pub const BACKOFF: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
];
/// The longest `Retry-After` a delivery honours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The wait a non-2xx answer asks for: its `Retry-After` in delta seconds (an HTTP date is
/// not honoured), capped at [`MAX_RETRY_AFTER`].
pub fn retry_after(headers: &axum::http::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// Timeout of one delivery attempt (the sandbox's HTTP client is built with it).
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how to deliver the event.
#[derive(Debug, Clone)]
pub struct Callback {
    pub url: url::Url,
    pub nonce: Option<HeaderValue>,
}

/// The `DealCreated` event for a processed spot deal.
pub fn event(process_id: &str, result: Result<String, Vec<FieldError>>) -> Value {
    match result {
        Ok(deal_id) => json!({
            "eventType": "DealCreated",
            "status": "success",
            "eventBody": {"processId": process_id, "dealId": deal_id},
        }),
        Err(errors) => json!({
            "eventType": "DealCreated",
            "status": "fail",
            "eventBody": {
                "processId": process_id,
                "errors": errors.iter().map(FieldError::to_json).collect::<Vec<_>>(),
            },
        }),
    }
}

/// Processes a spot deal in the background.
pub fn spawn(
    state: Arc<State>,
    process_id: String,
    client_id: String,
    req: DealRequest,
    callback: Option<Callback>,
) {
    tokio::spawn(async move {
        let result = book(&state, &client_id, &req, DealKind::Spot, Some(&process_id))
            .map(|d| d.id)
            .map_err(|e| e.errors);
        let body = event(&process_id, result);
        if let Some(cb) = callback {
            deliver(&state, &process_id, &cb, &body).await;
        }
    });
}

fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// Sends `body` with retries, recording each attempt.
async fn deliver(state: &State, process_id: &str, cb: &Callback, body: &Value) {
    let payload = body.to_string();
    for attempt in 1..=ATTEMPTS {
        if state.is_shut_down() {
            return;
        }
        let mut req = state
            .http
            .post(cb.url.clone())
            .header("content-type", "application/json")
            .body(payload.clone());
        if let Some(n) = &cb.nonce {
            req = req.header("callback-nonce", n.clone());
        }
        let outcome = req.send().await;
        let (status, error, asked) = match &outcome {
            Ok(resp) => (
                Some(resp.status().as_u16()),
                None,
                retry_after(resp.headers()),
            ),
            Err(e) => (None, Some(describe(e)), None),
        };
        lock(&state.deliveries).push(json!({
            "processId": process_id,
            "url": cb.url.as_str(),
            "attempt": attempt,
            "nonce": cb.nonce.as_ref().map(header_text),
            "body": body,
            "status": status,
            "error": error,
            "at": state.clock.now(),
        }));
        if status.is_some_and(|s| (200..300).contains(&s)) {
            return;
        }
        if let Some(wait) = BACKOFF.get(attempt as usize - 1) {
            tokio::time::sleep(asked.map_or(*wait, |a| a.max(*wait))).await;
        }
    }
}

/// A header value as text, for records.
fn header_text(v: &HeaderValue) -> String {
    String::from_utf8_lossy(v.as_bytes()).into_owned()
}

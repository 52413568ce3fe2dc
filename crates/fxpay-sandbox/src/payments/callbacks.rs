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
use crate::state::{lock, DealKind, SentEvent, State};

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

/// What a delivery was for: `callback` (a spot deal's own notification), `redelivery`
/// (`Sandbox::redeliver`) or `sent` (`Sandbox::send_deal_created`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Callback,
    Redelivery,
    Sent,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Callback => "callback",
            Kind::Redelivery => "redelivery",
            Kind::Sent => "sent",
        }
    }
}

/// One POST of `payload`, recorded in `deliveries`; returns the record and the answer's
/// `Retry-After`.
pub async fn attempt(
    state: &State,
    kind: Kind,
    process_id: &str,
    cb: &Callback,
    payload: &str,
    attempt: u32,
) -> (Value, Option<Duration>) {
    let mut req = state
        .http
        .post(cb.url.clone())
        .header("content-type", "application/json")
        .body(payload.to_owned());
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
    // The body as the JSON value it holds, or as text when it is not JSON.
    let body: Value =
        serde_json::from_str(payload).unwrap_or_else(|_| Value::String(payload.to_owned()));
    let record = json!({
        "processId": process_id,
        "url": cb.url.as_str(),
        "kind": kind.as_str(),
        "attempt": attempt,
        "nonce": cb.nonce.as_ref().map(header_text),
        "body": body,
        "status": status,
        "error": error,
        "at": state.clock.now(),
    });
    lock(&state.deliveries).push(record.clone());
    (record, asked)
}

/// Sends `body` with retries, recording each attempt.
async fn deliver(state: &State, process_id: &str, cb: &Callback, body: &Value) {
    let payload = body.to_string();
    lock(&state.events).insert(
        process_id.to_owned(),
        SentEvent {
            url: cb.url.clone(),
            nonce: cb.nonce.clone(),
            payload: payload.clone(),
        },
    );
    for n in 1..=ATTEMPTS {
        if state.is_shut_down() {
            return;
        }
        let (record, asked) = attempt(state, Kind::Callback, process_id, cb, &payload, n).await;
        if record["status"]
            .as_u64()
            .is_some_and(|s| (200..300).contains(&s))
        {
            return;
        }
        let attempt = n;
        if let Some(wait) = BACKOFF.get(attempt as usize - 1) {
            tokio::time::sleep(asked.map_or(*wait, |a| a.max(*wait))).await;
        }
    }
}

/// A header value as text, for records.
fn header_text(v: &HeaderValue) -> String {
    String::from_utf8_lossy(v.as_bytes()).into_owned()
}

/// Sends a spot deal's recorded `DealCreated` once more: same body, nonce and URL (one
/// attempt, no retries). `None` when no event of that process was ever sent.
pub async fn redeliver(state: &State, process_id: &str) -> Option<Value> {
    let sent = lock(&state.events).get(process_id).cloned()?;
    let cb = Callback {
        url: sent.url,
        nonce: sent.nonce,
    };
    let (record, _) = attempt(state, Kind::Redelivery, process_id, &cb, &sent.payload, 1).await;
    Some(record)
}

/// Why an event of the caller's choosing cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    Url(String),
    Nonce,
}

/// POSTs `payload` (a `DealCreated` the caller built) to `url` once, with `nonce` as its
/// `callback-nonce`; records and returns the delivery.
pub async fn send(
    state: &State,
    url: &str,
    payload: &str,
    nonce: Option<&str>,
) -> Result<Value, SendError> {
    // Loopback only: the document publishes this rule as the url's pattern, so nothing
    // that follows the document (a fuzzer included) makes the sandbox send off this machine.
    if !fxpay_core::is_loopback_callback_url(url) {
        return Err(SendError::Url(format!(
            "{url:?}: send_event delivers only to {}",
            fxpay_core::LOOPBACK_CALLBACK_URL_RULE
        )));
    }
    let url = url::Url::parse(url).map_err(|e| SendError::Url(format!("{url:?}: {e}")))?;
    let nonce = nonce
        .map(|n| HeaderValue::from_str(n).map_err(|_| SendError::Nonce))
        .transpose()?;
    // Any text is sent as it is (a receiver's test may need a body that is not JSON); the
    // process id is read from it when it is an event.
    let body: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
    let process_id = body["eventBody"]["processId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let cb = Callback { url, nonce };
    let (record, _) = attempt(state, Kind::Sent, &process_id, &cb, payload, 1).await;
    Ok(record)
}

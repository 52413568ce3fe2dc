//! The admin API under `/_sandbox/`: every control of `Sandbox` over HTTP, so a test can drive
//! a sandbox that runs in another process (`fxpay.testing.RemoteSandbox`).
//!
//! Every route needs `Authorization: Bearer <admin token>` (the token `python -m
//! fxpay.sandbox` prints as `FXPAY_ADMIN_TOKEN`), compared in constant time; without it, or
//! with a wrong one, 401. Bodies are JSON in and out. Admin requests are neither counted in
//! `stats` nor matched by faults.
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State as AxState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};
use subtle::ConstantTimeEq;

use crate::error::SandboxError;
use crate::http::body::json_object;
use crate::http::errors::{code, json_response, ApiError};
use crate::http::faults::Action;
use crate::oauth::bearer::bearer_token;
use crate::oauth::browser;
use crate::payments::callbacks::{self, SendError};
use crate::state::{lock, State};

/// The path prefix of the admin API.
pub const PREFIX: &str = "/_sandbox/";

/// The admin routes (merged into the sandbox's router).
pub fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/_sandbox/info", get(info))
        .route("/_sandbox/now", get(now))
        .route("/_sandbox/advance", post(advance))
        .route("/_sandbox/deal_status/{deal_id}", get(deal_status))
        .route("/_sandbox/deals", get(deals))
        .route("/_sandbox/deliveries", get(deliveries))
        .route("/_sandbox/stats", get(stats))
        .route("/_sandbox/fail_next", post(fail_next))
        .route("/_sandbox/drop_next", post(drop_next))
        .route("/_sandbox/delay_next", post(delay_next))
        .route("/_sandbox/approve", post(approve))
        .route("/_sandbox/register_client", post(register_client))
        .route("/_sandbox/reset", post(reset))
        .route("/_sandbox/redeliver", post(redeliver))
        .route("/_sandbox/set_virtual_accounts", post(set_virtual_accounts))
        .route("/_sandbox/send_event", post(send_event))
}

type Answer = Result<Response, ApiError>;

fn ok(v: Value) -> Answer {
    Ok(json_response(StatusCode::OK, v.to_string()))
}

/// 401 unless the request carries the admin token.
fn authorize(state: &State, headers: &HeaderMap) -> Result<(), ApiError> {
    let want = state.admin.token.as_bytes();
    let given = bearer_token(headers).unwrap_or("").as_bytes();
    if !want.is_empty() && bool::from(given.ct_eq(want)) {
        return Ok(());
    }
    Err(ApiError::one(
        StatusCode::UNAUTHORIZED,
        code::ADMIN_TOKEN,
        "Authorization",
        "the admin API needs Authorization: Bearer <admin token> (FXPAY_ADMIN_TOKEN)",
    )
    .with_header(
        header::WWW_AUTHENTICATE,
        "Bearer realm=\"fxpay-sandbox-admin\"",
    ))
}

fn bad(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::one(
        StatusCode::BAD_REQUEST,
        code::ADMIN_ARGUMENT,
        field,
        message,
    )
}

/// Authorizes, then reads the JSON object body.
async fn args(
    state: &State,
    headers: &HeaderMap,
    body: Body,
) -> Result<Map<String, Value>, ApiError> {
    authorize(state, headers)?;
    json_object(headers, body).await
}

fn text(m: &Map<String, Value>, name: &str) -> Result<String, ApiError> {
    match m.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(bad(name, format!("{name} must not be empty"))),
        _ => Err(bad(name, format!("{name} must be a string"))),
    }
}

/// The largest `seconds` an admin call takes (10^15 s, some 31.7 million years): any larger
/// JSON number would not survive the trip through an `f64`. The clock itself stops at
/// [`crate::clock::MAX_UNIX`].
pub const MAX_SECONDS: f64 = 1e15;

/// A finite number in `0..=MAX_SECONDS` (seconds).
fn seconds(m: &Map<String, Value>, name: &str) -> Result<f64, ApiError> {
    match m.get(name).and_then(Value::as_f64) {
        Some(s) if s.is_finite() && (0.0..=MAX_SECONDS).contains(&s) => Ok(s),
        _ => Err(bad(
            name,
            format!("{name} must be a number from 0 to {MAX_SECONDS:e}"),
        )),
    }
}

/// A JSON integer as JSON Schema reads one: `5` and `5.0` alike (a number whose fraction is
/// zero), within `0..=max`.
fn whole(v: &Value, max: u64) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return (n <= max).then_some(n);
    }
    let f = v.as_f64()?;
    (f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= max as f64).then_some(f as u64)
}

/// An optional unsigned integer: absent gives `None`; `null` too when `nullable`.
fn uint(
    m: &Map<String, Value>,
    name: &str,
    max: u64,
    nullable: bool,
) -> Result<Option<u64>, ApiError> {
    match m.get(name) {
        None => Ok(None),
        Some(Value::Null) if nullable => Ok(None),
        Some(v) => match whole(v, max) {
            Some(n) => Ok(Some(n)),
            None => Err(bad(name, format!("{name} must be an integer in 0..={max}"))),
        },
    }
}

/// A boolean; when absent, `default` (a required one has none). `null` is not a boolean.
fn boolean(m: &Map<String, Value>, name: &str, default: Option<bool>) -> Result<bool, ApiError> {
    match (m.get(name), default) {
        (Some(Value::Bool(b)), _) => Ok(*b),
        (None, Some(d)) => Ok(d),
        _ => Err(bad(name, format!("{name} must be true or false"))),
    }
}

async fn info(AxState(state): AxState<Arc<State>>, headers: HeaderMap) -> Answer {
    authorize(&state, &headers)?;
    ok(state.admin.info.clone())
}

async fn now(AxState(state): AxState<Arc<State>>, headers: HeaderMap) -> Answer {
    authorize(&state, &headers)?;
    ok(json!({"now": state.clock.now()}))
}

async fn advance(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    state.clock.advance(seconds(&m, "seconds")?);
    ok(json!({"now": state.clock.now()}))
}

async fn deal_status(
    AxState(state): AxState<Arc<State>>,
    Path(deal_id): Path<String>,
    headers: HeaderMap,
) -> Answer {
    authorize(&state, &headers)?;
    match state.deal_status(&deal_id) {
        Some(status) => ok(json!({"dealId": deal_id, "status": status})),
        None => Err(ApiError::one(
            StatusCode::NOT_FOUND,
            code::ADMIN_NO_DEAL,
            "deal_id",
            format!("no deal {deal_id:?} in this sandbox"),
        )),
    }
}

async fn deals(AxState(state): AxState<Arc<State>>, headers: HeaderMap) -> Answer {
    authorize(&state, &headers)?;
    ok(Value::Array(state.deals()))
}

async fn deliveries(AxState(state): AxState<Arc<State>>, headers: HeaderMap) -> Answer {
    authorize(&state, &headers)?;
    let list = lock(&state.deliveries).clone();
    ok(Value::Array(list))
}

async fn stats(AxState(state): AxState<Arc<State>>, headers: HeaderMap) -> Answer {
    authorize(&state, &headers)?;
    ok(state.stats_json())
}

async fn fail_next(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    let path = text(&m, "path")?;
    let status = match uint(&m, "status", 599, false)? {
        Some(s) if s >= 100 => s as u16,
        _ => return Err(bad("status", "status must be an HTTP status (100..=599)")),
    };
    let times = uint(&m, "times", u64::from(u32::MAX), false)?.unwrap_or(1) as u32;
    let retry_after = uint(&m, "retry_after", u64::from(u32::MAX), true)?;
    state.faults.add(
        &path,
        Action::Fail {
            status,
            retry_after,
        },
        times,
    );
    ok(json!({}))
}

async fn drop_next(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    let path = text(&m, "path")?;
    let after_processing = boolean(&m, "after_processing", None)?;
    state
        .faults
        .add(&path, Action::Drop { after_processing }, 1);
    ok(json!({}))
}

async fn delay_next(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    let path = text(&m, "path")?;
    let seconds = seconds(&m, "seconds")?;
    state.faults.add(&path, Action::Delay { seconds }, 1);
    ok(json!({}))
}

async fn approve(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    let base = state.admin.info["base_url"].as_str().unwrap_or_default();
    let auth_url = browser::own_authorize_url(base, &text(&m, "auth_url")?)
        .map_err(|e| bad("auth_url", format!("sandbox approve failed: {e}")))?;
    let allow = boolean(&m, "allow", Some(true))?;
    let admin = &state.admin;
    match browser::approve(
        &auth_url,
        allow,
        &admin.username,
        &admin.password,
        admin.root.as_ref(),
    )
    .await
    {
        Ok(url) => ok(json!({"redirect_url": url})),
        // The authorize page refused the request outright (an unknown client or redirect
        // URI, or none given): what the URL names does not exist here.
        Err(SandboxError::UnexpectedStatus {
            step: "authorize",
            message,
            ..
        }) => Err(ApiError::one(
            StatusCode::NOT_FOUND,
            code::ADMIN_NO_CLIENT,
            "auth_url",
            format!("the authorize page refused auth_url: {message}"),
        )),
        Err(e) => Err(ApiError::one(
            StatusCode::UNPROCESSABLE_ENTITY,
            code::ADMIN_APPROVE,
            "auth_url",
            format!("sandbox approve failed: {e}"),
        )),
    }
}

async fn register_client(
    AxState(state): AxState<Arc<State>>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let m = args(&state, &headers, body).await?;
    let id = text(&m, "client_id")?;
    let secret = text(&m, "client_secret")?;
    let uris: Vec<String> = match m.get("redirect_uris") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("redirect_uris", "redirect_uris must be a list of strings"))?,
        Some(_) => {
            return Err(bad(
                "redirect_uris",
                "redirect_uris must be a list of strings",
            ))
        }
    };
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    state
        .register_client(&id, &secret, &uris)
        .map_err(|e| bad("redirect_uris", e))?;
    ok(json!({}))
}

async fn set_virtual_accounts(
    AxState(state): AxState<Arc<State>>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let m = args(&state, &headers, body).await?;
    let max = crate::accounts::MAX_GENERATED as u64;
    let count = uint(&m, "count", max, false)?
        .ok_or_else(|| bad("count", format!("count must be an integer in 0..={max}")))?;
    let page_size = match uint(&m, "page_size", max, true)? {
        Some(0) => return Err(bad("page_size", "page_size must be at least 1")),
        p => p.map(|p| p as usize),
    };
    crate::accounts::set_generated(&state, count as usize, page_size);
    ok(json!({}))
}

async fn redeliver(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    let process_id = text(&m, "process_id")?;
    match callbacks::redeliver(&state, &process_id).await {
        Some(d) => ok(d),
        None => Err(ApiError::one(
            StatusCode::NOT_FOUND,
            code::ADMIN_NO_DEAL,
            "process_id",
            format!("no DealCreated was sent for process {process_id:?} in this sandbox"),
        )),
    }
}

async fn send_event(AxState(state): AxState<Arc<State>>, headers: HeaderMap, body: Body) -> Answer {
    let m = args(&state, &headers, body).await?;
    let url = text(&m, "url")?;
    let payload = text(&m, "body")?;
    let nonce = match m.get("nonce") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("nonce", "nonce must be a string or null")),
    };
    match callbacks::send(&state, &url, &payload, nonce.as_deref()).await {
        Ok(d) => ok(d),
        Err(SendError::Url(e)) => Err(bad("url", format!("url is not deliverable: {e}"))),
        Err(SendError::Nonce) => Err(bad("nonce", "nonce is not a valid header value")),
    }
}

async fn reset(AxState(state): AxState<Arc<State>>, headers: HeaderMap) -> Answer {
    authorize(&state, &headers)?;
    state.reset();
    ok(json!({}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use bytes::Bytes;
    use tokio::sync::watch;

    fn state(token: &str) -> State {
        let (_tx, rx) = watch::channel(false);
        let mut st = State::new(reqwest::Client::new(), rx, Bytes::new());
        st.admin.token = token.to_owned();
        st
    }

    fn bearer(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(header::AUTHORIZATION, v);
        }
        h
    }

    #[test]
    fn only_the_admin_token_passes() {
        let st = state("s3cret-token");
        assert!(authorize(&st, &bearer("Bearer s3cret-token")).is_ok());
        assert!(authorize(&st, &bearer("bearer s3cret-token")).is_ok());
        for wrong in [
            "",
            "Bearer",
            "Bearer s3cret-toke",
            "Bearer s3cret-token2",
            "Basic s3cret-token",
        ] {
            let err = authorize(&st, &bearer(wrong)).err().map(|e| e.status);
            assert_eq!(err, Some(StatusCode::UNAUTHORIZED), "{wrong:?}");
        }
        // A sandbox without a token refuses everything, the empty token included.
        let none = state("");
        assert!(authorize(&none, &bearer("Bearer ")).is_err());
        assert!(authorize(&none, &HeaderMap::new()).is_err());
    }

    #[test]
    fn arguments_are_checked() {
        let m: Map<String, Value> = serde_json::from_str(
            r#"{"path": "/x", "empty": "", "n": 5, "neg": -1, "big": 1e400, "f": 1.5, "b": true}"#,
        )
        .unwrap_or_default();
        assert_eq!(text(&m, "path").ok().as_deref(), Some("/x"));
        assert!(text(&m, "empty").is_err() && text(&m, "n").is_err());
        assert_eq!(seconds(&m, "f").ok(), Some(1.5));
        assert!(seconds(&m, "neg").is_err() && seconds(&m, "missing").is_err());
        assert!(seconds(&m, "big").is_err());
        assert_eq!(uint(&m, "n", 10, false).ok(), Some(Some(5)));
        assert_eq!(uint(&m, "missing", 10, false).ok(), Some(None));
        assert!(uint(&m, "n", 4, false).is_err() && uint(&m, "neg", 10, false).is_err());
        assert!(uint(&m, "f", 10, false).is_err());
        assert_eq!(boolean(&m, "b", None).ok(), Some(true));
        assert_eq!(boolean(&m, "missing", Some(true)).ok(), Some(true));
        // JSON Schema integers: 380.0 is one; null is not, unless the field is nullable.
        let m: Map<String, Value> =
            serde_json::from_str(r#"{"s": 380.0, "null": null, "big": 1e16, "x": 2.5}"#)
                .unwrap_or_default();
        assert_eq!(uint(&m, "s", 599, false).ok(), Some(Some(380)));
        assert!(uint(&m, "null", 10, false).is_err());
        assert_eq!(uint(&m, "null", 10, true).ok(), Some(None));
        assert!(uint(&m, "x", 10, false).is_err());
        assert!(seconds(&m, "big").is_err());
        assert!(boolean(&m, "null", Some(true)).is_err());
        assert!(boolean(&m, "missing", None).is_err() && boolean(&m, "n", None).is_err());
    }
}

//! `POST /v1/payments/deals` (synchronous) and `POST /v1/payments/deals/spot` (asynchronous).
//!
//! Body: `quoteId` (UUID), `fundingSource` (exactly `Own account` or `Direct Debit`),
//! `channel` (optional, ≤ 64), `beneficiaries` (1..=100 entries of `beneficiaryId` (UUID),
//! `amount` (> 0, at most 3 decimals), `payReason` (≤ 140), `payReference` (≤ 140)). Field errors are always
//! synchronous 400s. Business checks (see `http/errors.rs`, `business:deal:*`): the quote exists
//! and belongs to the client and has not been used (a quote books one deal: reuse → 409);
//! each beneficiary exists, belongs to the client, appears once and receives the quote's sell
//! currency; the count equals the quote's `beneficiaries`; the amounts sum exactly to the
//! quote's `sellAmount`. The deal endpoint answers them synchronously (404 when the quote or a
//! beneficiary is unknown, else 422, with every error listed); the spot endpoint answers 202
//! `{processId}` at once and reports them in the `DealCreated` event.
use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use crate::http::errors::{json_response, ApiError, Field};
use crate::http::extract::{Caller, JsonObject, Payments};
use crate::payments::booking::{book, DealLine, DealRequest};
use crate::payments::callbacks::{self, Callback};
use crate::payments::fields::Checker;
use crate::state::{DealKind, State};

/// Allowed values of `fundingSource`.
pub const FUNDING_SOURCES: &[&str] = &["Own account", "Direct Debit"];

/// Field validation of a deal body; errors are collected into `c`.
fn parse(c: &mut Checker, obj: &Map<String, Value>) -> Option<DealRequest> {
    let quote_id = c.uuid(obj, "quoteId", "QuoteId");
    let funding_source = c.one_of(obj, "fundingSource", "FundingSource", FUNDING_SOURCES);
    let channel = c.opt_string(obj, "channel", "Channel", 64);
    let mut lines = Vec::new();
    if let Some(items) = c.array(obj, "beneficiaries", "Beneficiaries") {
        if items.is_empty() {
            c.push(
                Field::Empty,
                "Beneficiaries",
                "beneficiaries must list at least one beneficiary",
            );
        } else if items.len() > 100 {
            c.push(
                Field::OutOfRange,
                "Beneficiaries",
                "beneficiaries may list at most 100 entries",
            );
        }
        for (i, item) in items.iter().enumerate().take(100) {
            let field = format!("Beneficiaries[{i}]");
            let Value::Object(o) = item else {
                c.push(
                    Field::WrongType,
                    &field,
                    "each beneficiary must be an object",
                );
                continue;
            };
            let id = c.uuid(o, "beneficiaryId", &format!("{field}.BeneficiaryId"));
            let amount = c.amount(o, "amount", &format!("{field}.Amount"), Decimal::ZERO, 3);
            let reason = c.string(o, "payReason", &format!("{field}.PayReason"), 140);
            let reference = c.string(o, "payReference", &format!("{field}.PayReference"), 140);
            if let (Some(beneficiary_id), Some(amount), Some(pay_reason), Some(pay_reference)) =
                (id, amount, reason, reference)
            {
                lines.push(DealLine {
                    beneficiary_id,
                    amount,
                    pay_reason,
                    pay_reference,
                });
            }
        }
    }
    match (quote_id, funding_source, channel) {
        (Some(quote_id), Some(funding_source), Some(channel)) if c.is_ok() => Some(DealRequest {
            quote_id,
            funding_source,
            channel,
            lines,
        }),
        _ => None,
    }
}

/// `POST /v1/payments/deals`.
pub async fn create(
    AxState(state): AxState<Arc<State>>,
    caller: Caller<Payments>,
    headers: HeaderMap,
    JsonObject(obj): JsonObject,
) -> Response {
    // Only a spot deal sends a `DealCreated` notification. Callback headers here would never
    // be answered, so they are refused rather than dropped: a caller must not wait in silence.
    let mut header_check = Checker::new("callback");
    for name in CALLBACK_HEADERS {
        if headers.contains_key(name) {
            header_check.push(
                Field::CallbackNotDelivered,
                name,
                format!(
                    "{name} is not accepted on POST /v1/payments/deals, which answers \
                     synchronously and sends no notification; use POST /v1/payments/deals/spot"
                ),
            );
        }
    }
    let mut c = Checker::new("deal");
    let deal_req = parse(&mut c, &obj);
    let Some(deal_req) = deal_req.filter(|_| header_check.is_ok()) else {
        let mut errors = header_check.errors;
        errors.extend(c.errors);
        return ApiError::validation(errors).into_response();
    };
    match book(
        &state,
        &caller.principal.client_id,
        &deal_req,
        DealKind::Deal,
        None,
    ) {
        Ok(deal) => json_response(
            StatusCode::CREATED,
            json!({"dealId": deal.id, "status": "Booked"}).to_string(),
        ),
        Err(e) => e.into_response(),
    }
}

/// Checks a callback URL exactly as the OpenAPI document describes it: the rule of
/// `fxpay_core::parse_callback_url`, whose `CALLBACK_URL_PATTERN` the document publishes (the client checks the
/// same rule before sending).
pub fn callback_url(s: &str) -> Option<url::Url> {
    fxpay_core::parse_callback_url(s)
}

/// The headers that ask for a `DealCreated` notification.
pub const CALLBACK_HEADERS: [&str; 3] = ["callback-location", "callback-url", "callback-nonce"];

/// Reads and checks the callback headers; errors go into `c`.
fn callback_headers(c: &mut Checker, headers: &HeaderMap) -> Option<Option<Callback>> {
    let nonce = headers.get("callback-nonce").cloned();
    if nonce.as_ref().is_some_and(|n| n.len() > 1024) {
        c.push(
            Field::TooLong,
            "callback-nonce",
            "callback-nonce must be at most 1024 bytes",
        );
    }
    // Both names are checked; when both are sent, callback-location is the one used.
    let mut chosen = None;
    for name in ["callback-url", "callback-location"] {
        let Some(value) = headers.get(name) else {
            continue;
        };
        match value.to_str().ok().map(str::trim).and_then(callback_url) {
            Some(url) => chosen = Some(url),
            None => c.push(
                Field::BadCallbackUrl,
                name,
                format!("{name} must be {}", fxpay_core::CALLBACK_URL_RULE),
            ),
        }
    }
    c.is_ok()
        .then_some(chosen.map(|url| Callback { url, nonce }))
}

/// `POST /v1/payments/deals/spot`.
pub async fn create_spot(
    AxState(state): AxState<Arc<State>>,
    caller: Caller<Payments>,
    headers: HeaderMap,
    JsonObject(obj): JsonObject,
) -> Response {
    let mut header_check = Checker::new("callback");
    let callback = callback_headers(&mut header_check, &headers);
    let mut c = Checker::new("deal");
    let deal_req = parse(&mut c, &obj);
    let (Some(deal_req), Some(callback)) = (deal_req, callback) else {
        let mut errors = header_check.errors;
        errors.extend(c.errors);
        return ApiError::validation(errors).into_response();
    };
    let process_id = crate::ids::uuid();
    callbacks::spawn(
        state.clone(),
        process_id.clone(),
        caller.principal.client_id,
        deal_req,
        callback,
    );
    json_response(
        StatusCode::ACCEPTED,
        json!({"processId": process_id}).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_urls() {
        for ok in [
            "https://app.example.test/hook",
            "https://0.com",
            "http://127.0.0.1:8080/hook",
            "http://localhost/x?y=1",
            "http://LOCALHOST/",
            "http://[::1]:9/h",
            "http://127.255.0.9",
        ] {
            assert!(callback_url(ok).is_some(), "{ok}");
        }
        for bad in [
            "http://example.com/hook",
            "ftp://x/y",
            "http://127.0.0.1.evil.test/",
            "http://127.0.0.01/",
            "http://127.1:9/x",
            "https:///path",
            "https://:443/hook",
            "https://@/hook",
            "https://a.test:99999/hook",
            "http://127.0.0.1:99999/h",
            "https://a b/",
            "https://a/%zz",
            "not a url",
            "",
        ] {
            assert!(callback_url(bad).is_none(), "{bad}");
        }
    }
}

//! `POST /v1/payments/deals` (synchronous) and `POST /v1/payments/deals/spot` (asynchronous).
//!
//! Body: `quoteId` (UUID), `fundingSource` (exactly `Own account` or `Direct Debit`),
//! `channel` (optional, ≤ 64), `beneficiaries` (1..=100 entries of `beneficiaryId` (UUID),
//! `amount` (> 0, at most 3 decimals), `payReason` (≤ 140), `payReference` (≤ 140)). Field errors are always
//! synchronous 400s. Business checks (see `errors.rs`, `business:deal:*`): the quote exists
//! and belongs to the client and has not been used (a quote books one deal: reuse → 409);
//! each beneficiary exists, belongs to the client, appears once and receives the quote's sell
//! currency; the count equals the quote's `beneficiaries`; the amounts sum exactly to the
//! quote's `sellAmount`. The deal endpoint answers them synchronously (404 when the quote or a
//! beneficiary is unknown, else 422, with every error listed); the spot endpoint answers 202
//! `{processId}` at once and reports them in the `DealCreated` event.
use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use super::bearer;
use super::body::json_object;
use super::callbacks::{self, Callback};
use super::errors::{code, json_response, ApiError, Field, FieldError};
use super::fields::{number, Checker};
use super::quotes;
use super::rates;
use super::state::{lock, Deal, DealKind, Scope, State, FREEBIES};

/// Allowed values of `fundingSource`.
pub const FUNDING_SOURCES: &[&str] = &["Own account", "Direct Debit"];

#[derive(Debug, Clone)]
pub struct DealLine {
    pub beneficiary_id: String,
    pub amount: Decimal,
    pub pay_reason: String,
    pub pay_reference: String,
}

#[derive(Debug, Clone)]
pub struct DealRequest {
    pub quote_id: String,
    pub funding_source: &'static str,
    pub channel: Option<String>,
    pub lines: Vec<DealLine>,
}

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

/// Runs the business checks and books the deal atomically.
pub fn book(
    state: &State,
    client_id: &str,
    req: &DealRequest,
    kind: DealKind,
    process_id: Option<&str>,
) -> Result<Deal, ApiError> {
    let quote = quotes::find(state, &req.quote_id).filter(|q| q.client_id == client_id);
    let mut ledger = lock(&state.ledger);
    let mut errors = Vec::new();
    match &quote {
        None => errors.push(FieldError::new(
            code::QUOTE_NOT_FOUND,
            "QuoteId",
            "no such quote for this client",
        )),
        Some(q) => {
            if let Some(deal) = ledger.used_quotes.get(&q.id) {
                return Err(ApiError::one(
                    StatusCode::CONFLICT,
                    code::QUOTE_USED,
                    "QuoteId",
                    format!("the quote was already used by deal {deal}"),
                ));
            }
            if req.lines.len() != q.beneficiaries as usize {
                errors.push(FieldError::new(
                    code::COUNT_MISMATCH,
                    "Beneficiaries",
                    format!(
                        "the quote is for {} beneficiaries, the deal lists {}",
                        q.beneficiaries,
                        req.lines.len()
                    ),
                ));
            }
        }
    }
    let mut seen = HashSet::new();
    let mut sum = Some(Decimal::ZERO);
    for (i, line) in req.lines.iter().enumerate() {
        let field = format!("Beneficiaries[{i}].BeneficiaryId");
        if !seen.insert(line.beneficiary_id.as_str()) {
            errors.push(FieldError::new(
                code::DUPLICATE_BENEFICIARY,
                field.clone(),
                "the same beneficiary is listed twice",
            ));
        }
        match ledger
            .beneficiaries
            .get(&line.beneficiary_id)
            .filter(|b| b.client_id == client_id)
        {
            None => errors.push(FieldError::new(
                code::BENEFICIARY_NOT_FOUND,
                field,
                "no such beneficiary for this client",
            )),
            Some(b) => {
                if let Some(q) = &quote {
                    if b.currency != q.sell_currency {
                        errors.push(FieldError::new(
                            code::CURRENCY_MISMATCH,
                            field,
                            format!(
                                "the beneficiary receives {}, the quote sells {}",
                                b.currency, q.sell_currency
                            ),
                        ));
                    }
                }
            }
        }
        if let Some(q) = &quote {
            let places = rates::minor_units(&q.sell_currency);
            if line.amount.normalize().scale() > places {
                errors.push(FieldError::new(
                    code::AMOUNT_DECIMALS,
                    format!("Beneficiaries[{i}].Amount"),
                    format!(
                        "{} amounts have at most {places} decimal places",
                        q.sell_currency
                    ),
                ));
            }
        }
        sum = sum.and_then(|s| s.checked_add(line.amount));
    }
    if let Some(q) = &quote {
        if sum != Some(q.sell_amount) {
            let got = sum
                .map(|s| s.to_string())
                .unwrap_or_else(|| "too much".to_owned());
            errors.push(FieldError::new(
                code::SUM_MISMATCH,
                "Beneficiaries",
                format!(
                    "the amounts sum to {got}, the quote's sellAmount is {}",
                    q.sell_amount
                ),
            ));
        }
    }
    let quote = match quote {
        Some(q) if errors.is_empty() => q,
        _ => {
            let missing = errors
                .iter()
                .any(|e| e.code == code::QUOTE_NOT_FOUND || e.code == code::BENEFICIARY_NOT_FOUND);
            let status = if missing {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            return Err(ApiError::new(status, errors));
        }
    };
    let deal = Deal {
        id: super::ids::uuid(),
        quote_id: quote.id.clone(),
        process_id: process_id.map(str::to_owned),
        kind,
        client_id: client_id.to_owned(),
        funding_source: req.funding_source.to_owned(),
        channel: req.channel.clone(),
        beneficiaries: req
            .lines
            .iter()
            .map(|l| {
                json!({
                    "beneficiaryId": l.beneficiary_id,
                    "amount": number(&l.amount),
                    "payReason": l.pay_reason,
                    "payReference": l.pay_reference,
                })
            })
            .collect(),
        created_at: state.clock.now(),
    };
    let index = ledger.deals.len();
    ledger.deal_index.insert(deal.id.clone(), index);
    ledger.used_quotes.insert(quote.id.clone(), deal.id.clone());
    if quote.freebie {
        let claimed = ledger.claimed.entry(client_id.to_owned()).or_insert(0);
        *claimed = (*claimed + 1).min(FREEBIES);
    }
    ledger.deals.push(deal.clone());
    Ok(deal)
}

/// `POST /v1/payments/deals`.
pub async fn create(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let principal = match bearer::check(&state, req.headers(), Scope::Payments) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let (parts, body) = req.into_parts();
    let obj = match json_object(&parts.headers, body).await {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let mut c = Checker::new("deal");
    let Some(deal_req) = parse(&mut c, &obj) else {
        return ApiError::validation(c.errors).into_response();
    };
    match book(
        &state,
        &principal.client_id,
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

/// A decimal octet without leading zeros (`0`..=`255`).
fn octet(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 3
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'))
        && s.parse::<u16>().is_ok_and(|n| n <= 255)
}

/// The loopback hosts an http callback may use: `localhost`, `127.x.y.z`, `[::1]`.
fn loopback_authority(rest: &str) -> bool {
    let end = |tail: &str| tail.is_empty() || tail.starts_with([':', '/', '?', '#']);
    if let Some(tail) = rest.strip_prefix("[::1]") {
        return end(tail);
    }
    let host_len = rest.find([':', '/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..host_len];
    if host == "localhost" {
        return true;
    }
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() == 4 && parts[0] == "127" && parts[1..].iter().all(|p| octet(p))
}

/// Checks a callback URL exactly as the OpenAPI document describes it: RFC 3986 characters
/// with valid percent escapes, and `https://` with a host, or `http://` to a loopback host.
pub fn callback_url(s: &str) -> Option<url::Url> {
    const ALLOWED: &str = "-._~:/?#[]@!$&'()*+,;=%";
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ALLOWED.contains(c))
    {
        return None;
    }
    let bytes = s.as_bytes();
    let escapes_ok = bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if !escapes_ok {
        return None;
    }
    let prefix_ok = if let Some(rest) = s.strip_prefix("https://") {
        rest.chars()
            .next()
            .is_some_and(|c| !matches!(c, '/' | '?' | '#'))
    } else if let Some(rest) = s.strip_prefix("http://") {
        loopback_authority(rest)
    } else {
        false
    };
    if !prefix_ok {
        return None;
    }
    let url = url::Url::parse(s).ok()?;
    let host_ok = match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Domain(d))) => d == "localhost",
        _ => false,
    };
    host_ok.then_some(url)
}

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
                format!("{name} must be an https URL, or an http URL on a loopback host"),
            ),
        }
    }
    c.is_ok()
        .then_some(chosen.map(|url| Callback { url, nonce }))
}

/// `POST /v1/payments/deals/spot`.
pub async fn create_spot(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let principal = match bearer::check(&state, req.headers(), Scope::Payments) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let (parts, body) = req.into_parts();
    let obj = match json_object(&parts.headers, body).await {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let mut header_check = Checker::new("callback");
    let callback = callback_headers(&mut header_check, &parts.headers);
    let mut c = Checker::new("deal");
    let deal_req = parse(&mut c, &obj);
    let (Some(deal_req), Some(callback)) = (deal_req, callback) else {
        let mut errors = header_check.errors;
        errors.extend(c.errors);
        return ApiError::validation(errors).into_response();
    };
    let process_id = super::ids::uuid();
    callbacks::spawn(
        state.clone(),
        process_id.clone(),
        principal.client_id,
        deal_req,
        callback,
    );
    json_response(
        StatusCode::ACCEPTED,
        json!({"processId": process_id}).to_string(),
    )
}

/// A header value as text, for records.
pub fn header_text(v: &HeaderValue) -> String {
    String::from_utf8_lossy(v.as_bytes()).into_owned()
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
            "http://LOCALHOST/",
            "https:///path",
            "https://a b/",
            "https://a/%zz",
            "not a url",
            "",
        ] {
            assert!(callback_url(bad).is_none(), "{bad}");
        }
    }
}

//! `POST /v1/payments/quotes` and `GET /v1/payments/quotes/{id}`.
//!
//! Request: `buyCurrency`, `sellCurrency` (ISO 4217 codes the rate table knows, different),
//! `buyAmount` (number, at least 1 and at most 1e9, no more decimals than the buy currency's
//! minor unit), `beneficiaries` (integer 1..=100, default 1 when absent; `null` is refused). Pricing: see `rates.rs`. The quote's
//! `freebies` are the client's allowance when the quote was made; while one remains the fee
//! is 0 and a deal on the quote claims it. Quotes do not expire; one deal may use a quote.
use std::sync::Arc;

use axum::extract::{Request, State as AxState};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use super::bearer;
use super::body::json_object;
use super::errors::{code, json_response, ApiError, Field};
use super::fields::{number, Checker};
use super::rates::{self, PriceError};
use super::state::{lock, read, write, Quote, Scope, State};

const PREFIX: &str = "/v1/payments/quotes/";

/// The validated fields of a quote request.
struct QuoteRequest {
    buy: String,
    sell: String,
    amount: Decimal,
    beneficiaries: u32,
}

fn validate(obj: &Map<String, Value>) -> Result<QuoteRequest, ApiError> {
    let mut c = Checker::new("quote");
    let buy = c.currency(obj, "buyCurrency", "BuyCurrency", true);
    let sell = c.currency(obj, "sellCurrency", "SellCurrency", true);
    let places = buy.as_deref().map(rates::minor_units).unwrap_or(3);
    let amount = c.amount(obj, "buyAmount", "BuyAmount", Decimal::ONE, places);
    let beneficiaries = match obj.get("beneficiaries") {
        None => Some(1),
        Some(_) => c.integer(obj, "beneficiaries", "Beneficiaries", 1, 100),
    };
    if let (Some(b), Some(s)) = (&buy, &sell) {
        if b == s {
            c.push(
                Field::SameCurrency,
                "SellCurrency",
                "sellCurrency must differ from buyCurrency",
            );
        }
    }
    match (buy, sell, amount, beneficiaries) {
        (Some(buy), Some(sell), Some(amount), Some(n)) if c.is_ok() => Ok(QuoteRequest {
            buy,
            sell,
            amount,
            beneficiaries: u32::try_from(n).unwrap_or(1),
        }),
        _ => Err(ApiError::validation(c.errors)),
    }
}

/// Prices and stores a quote for `client_id`; returns its id.
fn create_quote(state: &State, client_id: &str, q: QuoteRequest) -> Result<String, ApiError> {
    let (total, claimed, remaining) = lock(&state.ledger).freebies(client_id);
    let free = remaining > 0;
    let price = rates::price(&q.buy, &q.sell, q.amount, free).map_err(|e| {
        let mut c = Checker::new("quote");
        match e {
            PriceError::TooSmall => c.push(
                Field::TooSmall,
                "BuyAmount",
                format!(
                    "buyAmount is too small: the {} amount rounds to zero",
                    q.sell
                ),
            ),
            PriceError::Overflow => c.push(Field::TooLarge, "BuyAmount", "buyAmount is too large"),
            PriceError::Unsupported => c.push(
                Field::UnsupportedCurrency,
                "BuyCurrency",
                "no rate for this pair",
            ),
        }
        ApiError::validation(c.errors)
    })?;
    let id = super::ids::uuid();
    let body = json!({
        "id": id,
        "buyCurrency": q.buy,
        "buyAmount": number(&q.amount),
        "sellCurrency": q.sell,
        "sellAmount": number(&price.sell_amount),
        "customerRate": number(&price.customer_rate),
        "inverseCustomerRate": number(&price.inverse_rate),
        "fee": number(&price.fee),
        "feeCurrency": q.buy,
        "freebies": {"total": total, "claimed": claimed, "remaining": remaining},
        "beneficiaries": q.beneficiaries,
        "createdAt": state.clock.now_rfc3339(),
    });
    let quote = Quote {
        id: id.clone(),
        client_id: client_id.to_owned(),
        sell_currency: q.sell,
        sell_amount: price.sell_amount,
        beneficiaries: q.beneficiaries,
        freebie: free,
        body: Bytes::from(body.to_string()),
    };
    write(&state.quotes).insert(id.clone(), Arc::new(quote));
    Ok(id)
}

/// `POST /v1/payments/quotes`.
pub async fn create(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let principal = match bearer::check(&state, req.headers(), Scope::Payments) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let (parts, body) = req.into_parts();
    let result = match json_object(&parts.headers, body).await {
        Ok(obj) => validate(&obj).and_then(|q| create_quote(&state, &principal.client_id, q)),
        Err(e) => Err(e),
    };
    match result {
        Ok(id) => {
            let mut resp = json_response(StatusCode::CREATED, json!({"id": id}).to_string());
            if let Ok(v) = HeaderValue::from_str(&format!("{PREFIX}{id}")) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            resp
        }
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/payments/quotes/{id}`: the precomputed body, for the owner only.
pub async fn get(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let principal = match bearer::check(&state, req.headers(), Scope::Payments) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let raw = req.uri().path().strip_prefix(PREFIX).unwrap_or("");
    let body = uuid::Uuid::try_parse(raw)
        .ok()
        .filter(|_| raw.len() == 36)
        .and_then(|u| {
            let mut buf = uuid::Uuid::encode_buffer();
            let key = u.hyphenated().encode_lower(&mut buf);
            read(&state.quotes)
                .get(&*key)
                .filter(|q| q.client_id == principal.client_id)
                .map(|q| q.body.clone())
        });
    match body {
        Some(b) => json_response(StatusCode::OK, b),
        None => ApiError::one(
            StatusCode::NOT_FOUND,
            code::NO_SUCH_QUOTE,
            "",
            "no such quote",
        )
        .into_response(),
    }
}

/// Looks a quote up by canonical id.
pub fn find(state: &State, id: &str) -> Option<Arc<Quote>> {
    read(&state.quotes).get(id).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn validation_errors() {
        let e = validate(&obj(
            json!({"buyCurrency":"USD","buyAmount":10.001,"sellCurrency":"USD"}),
        ))
        .err();
        let codes: Vec<String> = e
            .map(|e| e.errors.into_iter().map(|x| x.code).collect())
            .unwrap_or_default();
        assert_eq!(codes, ["validation:quote:1010", "validation:quote:1014"]);
        let ok = validate(&obj(
            json!({"buyCurrency":"USD","buyAmount":10.10,"sellCurrency":"EUR"}),
        ));
        assert!(ok.is_ok_and(|q| q.beneficiaries == 1 && q.amount == Decimal::new(101, 1)));
    }
}

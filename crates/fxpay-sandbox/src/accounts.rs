//! `GET /v1/gca/virtual-accounts`: a fixed, realistic list of three accounts per user, or the
//! generated accounts of `set_virtual_accounts` in pages linked by `next`.
//!
//! Fields of a virtual account: `id` (UUID), `currency`, `accountName`, `accountNumber`,
//! `bankName`, `bic`, `iban` (EUR and GBP accounts only), `routingCode` (sort code for GBP,
//! ABA routing number for USD), `country`, `balance` (exact decimal number), `status`
//! (`Active`), `createdAt` (RFC 3339).
use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::http::errors::json_response;
use crate::http::extract::{Caller, GcaAisp};
use crate::payments::fields::number;
use crate::state::{Paged, State};

/// Builds the response body of `user`'s accounts.
pub fn build(display_name: &str, created_at: &str) -> Bytes {
    let eur = json!({
        "id": crate::ids::uuid(),
        "currency": "EUR",
        "accountName": format!("{display_name} EUR"),
        "accountNumber": "0532013000",
        "bankName": "Sandbox Bank Europe",
        "bic": "SBXBDEFFXXX",
        "iban": "DE89370400440532013000",
        "country": "DE",
        "balance": number(&rust_decimal::Decimal::new(1_250_000, 2)),
        "status": "Active",
        "createdAt": created_at,
    });
    let gbp = json!({
        "id": crate::ids::uuid(),
        "currency": "GBP",
        "accountName": format!("{display_name} GBP"),
        "accountNumber": "31926819",
        "bankName": "Sandbox Bank UK",
        "bic": "SBXBGB2LXXX",
        "iban": "GB29NWBK60161331926819",
        "routingCode": "601613",
        "country": "GB",
        "balance": number(&rust_decimal::Decimal::new(842_055, 2)),
        "status": "Active",
        "createdAt": created_at,
    });
    let usd = json!({
        "id": crate::ids::uuid(),
        "currency": "USD",
        "accountName": format!("{display_name} USD"),
        "accountNumber": "000123456789",
        "bankName": "Sandbox Bank USA",
        "bic": "SBXBUS33XXX",
        "routingCode": "026009593",
        "country": "US",
        "balance": number(&rust_decimal::Decimal::new(2_500_000, 2)),
        "status": "Active",
        "createdAt": created_at,
    });
    let mut body = Map::new();
    body.insert(
        "virtualAccounts".to_owned(),
        Value::Array(vec![eur, gbp, usd]),
    );
    Bytes::from(Value::Object(body).to_string())
}

/// The most accounts `set_virtual_accounts` generates (and the largest page size): enough
/// for any paging test, and a bound on what one admin request can make a served sandbox hold.
pub const MAX_GENERATED: usize = 10_000;

/// From now on every user has `count` generated accounts (at most [`MAX_GENERATED`]), served
/// in pages of `page_size` (all in one page when `None`) linked by `next`.
pub fn set_generated(state: &State, count: usize, page_size: Option<usize>) {
    let accounts = generate(count.min(MAX_GENERATED), &state.clock.now_rfc3339());
    *crate::state::write(&state.paged_accounts) = Some(Arc::new(Paged {
        accounts,
        page_size: page_size.map(|p| p.clamp(1, MAX_GENERATED)),
    }));
}

/// `count` generated accounts (currencies in turn, distinct ids and numbers).
pub fn generate(count: usize, created_at: &str) -> Vec<Value> {
    const CURRENCIES: [(&str, &str); 4] =
        [("EUR", "DE"), ("GBP", "GB"), ("USD", "US"), ("AUD", "AU")];
    (0..count)
        .map(|i| {
            let (currency, country) = CURRENCIES[i % CURRENCIES.len()];
            json!({
                "id": crate::ids::uuid(),
                "currency": currency,
                "accountName": format!("Sandbox User {currency} {}", i + 1),
                "accountNumber": format!("{:010}", 1_000_000 + i),
                "bankName": "Sandbox Bank",
                "bic": "SBXBDEFFXXX",
                "country": country,
                "balance": number(&rust_decimal::Decimal::new(100_000 + i as i64, 2)),
                "status": "Active",
                "createdAt": created_at,
            })
        })
        .collect()
}

/// The body of page `page` (1-based) of `paged`; `None` past the last page.
pub fn page_body(paged: &Paged, page: usize) -> Option<Value> {
    let size = paged.page_size.unwrap_or(paged.accounts.len().max(1));
    let start = (page - 1).checked_mul(size)?;
    if page > 1 && start >= paged.accounts.len() {
        return None;
    }
    let end = (start + size).min(paged.accounts.len());
    let items = paged.accounts.get(start..end).unwrap_or_default().to_vec();
    let next =
        (end < paged.accounts.len()).then(|| format!("/v1/gca/virtual-accounts?page={}", page + 1));
    Some(json!({"virtualAccounts": items, "next": next}))
}

/// The `page` query parameter (1 when absent); `Err` for anything but a positive integer.
fn page_of(query: Option<&str>) -> Result<usize, ()> {
    let Some(q) = query else { return Ok(1) };
    for pair in q.split('&') {
        if let Some(v) = pair.strip_prefix("page=") {
            return v.parse::<usize>().ok().filter(|p| *p >= 1).ok_or(());
        }
    }
    Ok(1)
}

/// 404 for a page past the last, or a `page` that is not a positive integer.
fn no_such_page() -> Response {
    crate::http::errors::ApiError::one(
        StatusCode::NOT_FOUND,
        crate::http::errors::code::NO_SUCH_PATH,
        "page",
        "no such page of virtual accounts",
    )
    .into_response()
}

/// The handler: needs a `gca-aisp` user token.
pub async fn list(
    AxState(state): AxState<Arc<State>>,
    uri: axum::http::Uri,
    caller: Caller<GcaAisp>,
) -> Response {
    let Ok(page) = page_of(uri.query()) else {
        return no_such_page();
    };
    // An `Arc` clone: the accounts themselves are shared, not copied per request.
    let paged = crate::state::read(&state.paged_accounts).clone();
    if let Some(paged) = paged {
        return match page_body(&paged, page) {
            Some(b) => json_response(StatusCode::OK, b.to_string()),
            None => no_such_page(),
        };
    }
    if page != 1 {
        // The fixed accounts are one page.
        return no_such_page();
    }
    let body = caller
        .principal
        .user
        .as_deref()
        .and_then(|u| state.users.get(u))
        .map(|u| u.accounts.clone())
        .unwrap_or_else(|| Bytes::from_static(b"{\"virtualAccounts\":[]}"));
    json_response(StatusCode::OK, body)
}

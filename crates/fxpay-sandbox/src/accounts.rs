//! `GET /v1/gca/virtual-accounts`: a fixed, realistic list of three accounts per user.
//!
//! Fields of a virtual account: `id` (UUID), `currency`, `accountName`, `accountNumber`,
//! `bankName`, `bic`, `iban` (EUR and GBP accounts only), `routingCode` (sort code for GBP,
//! ABA routing number for USD), `country`, `balance` (exact decimal number), `status`
//! (`Active`), `createdAt` (RFC 3339).
use std::sync::Arc;

use axum::extract::{Request, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::bearer;
use super::errors::json_response;
use super::fields::number;
use super::state::{Scope, State};

/// Builds the response body of `user`'s accounts.
pub fn build(display_name: &str, created_at: &str) -> Bytes {
    let eur = json!({
        "id": super::ids::uuid(),
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
        "id": super::ids::uuid(),
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
        "id": super::ids::uuid(),
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

/// The handler: needs a `gca-aisp` user token.
pub async fn list(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let principal = match bearer::check(&state, req.headers(), Scope::GcaAisp) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let body = principal
        .user
        .as_deref()
        .and_then(|u| state.users.get(u))
        .map(|u| u.accounts.clone())
        .unwrap_or_else(|| Bytes::from_static(b"{\"virtualAccounts\":[]}"));
    json_response(StatusCode::OK, body)
}

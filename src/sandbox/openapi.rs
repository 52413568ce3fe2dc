//! `GET /openapi.json`: the OpenAPI 3.1 description of the sandbox (`openapi.json`), with
//! the currency and country enumerations filled in from the tables the sandbox validates with.
use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::errors::json_response;
use super::rates;
use super::state::State;

const DOCUMENT: &str = include_str!("openapi.json");

/// Every code `iso_currency` knows, sorted.
pub fn iso_currencies() -> Vec<String> {
    let mut out = Vec::new();
    for a in b'A'..=b'Z' {
        for b in b'A'..=b'Z' {
            for c in b'A'..=b'Z' {
                let code = String::from_utf8_lossy(&[a, b, c]).into_owned();
                if iso_currency::Currency::from_code(&code).is_some() {
                    out.push(code);
                }
            }
        }
    }
    out
}

/// Every ISO 3166-1 alpha-2 code, sorted.
pub fn iso_countries() -> Vec<String> {
    let mut out: Vec<String> = isocountry::CountryCode::iter()
        .map(|c| c.alpha2().to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The smallest step of an amount in `code` (1, 0.01, 0.001) as a JSON number.
fn step(code: &str) -> Value {
    super::fields::number(&Decimal::new(1, rates::minor_units(code)))
}

/// One `QuoteRequest` branch per buy currency: other sell currencies, minor-unit steps.
fn quote_branches() -> Value {
    let all = rates::supported();
    let branches: Vec<Value> = all
        .iter()
        .map(|buy| {
            let others: Vec<&str> = all.iter().copied().filter(|c| c != buy).collect();
            json!({"properties": {
                "buyCurrency": {"const": buy},
                "sellCurrency": {"enum": others},
                "buyAmount": {"multipleOf": step(buy)},
            }})
        })
        .collect();
    Value::Array(branches)
}

/// The document with enumerations, the default client and the server URL filled in.
pub fn document(base_url: &str, client_id: &str, redirect_uris: &[&str]) -> Value {
    let mut doc: Value = serde_json::from_str(DOCUMENT).unwrap_or_else(|_| json!({}));
    if let Some(schemas) = doc.pointer_mut("/components/schemas") {
        if let Some(s) = schemas.get_mut("QuoteRequest") {
            s["anyOf"] = quote_branches();
        }
        if let Some(s) = schemas.get_mut("ClientId") {
            s["enum"] = json!([client_id]);
        }
        if let Some(s) = schemas.get_mut("RedirectUri") {
            s["enum"] = json!(redirect_uris);
        }
        if let Some(s) = schemas.get_mut("SupportedCurrency") {
            s["enum"] = json!(rates::supported());
        }
        if let Some(s) = schemas.get_mut("CurrencyCode") {
            s["enum"] = json!(iso_currencies());
        }
        if let Some(s) = schemas.get_mut("CountryCode") {
            s["enum"] = json!(iso_countries());
        }
    }
    doc["servers"] = json!([{"url": base_url, "description": "this sandbox"}]);
    doc
}

/// The serialized document.
pub fn bytes(base_url: &str, client_id: &str, redirect_uris: &[&str]) -> Bytes {
    Bytes::from(document(base_url, client_id, redirect_uris).to_string())
}

/// The handler.
pub async fn serve(AxState(state): AxState<Arc<State>>) -> Response {
    json_response(StatusCode::OK, state.openapi.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_parses_and_has_enums() {
        let doc = document("http://127.0.0.1:1", "c1", &["https://a.test/cb"]);
        let branches = doc["components"]["schemas"]["QuoteRequest"]["anyOf"]
            .as_array()
            .map(Vec::len);
        assert_eq!(branches, Some(rates::supported().len()));
        assert_eq!(
            doc["components"]["schemas"]["ClientId"]["enum"],
            json!(["c1"])
        );
        let jpy = &doc["components"]["schemas"]["QuoteRequest"]["anyOf"][5];
        assert_eq!(jpy["properties"]["buyCurrency"]["const"], "JPY");
        assert_eq!(
            jpy["properties"]["buyAmount"]["multipleOf"].to_string(),
            "1"
        );
        assert_eq!(doc["openapi"], "3.1.0");
        let currencies = doc["components"]["schemas"]["CurrencyCode"]["enum"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0);
        assert!(currencies > 150);
        let countries = doc["components"]["schemas"]["CountryCode"]["enum"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0);
        assert!(countries > 240);
        assert!(iso_currencies().iter().any(|c| c == "JPY"));
    }
}

//! `GET /openapi.json`: the OpenAPI 3.1 description of the sandbox (`openapi.json`), with
//! the currency and country enumerations filled in from the tables the sandbox validates with.
use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
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

/// The document with enumerations and the server URL filled in.
pub fn document(base_url: &str) -> Value {
    let mut doc: Value = serde_json::from_str(DOCUMENT).unwrap_or_else(|_| json!({}));
    if let Some(schemas) = doc.pointer_mut("/components/schemas") {
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
pub fn bytes(base_url: &str) -> Bytes {
    Bytes::from(document(base_url).to_string())
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
        let doc = document("http://127.0.0.1:1");
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

//! `GET /openapi.json`: the OpenAPI 3.1 description of the sandbox (`openapi.json`), with
//! the currency and country enumerations filled in from the tables the sandbox validates with.
use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::http::errors::json_response;
use crate::payments::rates;
use crate::state::State;

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
    crate::payments::fields::number(&Decimal::new(1, rates::minor_units(code)))
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

/// The pricing table: each supported currency's value in US dollars, flat fee and minor units.
fn rate_table() -> Value {
    let rows: Vec<Value> = rates::supported()
        .into_iter()
        .map(|c| {
            let usd = rates::usd_value(c).map_or(Value::Null, |v| crate::payments::fields::number(&v));
            let fee = rates::flat_fee(c).map_or(Value::Null, |v| crate::payments::fields::number(&v));
            json!({"currency": c, "usdValue": usd, "flatFee": fee, "minorUnits": rates::minor_units(c)})
        })
        .collect();
    Value::Array(rows)
}

/// Where the document holds the schema of send_event's `url`.
const SEND_EVENT_URL: &str =
    "/paths/~1_sandbox~1send_event/post/requestBody/content/application~1json/schema/properties/url";

/// Where the document holds the schema of each of register_client's `redirect_uris`.
const REDIRECT_URIS: &str = "/paths/~1_sandbox~1register_client/post/requestBody/content/application~1json/schema/properties/redirect_uris/items";

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
    // The callback headers' pattern is the rule the sandbox and the client check
    // (`fxpay_core::CALLBACK_URL_PATTERN`), not a copy of it.
    if let Some(params) = doc
        .pointer_mut("/paths/~1v1~1payments~1deals~1spot/post/parameters")
        .and_then(Value::as_array_mut)
    {
        for p in params {
            if matches!(
                p["name"].as_str(),
                Some("callback-location" | "callback-url")
            ) {
                p["schema"]["pattern"] = json!(fxpay_core::CALLBACK_URL_PATTERN);
            }
        }
    }
    // So are the URL rules of send_event (loopback only) and of register_client.
    for (pointer, pattern) in [
        (SEND_EVENT_URL, fxpay_core::LOOPBACK_CALLBACK_URL_PATTERN),
        (REDIRECT_URIS, crate::oauth::registration::PATTERN),
    ] {
        if let Some(schema) = doc.pointer_mut(pointer) {
            schema["pattern"] = json!(pattern);
        }
    }
    doc["x-fxpay-rates"] = rate_table();
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
    use crate::http::errors::Field;

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
        let rates_served = doc["x-fxpay-rates"].as_array().map(Vec::len);
        assert_eq!(rates_served, Some(rates::supported().len()));
        let usd = &doc["x-fxpay-rates"][0];
        assert_eq!(
            (
                usd["currency"].as_str(),
                usd["flatFee"].to_string(),
                usd["minorUnits"].as_u64()
            ),
            (Some("USD"), "5.00".to_owned(), Some(2))
        );
    }

    /// The checked-in document carries `fxpay_core::CALLBACK_URL_PATTERN` verbatim, so
    /// a reader of the file sees what the served document says.
    #[test]
    fn callback_pattern_is_the_core_rule() {
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap_or(Value::Null);
        let params = &doc["paths"]["/v1/payments/deals/spot"]["post"]["parameters"];
        let patterns: Vec<&str> = params
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "header" && p["name"] != "callback-nonce")
            .filter_map(|p| p["schema"]["pattern"].as_str())
            .collect();
        assert_eq!(
            patterns,
            [fxpay_core::CALLBACK_URL_PATTERN; 2],
            "openapi.json and fxpay_core::CALLBACK_URL_PATTERN differ"
        );
    }

    /// The checked-in document carries the rules of send_event's url and register_client's
    /// redirect URIs verbatim.
    #[test]
    fn admin_url_patterns_are_the_rules_the_sandbox_checks() {
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap_or(Value::Null);
        assert_eq!(
            doc.pointer(&format!("{SEND_EVENT_URL}/pattern"))
                .and_then(Value::as_str),
            Some(fxpay_core::LOOPBACK_CALLBACK_URL_PATTERN)
        );
        assert_eq!(
            doc.pointer(&format!("{REDIRECT_URIS}/pattern"))
                .and_then(Value::as_str),
            Some(crate::oauth::registration::PATTERN)
        );
    }

    /// Every operation that reads a body lists every status its body handling answers: 408
    /// (body timeout), 413 (too large), and for JSON bodies 415 and a 400 that names
    /// `validation:request:1001` and `1002`.
    #[test]
    fn body_statuses_are_listed() {
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap_or(Value::Null);
        let mut checked = 0;
        for (path, ops) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in ops.as_object().into_iter().flatten() {
                let Some(content) = op["requestBody"]["content"].as_object() else {
                    continue;
                };
                let r = &op["responses"];
                for status in ["408", "413"] {
                    assert!(r.get(status).is_some(), "{method} {path} lacks {status}");
                }
                if content.contains_key("application/json") {
                    assert!(r.get("415").is_some(), "{method} {path} lacks 415");
                    let d400 = r["400"]["description"].as_str().unwrap_or("");
                    for code in ["validation:request:1001", "validation:request:1002"] {
                        assert!(d400.contains(code), "{method} {path}: 400 lacks {code}");
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 13, "only {checked} operations with a body");
    }

    /// The `x-fxpay-error-codes` extension lists exactly the codes `errors.rs` defines, with
    /// the statuses and meanings of its tables, so the docs' "Sandbox rules" page (generated
    /// from this document) cannot drift from the code.
    #[test]
    fn error_code_table_matches_errors_rs() {
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap_or(Value::Null);
        let table = &doc["x-fxpay-error-codes"];
        let listed: Vec<(String, String, String)> = table["codes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        let status = match &e["status"] {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (
                            e["code"].as_str().unwrap_or("").to_owned(),
                            status,
                            e["meaning"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let source = include_str!("errors.rs");
        // Every `pub const X: &str = "<code>";` of `errors::code`.
        let mut consts: Vec<String> = source
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter_map(|l| l.split('"').nth(1))
            .map(str::to_owned)
            .collect();
        consts.sort();
        let mut codes: Vec<String> = listed.iter().map(|(c, _, _)| c.clone()).collect();
        codes.sort();
        assert_eq!(consts, codes, "errors::code and x-fxpay-error-codes differ");
        // Every row `//! | <code> | <status> | <meaning> |` of the doc tables in errors.rs.
        let rows: Vec<Vec<String>> = source
            .lines()
            .filter_map(|l| l.strip_prefix("//! |"))
            .map(|l| {
                l.split(" | ")
                    .map(|c| c.trim().trim_end_matches('|').trim().to_owned())
                    .collect()
            })
            .collect();
        let mut documented = 0;
        for row in rows.iter().filter(|r| r.len() == 3 && r[0].contains(':')) {
            let entry = listed.iter().find(|(c, _, _)| *c == row[0]);
            assert_eq!(
                entry,
                Some(&(row[0].clone(), row[1].clone(), row[2].clone())),
                "errors.rs documents {row:?}"
            );
            documented += 1;
        }
        assert!(documented >= 20, "only {documented} documented codes found");
        // The field-validation numbers: the `Field` enum and its doc table.
        let numbers: Vec<(u64, String)> = table["fieldValidation"]["numbers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["number"].as_u64().unwrap_or(0),
                            e["meaning"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let doc_rows: Vec<(u64, String)> = rows
            .iter()
            .filter(|r| r.len() == 2)
            .filter_map(|r| Some((r[0].parse::<u64>().ok()?, r[1].clone())))
            .collect();
        assert_eq!(
            numbers, doc_rows,
            "Field table of errors.rs and x-fxpay-error-codes differ"
        );
        let enum_numbers: Vec<u64> = source
            .lines()
            .filter_map(|l| l.trim().strip_suffix(','))
            .filter_map(|l| l.split(" = ").nth(1))
            .filter_map(|n| n.parse::<u64>().ok())
            .collect();
        let listed_numbers: Vec<u64> = numbers.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            enum_numbers, listed_numbers,
            "enum Field and x-fxpay-error-codes differ"
        );
        for n in [
            Field::Required as u64,
            Field::BadCallbackUrl as u64,
            Field::OutOfRange as u64,
        ] {
            assert!(listed_numbers.contains(&n));
        }
    }

    /// The numbers of `x-fxpay-rules` are the constants the sandbox runs with.
    #[test]
    fn rules_match_constants() {
        use crate::config::{DEFAULT_BODY_TIMEOUT, DEFAULT_IDLE_TIMEOUT};
        use crate::http::body;
        use crate::payments::{callbacks, fields};
        use crate::state;
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap_or(Value::Null);
        let mut values = std::collections::HashMap::new();
        for topic in doc["x-fxpay-rules"].as_array().into_iter().flatten() {
            assert!(topic["topic"].is_string());
            for rule in topic["rules"].as_array().into_iter().flatten() {
                assert!(rule["rule"].as_str().is_some_and(|r| !r.is_empty()));
                if let Some(key) = rule["key"].as_str() {
                    values.insert(key.to_owned(), rule["value"].clone());
                }
            }
        }
        let backoff: Vec<f64> = callbacks::BACKOFF.iter().map(|d| d.as_secs_f64()).collect();
        let expected = [
            ("access_token_lifetime", json!(state::ACCESS_TTL)),
            ("refresh_token_lifetime", json!(state::REFRESH_TTL)),
            ("authorization_code_lifetime", json!(state::CODE_TTL as u64)),
            ("consent_lifetime", json!(state::CONSENT_TTL as u64)),
            ("deal_paid_after", json!(state::PAID_AFTER as u64)),
            ("max_amount", json!(fields::MAX_AMOUNT)),
            ("beneficiaries_min", json!(1)),
            ("beneficiaries_max", json!(100)),
            ("freebies", json!(state::FREEBIES)),
            ("max_body_bytes", json!(body::MAX_BODY)),
            ("body_timeout", json!(DEFAULT_BODY_TIMEOUT.as_secs())),
            ("idle_timeout", json!(DEFAULT_IDLE_TIMEOUT.as_secs())),
            ("delivery_attempts", json!(callbacks::ATTEMPTS)),
            ("delivery_backoff", json!(backoff)),
            (
                "delivery_max_retry_after",
                json!(callbacks::MAX_RETRY_AFTER.as_secs()),
            ),
            (
                "delivery_timeout",
                json!(callbacks::DELIVERY_TIMEOUT.as_secs()),
            ),
            ("admin_prefix", json!(crate::http::admin::PREFIX)),
            ("spread", json!(rates::SPREAD.to_string())),
            ("rate_decimals", json!(rates::RATE_DP)),
            (
                "max_generated_accounts",
                json!(crate::accounts::MAX_GENERATED),
            ),
        ];
        for (key, value) in &expected {
            assert_eq!(values.get(*key), Some(value), "x-fxpay-rules {key}");
        }
        assert_eq!(values.len(), expected.len(), "a rule value no test checks");
    }

    /// Every answer of every operation documents the `x-request-id` header that
    /// `server::close_if_unread` stamps on each one, as a required UUID.
    #[test]
    fn every_answer_documents_the_request_id() {
        let doc: Value = serde_json::from_str(DOCUMENT).unwrap_or(Value::Null);
        let header = &doc["components"]["headers"]["RequestId"];
        assert_eq!(
            (
                header["required"].as_bool(),
                header["schema"]["format"].as_str()
            ),
            (Some(true), Some("uuid"))
        );
        let mut answers = 0;
        for (path, ops) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in ops.as_object().into_iter().flatten() {
                for (status, answer) in op["responses"].as_object().into_iter().flatten() {
                    let h = &answer["headers"][crate::http::server::REQUEST_ID.as_str()]["$ref"];
                    assert_eq!(
                        h, "#/components/headers/RequestId",
                        "{method} {path} {status}"
                    );
                    answers += 1;
                }
            }
        }
        assert!(answers > 100, "{answers}");
    }
}

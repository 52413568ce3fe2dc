//! Reading request bodies: size limit (1 MiB), media type checks, JSON parsing.
use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Map, Value};

use crate::http::errors::{code, ApiError};

/// Largest accepted request body.
pub const MAX_BODY: usize = 1 << 20;

/// Why a body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    TooLarge,
    Broken,
    /// It did not arrive in full within the sandbox's body timeout.
    TimedOut,
}

/// The error a request body fails with when it stalls past the sandbox's body timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request body did not arrive in time")]
pub struct BodyTimeout;

/// The answer to a body that stalled: 408, and the connection is closed after it.
pub fn timed_out() -> ApiError {
    ApiError::one(
        StatusCode::REQUEST_TIMEOUT,
        code::BODY_TIMEOUT,
        "",
        "the request body did not arrive in full within the body timeout",
    )
}

/// Reads the whole body, refusing more than [`MAX_BODY`] bytes.
pub async fn read_limited(headers: &HeaderMap, body: Body) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(BodyError::TooLarge);
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(BodyError::TooLarge),
        Err(e) if is_timeout(e.as_ref()) => Err(BodyError::TimedOut),
        Err(_) => Err(BodyError::Broken),
    }
}

/// True when `e` (or an error it wraps, as axum's body errors do) is a [`BodyTimeout`].
fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<BodyTimeout>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// The media type of the request (lower-case, without parameters), if any.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = raw.split(';').next()?.trim().to_ascii_lowercase();
    Some(essence)
}

/// True for `application/json` (any parameters). The service documents that type only, so
/// `application/*+json` types are refused too: a client that sends them would pass here and
/// fail against the service.
pub fn is_json(headers: &HeaderMap) -> bool {
    media_type(headers).is_some_and(|m| m == "application/json")
}

/// True for `application/x-www-form-urlencoded`.
pub fn is_form(headers: &HeaderMap) -> bool {
    media_type(headers).is_some_and(|m| m == "application/x-www-form-urlencoded")
}

/// Checks the media type, reads the body and parses it as a JSON object.
pub async fn json_object(headers: &HeaderMap, body: Body) -> Result<Map<String, Value>, ApiError> {
    if !is_json(headers) {
        return Err(ApiError::one(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::MEDIA_TYPE,
            "",
            "Content-Type must be application/json",
        ));
    }
    let bytes = match read_limited(headers, body).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Err(ApiError::one(
                StatusCode::PAYLOAD_TOO_LARGE,
                code::TOO_LARGE,
                "",
                "request body is larger than 1 MiB",
            ))
        }
        Err(BodyError::Broken) => {
            return Err(ApiError::one(
                StatusCode::BAD_REQUEST,
                code::MALFORMED_JSON,
                "",
                "request body could not be read",
            ))
        }
        Err(BodyError::TimedOut) => return Err(timed_out()),
    };
    parse_object(&bytes)
}

/// Parses bytes as a JSON object.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::one(
            StatusCode::BAD_REQUEST,
            code::NOT_OBJECT,
            "",
            "request body must be a JSON object",
        )),
        Err(e) => Err(ApiError::one(
            StatusCode::BAD_REQUEST,
            code::MALFORMED_JSON,
            "",
            format!("malformed JSON: {e}"),
        )),
    }
}

/// Parses a form-encoded body into its pairs, in order.
pub fn form_pairs(bytes: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(bytes).into_owned().collect()
}

/// The single value of `name`; `Err(())` when the parameter is repeated.
pub fn single<'a>(pairs: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, ()> {
    let mut found = None;
    for (k, v) in pairs {
        if k == name {
            if found.is_some() {
                return Err(());
            }
            found = Some(v.as_str());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn media_types() {
        let mut h = HeaderMap::new();
        assert!(!is_json(&h));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert!(is_json(&h));
        // Issue 31.10: the rule says 415 unless application/json, so +json types are refused.
        for other in ["application/problem+json", "application/vnd.api+json"] {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(other));
            assert!(!is_json(&h), "{other}");
        }
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_json(&h));
    }

    #[test]
    fn parses_objects_only() {
        assert!(parse_object(b"{\"a\":1}").is_ok());
        assert_eq!(
            parse_object(b"[1]").err().map(|e| e.status),
            Some(StatusCode::BAD_REQUEST)
        );
        let e = parse_object(b"{").err().map(|e| e.errors[0].code.clone());
        assert_eq!(e.as_deref(), Some(code::MALFORMED_JSON));
    }

    #[test]
    fn single_detects_repeats() {
        let p = form_pairs(b"a=1&b=2&a=3");
        assert_eq!(single(&p, "b"), Ok(Some("2")));
        assert_eq!(single(&p, "a"), Err(()));
        assert_eq!(single(&p, "c"), Ok(None));
    }
}

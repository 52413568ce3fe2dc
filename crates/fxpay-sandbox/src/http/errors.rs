//! Synchronous error bodies of the sandbox and its table of error codes.
//!
//! Every non-OAuth error answers `{"errors":[{"errorCode","fieldName","message"}, ...]}`.
//! Codes have the shape `<layer>:<component>:<number>`. Validation collects every field
//! error of a request, not only the first. `fieldName` uses the service's PascalCase style
//! (`PaymentReason`, `BeneficiaryBankDetails.BankAddress.Country`, `Beneficiaries[0].Amount`);
//! it is `""` for errors that concern the request as a whole, and the header name for header
//! errors (`callback-location`, `Authorization`).
//!
//! ## Field validation (`validation:<component>:<number>`, HTTP 400)
//! `<component>` is `quote`, `beneficiary`, `deal` or `callback`.
//!
//! | number | meaning |
//! |---|---|
//! | 1001 | required field missing (or `null`) |
//! | 1002 | wrong JSON type |
//! | 1003 | text too long |
//! | 1004 | empty value (e.g. an empty `paymentReason` → `validation:beneficiary:1004` on `PaymentReason`) |
//! | 1005 | not an ISO 4217 currency code |
//! | 1006 | ISO currency the sandbox has no rate for |
//! | 1007 | not an ISO 3166-1 alpha-2 country code |
//! | 1008 | value not in the allowed list (classification, fundingSource; exact spelling) |
//! | 1009 | amount too small: a quote's `buyAmount` is at least 1, a deal amount above 0 |
//! | 1010 | too many decimal places (quote: the buy currency's minor unit; deal amounts: 3) |
//! | 1011 | amount above the limit (1,000,000,000) or not representable |
//! | 1012 | integer out of range (beneficiaries 1..=100) |
//! | 1013 | not a UUID |
//! | 1014 | buyCurrency equals sellCurrency |
//! | 1015 | the sell amount rounds to zero (cannot happen with the built-in table and minimum) |
//! | 1016 | callback URL refused (must be https, or http to localhost / 127.x.y.z / [::1]) |
//! | 1017 | callback header on `POST /v1/payments/deals`, which sends no notification (use the spot endpoint) |
//!
//! ## Request (`validation:request:<number>`)
//!
//! | code | status | meaning |
//! |---|---|---|
//! | validation:request:1001 | 400 | malformed JSON |
//! | validation:request:1002 | 400 | JSON body is not an object |
//! | validation:request:1003 | 415 | Content-Type is not `application/json` |
//! | validation:request:1004 | 413 | body larger than 1 MiB |
//! | validation:request:1005 | 408 | body not received in full within the body timeout (10 s by default); the connection is closed |
//!
//! ## Business rules of deals (`business:deal:<number>`)
//!
//! Every failing rule is listed. The status is 404 when the quote or a beneficiary is unknown
//! (to this client), 409 when the quote was already used, else 422: the request is
//! well-formed but breaks a rule of the quote.
//!
//! | code | status | meaning |
//! |---|---|---|
//! | business:deal:2001 | 404 | quote not found (or belongs to another client) |
//! | business:deal:2002 | 409 | quote already used by another deal (a quote books one deal only; reported alone) |
//! | business:deal:2003 | 404 | beneficiary not found (or belongs to another client) |
//! | business:deal:2004 | 422 | number of beneficiaries differs from the quote's `beneficiaries` |
//! | business:deal:2005 | 422 | beneficiary currency differs from the quote's sell currency |
//! | business:deal:2006 | 422 | amounts do not sum exactly to the quote's sell amount |
//! | business:deal:2007 | 422 | the same beneficiary listed twice |
//! | business:deal:2008 | 422 | amount has more decimals than the sell currency allows |
//!
//! A spot deal reports the business errors in its `DealCreated` event instead.
//!
//! ## Resources and routing
//!
//! | code | status | meaning |
//! |---|---|---|
//! | resource:quote:3001 | 404 | no such quote for this client |
//! | resource:route:3002 | 404 | no such path |
//! | resource:route:3003 | 405 | method not allowed (with `Allow`) |
//!
//! ## Authorization (with `WWW-Authenticate: Bearer ...`)
//!
//! | code | status | meaning |
//! |---|---|---|
//! | auth:token:4001 | 401 | no bearer token |
//! | auth:token:4002 | 401 | unknown, revoked or expired token |
//! | auth:scope:4003 | 403 | token lacks the scope (`payments` or `gca-aisp`) |
//!
//! ## Sandbox
//!
//! | code | status | meaning |
//! |---|---|---|
//! | rate:limit:4290 | 429 | beyond the opt-in rate limit (`rate_limit`), answered with `Retry-After` |
//! | sandbox:fault:5001 | chosen | failure injected with `fail_next` |
//! | server:internal:5000 | 500 | internal error (not expected) |
//!
//! The token endpoint answers RFC 6749 §5.2 errors instead (see `oauth/token.rs`).
use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;
use serde_json::{json, Value};

/// Numbers of the field-validation codes (`validation:<component>:<number>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Required = 1001,
    WrongType = 1002,
    TooLong = 1003,
    Empty = 1004,
    BadCurrency = 1005,
    UnsupportedCurrency = 1006,
    BadCountry = 1007,
    NotAllowed = 1008,
    NotPositive = 1009,
    TooManyDecimals = 1010,
    TooLarge = 1011,
    OutOfRange = 1012,
    BadUuid = 1013,
    SameCurrency = 1014,
    TooSmall = 1015,
    BadCallbackUrl = 1016,
    CallbackNotDelivered = 1017,
}

/// Codes that are not per-field validation codes.
pub mod code {
    pub const MALFORMED_JSON: &str = "validation:request:1001";
    pub const NOT_OBJECT: &str = "validation:request:1002";
    pub const MEDIA_TYPE: &str = "validation:request:1003";
    pub const TOO_LARGE: &str = "validation:request:1004";
    pub const BODY_TIMEOUT: &str = "validation:request:1005";
    pub const QUOTE_NOT_FOUND: &str = "business:deal:2001";
    pub const QUOTE_USED: &str = "business:deal:2002";
    pub const BENEFICIARY_NOT_FOUND: &str = "business:deal:2003";
    pub const COUNT_MISMATCH: &str = "business:deal:2004";
    pub const CURRENCY_MISMATCH: &str = "business:deal:2005";
    pub const SUM_MISMATCH: &str = "business:deal:2006";
    pub const DUPLICATE_BENEFICIARY: &str = "business:deal:2007";
    pub const AMOUNT_DECIMALS: &str = "business:deal:2008";
    pub const NO_SUCH_QUOTE: &str = "resource:quote:3001";
    pub const NO_SUCH_PATH: &str = "resource:route:3002";
    pub const METHOD: &str = "resource:route:3003";
    pub const NO_TOKEN: &str = "auth:token:4001";
    pub const BAD_TOKEN: &str = "auth:token:4002";
    pub const SCOPE: &str = "auth:scope:4003";
    pub const INJECTED: &str = "sandbox:fault:5001";
    /// Beyond the opt-in rate limit (`http::rate_limit`).
    pub const RATE_LIMITED: &str = "rate:limit:4290";
    /// The admin API (`/_sandbox/`): a missing or wrong admin token.
    pub const ADMIN_TOKEN: &str = "sandbox:admin:4010";
    /// The admin API: a bad argument.
    pub const ADMIN_ARGUMENT: &str = "sandbox:admin:4000";
    /// The admin API: no deal with that id.
    pub const ADMIN_NO_DEAL: &str = "sandbox:admin:4040";
    /// The admin API: `approve` was given an authorize URL whose page refused it outright
    /// (an unknown client or redirect URI).
    pub const ADMIN_NO_CLIENT: &str = "sandbox:admin:4041";
    /// The admin API: `approve` could not drive the consent flow.
    pub const ADMIN_APPROVE: &str = "sandbox:admin:5020";
    pub const INTERNAL: &str = "server:internal:5000";
}

/// One entry of an `errors` array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub code: String,
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(
        code: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            code: code.into(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// A field-validation error of `component` (`quote`, `beneficiary`, `deal`, `callback`).
    pub fn field(
        component: &str,
        kind: Field,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(
            format!("validation:{component}:{}", kind as u16),
            field,
            message,
        )
    }

    pub fn to_json(&self) -> Value {
        json!({"errorCode": self.code, "fieldName": self.field, "message": self.message})
    }
}

/// An error answer: status, the `errors` array and extra headers.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub errors: Vec<FieldError>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(status: StatusCode, errors: Vec<FieldError>) -> Self {
        Self {
            status,
            errors,
            headers: Vec::new(),
        }
    }

    pub fn one(status: StatusCode, code: &str, field: &str, message: impl Into<String>) -> Self {
        Self::new(status, vec![FieldError::new(code, field, message)])
    }

    /// 400 with the collected validation errors.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, errors)
    }

    pub fn with_header(mut self, name: HeaderName, value: &str) -> Self {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.push((name, v));
        }
        self
    }

    pub fn body(&self) -> Value {
        json!({"errors": self.errors.iter().map(FieldError::to_json).collect::<Vec<_>>()})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        let body = self.body().to_string();
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        for (name, value) in self.headers {
            h.append(name, value);
        }
        resp
    }
}

/// Builds a JSON response with the given status and body bytes.
pub fn json_response(status: StatusCode, body: impl Into<Body>) -> axum::response::Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// 404 for paths the sandbox does not serve.
pub async fn not_found() -> ApiError {
    ApiError::one(
        StatusCode::NOT_FOUND,
        code::NO_SUCH_PATH,
        "",
        "no such path",
    )
}

/// 405 for known paths with another method (axum adds the `Allow` header).
pub async fn method_not_allowed() -> ApiError {
    ApiError::one(
        StatusCode::METHOD_NOT_ALLOWED,
        code::METHOD,
        "",
        "method not allowed on this path",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_codes_have_three_parts() {
        let e = FieldError::field("beneficiary", Field::Empty, "PaymentReason", "empty");
        assert_eq!(e.code, "validation:beneficiary:1004");
        assert_eq!(e.to_json()["fieldName"], "PaymentReason");
    }

    #[test]
    fn body_shape() {
        let e = ApiError::one(StatusCode::NOT_FOUND, code::NO_SUCH_QUOTE, "", "no quote");
        assert_eq!(
            e.body(),
            json!({"errors":[{"errorCode":"resource:quote:3001","fieldName":"","message":"no quote"}]})
        );
    }
}

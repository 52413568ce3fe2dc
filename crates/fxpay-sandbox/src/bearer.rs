//! Bearer-token checks of the payments and account-information endpoints.
use axum::http::{header, HeaderMap, StatusCode};

use super::errors::{code, ApiError};
use super::state::{read, Scope, State};

/// Who a valid token speaks for.
#[derive(Debug, Clone)]
pub struct Principal {
    pub client_id: String,
    pub user: Option<String>,
}

const REALM: &str = "fxpay-sandbox";

fn unauthorized(code: &str, message: &str) -> ApiError {
    ApiError::one(StatusCode::UNAUTHORIZED, code, "Authorization", message).with_header(
        header::WWW_AUTHENTICATE,
        &format!(
            "Bearer realm=\"{REALM}\", error=\"invalid_token\", error_description=\"{message}\""
        ),
    )
}

/// The token of an `Authorization: Bearer ...` header.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// Checks the request's bearer token for `scope`.
pub fn check(state: &State, headers: &HeaderMap, scope: Scope) -> Result<Principal, ApiError> {
    let Some(token) = bearer_token(headers) else {
        return Err(unauthorized(
            code::NO_TOKEN,
            "a bearer access token is required",
        ));
    };
    let now = state.clock.now();
    let tokens = read(&state.tokens);
    let Some(t) = tokens.get(token) else {
        return Err(unauthorized(code::BAD_TOKEN, "the access token is invalid"));
    };
    if now >= t.expires_at {
        return Err(unauthorized(
            code::BAD_TOKEN,
            "the access token has expired",
        ));
    }
    if t.scope != scope {
        let want = scope.as_str();
        return Err(ApiError::one(
            StatusCode::FORBIDDEN,
            code::SCOPE,
            "Authorization",
            format!("this endpoint needs a token with scope {want}"),
        )
        .with_header(
            header::WWW_AUTHENTICATE,
            &format!("Bearer realm=\"{REALM}\", error=\"insufficient_scope\", scope=\"{want}\""),
        ));
    }
    Ok(Principal {
        client_id: t.client_id.clone(),
        user: t.user.clone(),
    })
}

//! `POST /v1/oauth/token`: client-credentials, authorization-code and refresh grants.
//!
//! Form bodies only. Client authentication by `client_id`/`client_secret` form fields or by
//! HTTP Basic (RFC 6749 §2.3.1), never both. Errors follow RFC 6749 §5.2:
//! 400 `{"error","error_description"}` with `invalid_request`, `invalid_grant`,
//! `unsupported_grant_type`, `invalid_scope` or `unauthorized_client`; 401 `invalid_client`
//! (with `WWW-Authenticate: Basic` when Basic was used); 413 for bodies over 1 MiB.
//!
//! Rules: access tokens live 3599 s, refresh tokens 2592000 s, codes 600 s (sandbox clock).
//! A code is single-use and bound to its client and redirect URI; redeeming it twice revokes
//! the tokens it gave. Refresh tokens rotate: only the newest of a family is accepted.
//! A client without registered redirect URIs may only use `client_credentials`.
//! PKCE (RFC 7636, `S256` only): a code whose authorization request carried a
//! `code_challenge` is redeemed only with the `code_verifier` whose SHA-256 it is; a missing
//! or wrong verifier gets `invalid_grant` and leaves the code unused. A `code_verifier` for a
//! code issued without a challenge is refused too (`invalid_grant`), so a client that thinks
//! it uses PKCE never silently runs without it.
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::http::body::{form_pairs, is_form, read_limited, single, BodyError};
use crate::ids;
use crate::state::{
    lock, write, AccessToken, Client, Family, RefreshRecord, Scope, State, ACCESS_TTL, REFRESH_TTL,
};

/// An RFC 6749 §5.2 error.
#[derive(Debug)]
pub struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
    basic_challenge: bool,
}

impl OAuthError {
    fn bad(error: &'static str, description: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            error,
            description: description.into(),
            basic_challenge: false,
        }
    }

    fn invalid_client(basic: bool) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            error: "invalid_client",
            description: "client authentication failed".to_owned(),
            basic_challenge: basic,
        }
    }

    fn response(self) -> Response {
        let body = json!({"error": self.error, "error_description": self.description});
        let mut resp = no_store(self.status, body);
        if self.basic_challenge {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"fxpay-sandbox\", charset=\"UTF-8\""),
            );
        }
        resp
    }
}

fn no_store(status: StatusCode, body: Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    resp
}

/// Decodes one form-urlencoded component of a Basic credential.
fn form_decode(s: &str) -> String {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(s.as_bytes())
        .into_owned()
        .collect();
    match pairs.as_slice() {
        [(k, v)] if v.is_empty() && !s.contains('=') => k.clone(),
        _ => s.to_owned(),
    }
}

/// `Some((id, secret))` from an `Authorization: Basic` header; `Err` when malformed.
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, OAuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let Ok(value) = value.to_str() else {
        return Err(OAuthError::invalid_client(true));
    };
    let Some((scheme, rest)) = value.trim().split_once(' ') else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Ok(None);
    }
    let decoded = STANDARD
        .decode(rest.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| OAuthError::invalid_client(true))?;
    let (id, secret) = decoded
        .split_once(':')
        .ok_or_else(|| OAuthError::invalid_client(true))?;
    Ok(Some((form_decode(id), form_decode(secret))))
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, OAuthError> {
    single(pairs, name)
        .map(|v| v.filter(|s| !s.is_empty()))
        .map_err(|()| OAuthError::bad("invalid_request", format!("parameter {name} is repeated")))
}

/// Authenticates the client by Basic or by form fields.
fn authenticate(
    state: &State,
    headers: &HeaderMap,
    pairs: &[(String, String)],
) -> Result<Client, OAuthError> {
    let basic = basic_credentials(headers)?;
    let form_id = param(pairs, "client_id")?;
    let form_secret = param(pairs, "client_secret")?;
    let (id, secret, used_basic) = match basic {
        Some((id, secret)) => {
            if form_secret.is_some() {
                return Err(OAuthError::bad(
                    "invalid_request",
                    "use either HTTP Basic or client_secret in the body, not both",
                ));
            }
            if form_id.is_some_and(|f| f != id) {
                return Err(OAuthError::bad(
                    "invalid_request",
                    "client_id differs from the Basic credentials",
                ));
            }
            (id, secret, true)
        }
        None => match (form_id, form_secret) {
            (Some(id), Some(secret)) => (id.to_owned(), secret.to_owned(), false),
            _ => return Err(OAuthError::invalid_client(false)),
        },
    };
    let client = state
        .client(&id)
        .ok_or_else(|| OAuthError::invalid_client(used_basic))?;
    if !bool::from(client.secret.as_bytes().ct_eq(secret.as_bytes())) {
        return Err(OAuthError::invalid_client(used_basic));
    }
    Ok(client)
}

/// Checks an optional `scope` parameter against the one the grant gives.
fn check_scope(pairs: &[(String, String)], scope: Scope) -> Result<(), OAuthError> {
    match param(pairs, "scope")? {
        None => Ok(()),
        Some(s)
            if s.split(' ')
                .filter(|p| !p.is_empty())
                .all(|p| p == scope.as_str()) =>
        {
            Ok(())
        }
        Some(_) => Err(OAuthError::bad(
            "invalid_scope",
            format!("this grant gives scope {} only", scope.as_str()),
        )),
    }
}

/// Issues an access token (and a refresh token of `family` for user grants).
fn issue(
    state: &State,
    client: &Client,
    scope: Scope,
    user: Option<&str>,
    family: Option<u64>,
    grant: &str,
) -> Value {
    let now = state.clock.now();
    let access = ids::token();
    write(&state.tokens).insert(
        access.clone(),
        AccessToken {
            client_id: client.id.clone(),
            scope,
            user: user.map(str::to_owned),
            expires_at: now + ACCESS_TTL as f64,
            family,
        },
    );
    let mut body = Map::new();
    body.insert("access_token".to_owned(), json!(access));
    body.insert("expires_in".to_owned(), json!(ACCESS_TTL));
    body.insert("token_type".to_owned(), json!("Bearer"));
    body.insert("scope".to_owned(), json!(scope.as_str()));
    if let (Some(user), Some(family)) = (user, family) {
        let refresh = ids::token();
        let mut oauth = lock(&state.oauth);
        oauth.refresh.insert(
            refresh.clone(),
            RefreshRecord {
                client_id: client.id.clone(),
                user: user.to_owned(),
                family,
                expires_at: now + REFRESH_TTL as f64,
            },
        );
        // Spec 5.5: the refresh token used must be the one of the most recent token
        // response. A new response supersedes every earlier refresh token of this client and
        // user, those of other families (an earlier consent) included.
        for (id, f) in &mut oauth.families {
            if *id != family && f.client_id == client.id && f.user == user {
                f.current.clear();
            }
        }
        oauth.families.insert(
            family,
            Family {
                current: refresh.clone(),
                revoked: false,
                client_id: client.id.clone(),
                user: user.to_owned(),
            },
        );
        body.insert("refresh_token".to_owned(), json!(refresh));
    }
    state.stats.issued(grant);
    Value::Object(body)
}

/// Revokes every token of a family (after a code was replayed).
fn revoke_family(state: &State, family: u64) {
    if let Some(f) = lock(&state.oauth).families.get_mut(&family) {
        f.revoked = true;
    }
    write(&state.tokens).retain(|_, t| t.family != Some(family));
}

fn authorization_code(
    state: &State,
    client: &Client,
    pairs: &[(String, String)],
) -> Result<Value, OAuthError> {
    let code = param(pairs, "code")?
        .ok_or_else(|| OAuthError::bad("invalid_request", "code is required"))?;
    let redirect_uri = param(pairs, "redirect_uri")?
        .ok_or_else(|| OAuthError::bad("invalid_request", "redirect_uri is required"))?;
    let now = state.clock.now();
    let (user, family) = {
        let mut oauth = lock(&state.oauth);
        let next_family = oauth.next_family;
        let Some(record) = oauth.codes.get_mut(code) else {
            return Err(OAuthError::bad(
                "invalid_grant",
                "unknown authorization code",
            ));
        };
        if record.client_id != client.id {
            return Err(OAuthError::bad(
                "invalid_grant",
                "the code was issued to another client",
            ));
        }
        if let Some(family) = record.redeemed {
            drop(oauth);
            revoke_family(state, family);
            return Err(OAuthError::bad(
                "invalid_grant",
                "the code was already used; redeeming it again revoked every token issued \
                 from it (RFC 6749 section 4.1.2)",
            ));
        }
        if now >= record.expires_at {
            return Err(OAuthError::bad("invalid_grant", "the code has expired"));
        }
        if record.redirect_uri != redirect_uri {
            return Err(OAuthError::bad(
                "invalid_grant",
                "redirect_uri differs from the one of the authorization request",
            ));
        }
        check_scope(pairs, Scope::GcaAisp)?;
        check_verifier(
            record.code_challenge.as_deref(),
            param(pairs, "code_verifier")?,
        )?;
        record.redeemed = Some(next_family);
        let user = record.user.clone();
        oauth.next_family += 1;
        (user, next_family)
    };
    Ok(issue(
        state,
        client,
        Scope::GcaAisp,
        Some(&user),
        Some(family),
        "authorization_code",
    ))
}

/// RFC 7636 §4.6: the verifier's `S256` transform must equal the code's challenge.
fn check_verifier(challenge: Option<&str>, verifier: Option<&str>) -> Result<(), OAuthError> {
    match (challenge, verifier) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(OAuthError::bad(
            "invalid_grant",
            "code_verifier was sent, but the authorization request carried no code_challenge",
        )),
        (Some(_), None) => Err(OAuthError::bad(
            "invalid_grant",
            "code_verifier is required: the authorization request carried a code_challenge",
        )),
        (Some(challenge), Some(verifier)) => {
            let well_formed = (43..=128).contains(&verifier.len())
                && verifier
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
            let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
            if well_formed && bool::from(computed.as_bytes().ct_eq(challenge.as_bytes())) {
                Ok(())
            } else {
                Err(OAuthError::bad(
                    "invalid_grant",
                    "code_verifier does not match the code_challenge",
                ))
            }
        }
    }
}

fn refresh_token(
    state: &State,
    client: &Client,
    pairs: &[(String, String)],
) -> Result<Value, OAuthError> {
    let token = param(pairs, "refresh_token")?
        .ok_or_else(|| OAuthError::bad("invalid_request", "refresh_token is required"))?;
    let now = state.clock.now();
    let (user, family) = {
        let mut oauth = lock(&state.oauth);
        let Some(record) = oauth.refresh.get(token).cloned() else {
            return Err(OAuthError::bad("invalid_grant", "unknown refresh token"));
        };
        if record.client_id != client.id {
            return Err(OAuthError::bad(
                "invalid_grant",
                "the refresh token was issued to another client",
            ));
        }
        if now >= record.expires_at {
            return Err(OAuthError::bad(
                "invalid_grant",
                "the refresh token has expired",
            ));
        }
        let family = oauth.families.get(&record.family);
        if family.is_some_and(|f| f.revoked) {
            return Err(OAuthError::bad(
                "invalid_grant",
                "the refresh token was revoked: the authorization code it was issued from was \
                 redeemed a second time, which revokes every token issued from that code \
                 (RFC 6749 section 4.1.2); ask the user to authorize again",
            ));
        }
        let current = family.is_some_and(|f| !f.current.is_empty() && f.current == token);
        if !current {
            return Err(OAuthError::bad(
                "invalid_grant",
                "the refresh token was already used or superseded",
            ));
        }
        check_scope(pairs, Scope::GcaAisp)?;
        oauth.refresh.remove(token);
        (record.user, record.family)
    };
    Ok(issue(
        state,
        client,
        Scope::GcaAisp,
        Some(&user),
        Some(family),
        "refresh_token",
    ))
}

async fn handle(state: &State, req: Request) -> Result<Value, OAuthError> {
    let (parts, body) = req.into_parts();
    if !is_form(&parts.headers) {
        return Err(OAuthError::bad(
            "invalid_request",
            "the token endpoint takes application/x-www-form-urlencoded bodies only",
        ));
    }
    let bytes = match read_limited(&parts.headers, body).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Err(OAuthError {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                error: "invalid_request",
                description: "request body is larger than 1 MiB".to_owned(),
                basic_challenge: false,
            })
        }
        Err(BodyError::Broken) => {
            return Err(OAuthError::bad("invalid_request", "body could not be read"))
        }
        Err(BodyError::TimedOut) => {
            return Err(OAuthError {
                status: StatusCode::REQUEST_TIMEOUT,
                error: "invalid_request",
                description: "the request body did not arrive in full within the body timeout"
                    .to_owned(),
                basic_challenge: false,
            })
        }
    };
    let pairs = form_pairs(&bytes);
    let grant = param(&pairs, "grant_type")?
        .ok_or_else(|| OAuthError::bad("invalid_request", "grant_type is required"))?;
    let client = authenticate(state, &parts.headers, &pairs)?;
    match grant {
        "client_credentials" => {
            check_scope(&pairs, Scope::Payments)?;
            Ok(issue(
                state,
                &client,
                Scope::Payments,
                None,
                None,
                "client_credentials",
            ))
        }
        "authorization_code" | "refresh_token" if client.redirect_uris.is_empty() => {
            Err(OAuthError::bad(
                "unauthorized_client",
                "this client has no redirect URI and may use client_credentials only",
            ))
        }
        "authorization_code" => authorization_code(state, &client, &pairs),
        "refresh_token" => refresh_token(state, &client, &pairs),
        _ => Err(OAuthError::bad(
            "unsupported_grant_type",
            "grant_type must be client_credentials, authorization_code or refresh_token",
        )),
    }
}

/// The handler.
pub async fn token(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    match handle(&state, req).await {
        Ok(body) => no_store(StatusCode::OK, body),
        Err(e) => e.response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_verifier_rules() {
        // The challenge computed by an independent implementation (Python's hashlib + base64).
        let v = "dBjftJeZ4CVP-mB92K27uhbUpdlFXOIBA4NRMB1nlFk";
        let c = "bMHnTem_XcD1k1oumh_cdFWAN3WTn9pip-01ooSUmbM";
        assert!(check_verifier(None, None).is_ok());
        assert!(check_verifier(Some(c), Some(v)).is_ok());
        for (ch, ve) in [
            (Some(c), None),
            (None, Some(v)),
            (Some(c), Some("dBjftJeZ4CVP-mB92K27uhbUpdlFXOIBA4NRMB1nlFK")),
            (Some(c), Some(&v[..42])),
            (Some(c), Some(c)),
            (Some("short"), Some("short")),
        ] {
            let err = check_verifier(ch, ve).err().map(|e| e.error);
            assert_eq!(err, Some("invalid_grant"), "{ch:?} {ve:?}");
        }
    }

    #[test]
    fn basic_is_decoded() {
        let mut h = HeaderMap::new();
        let v = format!("Basic {}", STANDARD.encode("my%20id:s%3Acret"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&v).expect("header"),
        );
        let got = basic_credentials(&h).ok().flatten();
        assert_eq!(got, Some(("my id".to_owned(), "s:cret".to_owned())));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!!"));
        assert!(basic_credentials(&h).is_err());
    }
}

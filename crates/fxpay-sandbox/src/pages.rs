//! The browser side of the authorization-code flow: authorize, login and consent pages.
//!
//! `GET /v1/oauth/authorize` validates the client and redirect URI first: an unknown client or
//! an unregistered, non-https (or otherwise unsafe) redirect URI gets an HTML error page (400),
//! never a redirect. Other problems redirect back with `error=invalid_request`,
//! `unsupported_response_type` or `invalid_scope` (RFC 6749 §4.1.2.1). A valid request shows
//! the login page; `POST /v1/oauth/login` checks the password (401 + login page again when
//! wrong) and shows the consent page, bound to a server-side consent id and a session cookie;
//! `POST /v1/oauth/consent` redirects with `code`+`state` (allow) or
//! `error=access_denied`+`state` (deny); an unknown, expired or answered consent id gets a 404
//! page and a missing or wrong session cookie a 403 page.
//!
//! PKCE (RFC 7636): a request may carry `code_challenge` with `code_challenge_method=S256`;
//! the code it yields is then redeemed only with the matching `code_verifier`. `plain` (and a
//! challenge without a method, which RFC 7636 reads as `plain`) is refused with
//! `invalid_request`: every client can compute SHA-256, and with `plain` anyone who sees the
//! authorization request (browser history, logs, an app that claims the same custom scheme)
//! also holds the verifier, which is what PKCE is there to prevent.
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::body::{form_pairs, is_form, read_limited, single, BodyError};
use super::html;
use super::ids;
use super::state::{lock, AuthCode, Consent, State, CODE_TTL, CONSENT_TTL};

/// Name of the login session cookie.
pub const SESSION_COOKIE: &str = "fxpay_sandbox_session";

/// A validated authorization request.
#[derive(Debug, Clone)]
struct AuthRequest {
    client_id: String,
    redirect_uri: String,
    state: Option<String>,
    /// The `S256` PKCE challenge, if the request carried one.
    code_challenge: Option<String>,
}

impl AuthRequest {
    fn hidden_fields(&self) -> String {
        let mut s = html::hidden("response_type", "code");
        s.push_str(&html::hidden("client_id", &self.client_id));
        s.push_str(&html::hidden("redirect_uri", &self.redirect_uri));
        s.push_str(&html::hidden("scope", "gca-aisp"));
        if let Some(st) = &self.state {
            s.push_str(&html::hidden("state", st));
        }
        if let Some(ch) = &self.code_challenge {
            s.push_str(&html::hidden("code_challenge", ch));
            s.push_str(&html::hidden("code_challenge_method", "S256"));
        }
        s
    }
}

/// How a bad authorization request is refused.
enum Refusal {
    Page(String),
    /// Redirect to this location (the redirect URI with the error).
    Redirect(String),
}

/// Schemes never accepted as custom redirect schemes.
const UNSAFE_SCHEMES: &[&str] = &[
    "http",
    "javascript",
    "data",
    "file",
    "vbscript",
    "blob",
    "about",
    "ftp",
    "ws",
    "wss",
    "filesystem",
];

/// True for an https URI with a host, or a native app's custom scheme; no fragment.
pub fn acceptable_redirect(uri: &str) -> bool {
    let Ok(url) = url::Url::parse(uri) else {
        return false;
    };
    if url.fragment().is_some() {
        return false;
    }
    match url.scheme() {
        "https" => url.host().is_some(),
        s => !UNSAFE_SCHEMES.contains(&s),
    }
}

/// `uri` with `params` added to its query.
fn with_query(uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(uri) {
        Ok(mut url) => {
            {
                let mut q = url.query_pairs_mut();
                for (k, v) in params {
                    q.append_pair(k, v);
                }
            }
            url.to_string()
        }
        Err(_) => {
            let encoded: String = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(params.iter())
                .finish();
            let sep = if uri.contains('?') { '&' } else { '?' };
            format!("{uri}{sep}{encoded}")
        }
    }
}

/// A 302 to `location`.
fn redirect(location: &str) -> Response<Body> {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::FOUND;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn error_redirect(
    redirect_uri: &str,
    error: &str,
    description: &str,
    state: Option<&str>,
) -> Refusal {
    let mut params = vec![("error", error), ("error_description", description)];
    if let Some(s) = state {
        params.push(("state", s));
    }
    Refusal::Redirect(with_query(redirect_uri, &params))
}

fn validate(state: &State, pairs: &[(String, String)]) -> Result<AuthRequest, Refusal> {
    let page = |m: &str| Refusal::Page(m.to_owned());
    let client_id = single(pairs, "client_id")
        .map_err(|()| page("client_id is repeated"))?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| page("client_id is missing"))?;
    let client = state
        .client(client_id)
        .ok_or_else(|| page("unknown client_id"))?;
    let redirect_uri = single(pairs, "redirect_uri")
        .map_err(|()| page("redirect_uri is repeated"))?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| page("redirect_uri is missing"))?;
    if !client.redirect_uris.iter().any(|r| r == redirect_uri) {
        return Err(page("redirect_uri is not registered for this client"));
    }
    if !acceptable_redirect(redirect_uri) {
        return Err(page(
            "redirect_uri must use https (or a native app's custom scheme)",
        ));
    }
    let st = match single(pairs, "state") {
        Ok(s) => s.map(str::to_owned),
        Err(()) => {
            return Err(error_redirect(
                redirect_uri,
                "invalid_request",
                "state is repeated",
                None,
            ));
        }
    };
    let st_ref = st.as_deref();
    match single(pairs, "response_type") {
        Err(()) => {
            return Err(error_redirect(
                redirect_uri,
                "invalid_request",
                "response_type is repeated",
                st_ref,
            ))
        }
        Ok(None) => {
            return Err(error_redirect(
                redirect_uri,
                "invalid_request",
                "response_type is required",
                st_ref,
            ))
        }
        Ok(Some("code")) => {}
        Ok(Some(_)) => {
            return Err(error_redirect(
                redirect_uri,
                "unsupported_response_type",
                "response_type must be code",
                st_ref,
            ))
        }
    }
    match single(pairs, "scope") {
        Err(()) => {
            return Err(error_redirect(
                redirect_uri,
                "invalid_request",
                "scope is repeated",
                st_ref,
            ))
        }
        Ok(Some(s))
            if !s.trim().is_empty()
                && s.split(' ')
                    .filter(|p| !p.is_empty())
                    .all(|p| p == "gca-aisp") => {}
        Ok(_) => {
            return Err(error_redirect(
                redirect_uri,
                "invalid_scope",
                "scope must be gca-aisp",
                st_ref,
            ))
        }
    }
    let code_challenge = pkce_challenge(pairs)
        .map_err(|d| error_redirect(redirect_uri, "invalid_request", d, st_ref))?;
    Ok(AuthRequest {
        client_id: client.id,
        redirect_uri: redirect_uri.to_owned(),
        state: st,
        code_challenge,
    })
}

/// The request's PKCE challenge: none, or an `S256` challenge (43 base64url characters, the
/// encoding of a SHA-256). `Err` describes why the parameters are refused.
fn pkce_challenge(pairs: &[(String, String)]) -> Result<Option<String>, &'static str> {
    let challenge = single(pairs, "code_challenge").map_err(|()| "code_challenge is repeated")?;
    let method =
        single(pairs, "code_challenge_method").map_err(|()| "code_challenge_method is repeated")?;
    match (challenge, method) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err("code_challenge_method was sent without a code_challenge"),
        (Some(_), None | Some("plain")) => {
            Err("code_challenge_method must be S256: this service does not support plain PKCE")
        }
        (Some(_), Some(m)) if m != "S256" => Err("code_challenge_method must be S256"),
        (Some(c), Some(_)) => {
            let ok = c.len() == 43
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if ok {
                Ok(Some(c.to_owned()))
            } else {
                Err("code_challenge must be the base64url (no padding) SHA-256 of the verifier: 43 characters")
            }
        }
    }
}

fn refuse(r: Refusal) -> Response<Body> {
    match r {
        Refusal::Page(m) => html::error_page(StatusCode::BAD_REQUEST, &m),
        Refusal::Redirect(location) => redirect(&location),
    }
}

/// `GET /v1/oauth/authorize`.
pub async fn authorize(AxState(state): AxState<Arc<State>>, req: Request) -> Response<Body> {
    let query = req.uri().query().unwrap_or("");
    let pairs = form_pairs(query.as_bytes());
    match validate(&state, &pairs) {
        Ok(ar) => html::login_page(StatusCode::OK, &ar.client_id, &ar.hidden_fields(), None),
        Err(r) => refuse(r),
    }
}

/// Reads a form body for the pages; errors become HTML pages.
async fn form(req: Request) -> Result<(HeaderMap, Vec<(String, String)>), Response<Body>> {
    let (parts, body) = req.into_parts();
    if !is_form(&parts.headers) {
        return Err(html::error_page(
            StatusCode::BAD_REQUEST,
            "the form must be sent as application/x-www-form-urlencoded",
        ));
    }
    match read_limited(&parts.headers, body).await {
        Ok(bytes) => Ok((parts.headers, form_pairs(&bytes))),
        Err(BodyError::TooLarge) => Err(html::error_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the form is larger than 1 MiB",
        )),
        Err(BodyError::Broken) => Err(html::error_page(
            StatusCode::BAD_REQUEST,
            "the form could not be read",
        )),
        Err(BodyError::TimedOut) => Err(html::error_page(
            StatusCode::REQUEST_TIMEOUT,
            "the form did not arrive in full within the body timeout",
        )),
    }
}

/// `POST /v1/oauth/login`.
pub async fn login(AxState(state): AxState<Arc<State>>, req: Request) -> Response<Body> {
    let pairs = match form(req).await {
        Ok((_, p)) => p,
        Err(resp) => return resp,
    };
    let (Ok(Some(username)), Ok(Some(password))) =
        (single(&pairs, "username"), single(&pairs, "password"))
    else {
        return html::error_page(
            StatusCode::BAD_REQUEST,
            "the form needs one username and one password",
        );
    };
    let ar = match validate(&state, &pairs) {
        Ok(ar) => ar,
        Err(r) => return refuse(r),
    };
    let ok = state
        .users
        .get(username)
        .is_some_and(|u| bool::from(u.password.as_bytes().ct_eq(password.as_bytes())));
    if !ok {
        return html::login_page(
            StatusCode::UNAUTHORIZED,
            &ar.client_id,
            &ar.hidden_fields(),
            Some("Invalid username or password."),
        );
    }
    let consent_id = ids::token();
    let session = ids::token();
    let now = state.clock.now();
    {
        let mut oauth = lock(&state.oauth);
        oauth.consents.retain(|_, c| c.expires_at > now);
        oauth.consents.insert(
            consent_id.clone(),
            Consent {
                session: session.clone(),
                client_id: ar.client_id.clone(),
                redirect_uri: ar.redirect_uri.clone(),
                state: ar.state.clone(),
                user: username.to_owned(),
                expires_at: now + CONSENT_TTL,
                code_challenge: ar.code_challenge.clone(),
            },
        );
    }
    let mut resp = html::consent_page(&ar.client_id, username, &consent_id);
    let cookie = format!("{SESSION_COOKIE}={session}; Path=/v1/oauth; HttpOnly; SameSite=Lax");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// `POST /v1/oauth/consent`.
pub async fn consent(AxState(state): AxState<Arc<State>>, req: Request) -> Response<Body> {
    let (headers, pairs) = match form(req).await {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let Ok(Some(consent_id)) = single(&pairs, "consent_id") else {
        return html::error_page(StatusCode::BAD_REQUEST, "consent_id is missing");
    };
    let allow = match single(&pairs, "decision") {
        Ok(Some("allow")) => true,
        Ok(Some("deny")) => false,
        _ => return html::error_page(StatusCode::BAD_REQUEST, "decision must be allow or deny"),
    };
    let now = state.clock.now();
    let record = {
        let mut oauth = lock(&state.oauth);
        let Some(c) = oauth.consents.get(consent_id) else {
            return html::error_page(
                StatusCode::NOT_FOUND,
                "this consent request is unknown, expired or already answered",
            );
        };
        if c.expires_at <= now {
            oauth.consents.remove(consent_id);
            return html::error_page(StatusCode::NOT_FOUND, "this consent request has expired");
        }
        let session_ok = cookie(&headers, SESSION_COOKIE)
            .is_some_and(|s| bool::from(s.as_bytes().ct_eq(c.session.as_bytes())));
        if !session_ok {
            return html::error_page(
                StatusCode::FORBIDDEN,
                "the login session cookie is missing or does not match; sign in again",
            );
        }
        let Some(c) = oauth.consents.remove(consent_id) else {
            return html::error_page(StatusCode::NOT_FOUND, "this consent request is unknown");
        };
        if allow {
            let code = ids::token();
            oauth.codes.insert(
                code.clone(),
                AuthCode {
                    client_id: c.client_id.clone(),
                    redirect_uri: c.redirect_uri.clone(),
                    user: c.user.clone(),
                    expires_at: now + CODE_TTL,
                    redeemed: None,
                    code_challenge: c.code_challenge.clone(),
                },
            );
            (c, Some(code))
        } else {
            (c, None)
        }
    };
    let (c, code) = record;
    let st = c.state.as_deref();
    let location = match &code {
        Some(code) => {
            let mut params = vec![("code", code.as_str())];
            if let Some(s) = st {
                params.push(("state", s));
            }
            with_query(&c.redirect_uri, &params)
        }
        None => {
            let mut params = vec![
                ("error", "access_denied"),
                ("error_description", "the user denied access"),
            ];
            if let Some(s) = st {
                params.push(("state", s));
            }
            with_query(&c.redirect_uri, &params)
        }
    };
    let mut resp = redirect(&location);
    let clear = format!("{SESSION_COOKIE}=; Path=/v1/oauth; HttpOnly; SameSite=Lax; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&clear) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_rules() {
        assert!(acceptable_redirect("https://app.example.test/callback"));
        assert!(acceptable_redirect("com.example.app:/cb"));
        assert!(!acceptable_redirect("http://app.example.test/callback"));
        assert!(!acceptable_redirect("javascript:alert(1)"));
        assert!(!acceptable_redirect("https://app.example.test/cb#frag"));
        assert!(!acceptable_redirect("not a url"));
    }

    #[test]
    fn query_is_appended() {
        assert_eq!(
            with_query(
                "https://a.test/cb?x=1",
                &[("code", "a b"), ("state", "s&t")]
            ),
            "https://a.test/cb?x=1&code=a+b&state=s%26t"
        );
        assert_eq!(
            with_query("com.example.app:/cb", &[("code", "c")]),
            "com.example.app:/cb?code=c"
        );
    }

    #[test]
    fn cookies_are_found() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; fxpay_sandbox_session=xyz"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("xyz"));
        assert_eq!(cookie(&h, "b"), None);
    }
}

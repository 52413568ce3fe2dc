//! The token endpoint: client credentials, authorization code and refresh grants.
use crate::error::{Error, Result};
use crate::models::token::{unix_now, TokenResponse};
use crate::models::Token;
use crate::transport::{api_error, Observer, Request, Retry, Transport};

pub(crate) const TOKEN_PATH: &str = "/oauth/token";
pub(crate) const PAYMENTS_SCOPE: &str = "payments";
pub(crate) const AISP_SCOPE: &str = "gca-aisp";

/// The fields of one token request (spec 5.3, 5.4 step 2, 5.5).
// Public, as `request_token`, for tests/token_endpoint.rs only (a scripted token endpoint).
pub enum Grant<'a> {
    ClientCredentials,
    AuthorizationCode {
        code: &'a str,
        redirect_uri: &'a str,
        /// RFC 7636 `code_verifier`, when the authorization request carried a challenge.
        code_verifier: Option<&'a str>,
    },
    RefreshToken {
        refresh_token: &'a str,
    },
}

impl Grant<'_> {
    fn form(&self, client_id: &str, client_secret: &str) -> String {
        let mut f = url::form_urlencoded::Serializer::new(String::new());
        match self {
            Grant::ClientCredentials => {
                f.append_pair("grant_type", "client_credentials");
            }
            Grant::AuthorizationCode {
                code,
                redirect_uri,
                code_verifier,
            } => {
                f.append_pair("grant_type", "authorization_code");
                f.append_pair("code", code);
                f.append_pair("redirect_uri", redirect_uri);
                if let Some(v) = code_verifier {
                    f.append_pair("code_verifier", v);
                }
            }
            Grant::RefreshToken { refresh_token } => {
                f.append_pair("grant_type", "refresh_token");
                f.append_pair("refresh_token", refresh_token);
            }
        }
        f.append_pair("client_id", client_id);
        f.append_pair("client_secret", client_secret);
        f.append_pair("scope", self.scope());
        f.finish()
    }

    /// Whether the request may be sent again after a failure. A code is single-use and a
    /// refresh token rotates: once any byte of such a grant may have reached the service, a
    /// second try could only fail with `invalid_grant` (hiding the real failure) or spend a
    /// token the service already rotated. Client credentials can be asked for again freely.
    pub(crate) fn retry(&self) -> Retry {
        match self {
            Grant::ClientCredentials => Retry::Safe,
            Grant::AuthorizationCode { .. } | Grant::RefreshToken { .. } => Retry::CreateOnce,
        }
    }

    pub(crate) fn scope(&self) -> &'static str {
        match self {
            Grant::ClientCredentials => PAYMENTS_SCOPE,
            _ => AISP_SCOPE,
        }
    }
}

/// Sends one token request and parses the answer; RFC 6749 5.2 errors become `Error::OAuth`.
pub async fn request_token(
    transport: &Transport,
    grant: Grant<'_>,
    observer: Option<&dyn Observer>,
) -> Result<Token> {
    let cfg = transport.config();
    let mut req = Request::post_form(TOKEN_PATH, grant.form(&cfg.client_id, &cfg.client_secret));
    req.retry = grant.retry();
    let resp = transport.send(&req, None, observer).await?;
    if (200..300).contains(&resp.status) {
        let parsed: TokenResponse = serde_json::from_slice(&resp.body).map_err(|e| Error::Api {
            status: resp.status,
            message: format!(
                "the token endpoint answered a body that is not a token response: {e}"
            ),
            errors: Vec::new(),
            body: String::new(),
            retry_after: None,
            headers: crate::transport::header_pairs(&resp.headers),
        })?;
        if parsed.access_token.is_empty() {
            return Err(unusable_token(
                &resp,
                "the token endpoint answered an empty access_token".into(),
            ));
        }
        // RFC 6749 section 7.1: a client must not use a token whose type it does not
        // understand. fxpay sends bearer tokens (RFC 6750) only; the name is case-insensitive.
        if !parsed.token_type.eq_ignore_ascii_case("bearer") {
            return Err(unusable_token(
                &resp,
                format!(
                    "the token endpoint answered token_type {:?}: fxpay uses Bearer tokens only \
                     (RFC 6749 section 7.1), so the token was not used",
                    parsed.token_type
                ),
            ));
        }
        let mut token = Token::from_response(parsed, unix_now());
        if token.scope.is_none() {
            token.scope = Some(grant.scope().to_string());
        }
        return Ok(token);
    }
    #[derive(serde::Deserialize)]
    struct OAuthBody {
        error: String,
        #[serde(default)]
        error_description: Option<String>,
    }
    // Server failures and rate limits keep their HTTP meaning whatever the body says.
    if resp.status >= 500 || resp.status == 429 {
        return Err(api_error(&resp));
    }
    match serde_json::from_slice::<OAuthBody>(&resp.body) {
        Ok(b) => Err(Error::OAuth {
            error: b.error,
            description: b.error_description,
            status: Some(resp.status),
            headers: crate::transport::header_pairs(&resp.headers),
            body: Some(String::from_utf8_lossy(&resp.body).into_owned()),
        }),
        Err(_) => Err(api_error(&resp)),
    }
}

/// The error of a 2xx token answer that holds no token fxpay can use (`why`).
fn unusable_token(resp: &crate::transport::Response, why: String) -> Error {
    Error::OAuth {
        error: "invalid_response".into(),
        description: Some(why),
        status: Some(resp.status),
        headers: crate::transport::header_pairs(&resp.headers),
        // The answer's body holds the token: it is not kept.
        body: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_client_credentials_may_be_resent() {
        assert_eq!(Grant::ClientCredentials.retry(), Retry::Safe);
        let code = Grant::AuthorizationCode {
            code: "c",
            redirect_uri: "https://app.example/cb",
            code_verifier: None,
        };
        assert_eq!(code.retry(), Retry::CreateOnce);
        let refresh = Grant::RefreshToken { refresh_token: "r" };
        assert_eq!(refresh.retry(), Retry::CreateOnce);
    }
}

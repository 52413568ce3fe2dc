//! The authorization-code flow's first half: the URL to send the browser to, with a random
//! state, a scope and an RFC 7636 PKCE challenge, and the check of the callback the browser
//! comes back with.
use crate::error::{Error, Result};
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use crate::models::AuthorizationRequest;

/// `n` random bytes from the OS CSPRNG, base64url without padding.
pub fn random_token(n: usize) -> Result<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)
        .map_err(|e| Error::Internal(format!("the OS random source failed: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf))
}

/// A redirect URI must be `https://` or a custom scheme (native apps); plain http is refused.
/// Whatever its scheme, it must not carry a fragment (RFC 6749 3.1.2).
pub fn check_redirect_uri(uri: &str) -> Result<()> {
    let parsed = url::Url::parse(uri)
        .map_err(|e| Error::config(format!("redirect_uri {uri:?} is not an absolute URI: {e}")))?;
    if parsed.fragment().is_some() {
        return Err(Error::config(format!(
            "redirect_uri must not have a fragment, got {uri:?}"
        )));
    }
    // `url` refuses an https URL without a host ("https://", "https:"), so every
    // https one that parsed names a host.
    match parsed.scheme() {
        "http" | "ws" | "wss" | "ftp" | "file" | "data" | "javascript" => Err(Error::config(
            format!("redirect_uri must be https:// or a custom scheme, got {uri:?}"),
        )),
        _ => Ok(()),
    }
}

/// The RFC 7636 `S256` challenge of a verifier: base64url (no padding) of its SHA-256.
pub fn s256_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A scope is one or more RFC 6749 §3.3 scope tokens separated by single spaces.
pub fn check_scope(scope: &str) -> Result<()> {
    let token_ok = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
    };
    if scope.split(' ').all(token_ok) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "scope must be scope tokens separated by single spaces, got {scope:?}"
        )))
    }
}

/// What the URL of spec 5.4 step 1 is made of, besides the client's own settings.
pub struct AuthorizeParams<'a> {
    pub redirect_uri: &'a str,
    pub state: Option<&'a str>,
    pub scope: &'a str,
    pub pkce: bool,
}

/// Builds the URL of spec 5.4 step 1. A state is generated (256 random bits) when none is
/// given; with `pkce` a fresh verifier (256 random bits, 43 characters) is made and its `S256`
/// challenge sent.
pub fn authorization_url(
    base_url: &str,
    client_id: &str,
    p: &AuthorizeParams<'_>,
) -> Result<AuthorizationRequest> {
    check_redirect_uri(p.redirect_uri)?;
    check_scope(p.scope)?;
    let state = match p.state {
        Some("") => return Err(Error::invalid("state must not be empty")),
        Some(s) => s.to_string(),
        None => random_token(32)?,
    };
    let code_verifier = if p.pkce {
        Some(random_token(32)?)
    } else {
        None
    };
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", p.redirect_uri)
        .append_pair("scope", p.scope)
        .append_pair("state", &state);
    if let Some(v) = &code_verifier {
        query
            .append_pair("code_challenge", &s256_challenge(v))
            .append_pair("code_challenge_method", "S256");
    }
    Ok(AuthorizationRequest {
        url: format!("{base_url}/v1/oauth/authorize?{}", query.finish()),
        state,
        redirect_uri: p.redirect_uri.to_string(),
        code_verifier,
    })
}

/// Reads the callback (a full URL, or its query string) and returns the code, after checking
/// the state in constant time and turning `error=` into `Error::OAuth`.
pub fn code_from_callback(auth: &AuthorizationRequest, callback: &str) -> Result<String> {
    let query = match callback.find('?') {
        Some(i) => &callback[i + 1..],
        None => callback,
    };
    let query = query.split('#').next().unwrap_or_default();
    let mut code = None;
    let mut state = None;
    let mut error = None;
    let mut description = None;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "code" => code = Some(v.into_owned()),
            "state" => state = Some(v.into_owned()),
            "error" => error = Some(v.into_owned()),
            "error_description" => description = Some(v.into_owned()),
            _ => {}
        }
    }
    let state_ok = state
        .as_deref()
        .map(|s| bool::from(s.as_bytes().ct_eq(auth.state.as_bytes())))
        .unwrap_or(false);
    if let Some(error) = error {
        // An error callback with a foreign state is not ours to trust.
        if state.is_some() && !state_ok {
            return Err(Error::StateMismatch);
        }
        return Err(Error::OAuth {
            error,
            description,
            status: None,
        });
    }
    if !state_ok {
        return Err(Error::StateMismatch);
    }
    match code {
        Some(c) if !c.is_empty() => Ok(c),
        _ => Err(Error::OAuth {
            error: "invalid_request".into(),
            description: Some("the callback carries no code".into()),
            status: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pkce: bool) -> AuthorizeParams<'static> {
        AuthorizeParams {
            redirect_uri: "https://app.example/cb",
            state: None,
            scope: "gca-aisp",
            pkce,
        }
    }

    fn auth() -> AuthorizationRequest {
        authorization_url("https://svc.example", "cid", &params(true)).expect("url")
    }

    #[test]
    fn pkce_s256_challenge() {
        // Expected value from an independent implementation (Python's hashlib + base64).
        assert_eq!(
            s256_challenge("dBjftJeZ4CVP-mB92K27uhbUpdlFXOIBA4NRMB1nlFk"),
            "bMHnTem_XcD1k1oumh_cdFWAN3WTn9pip-01ooSUmbM"
        );
        let a = auth();
        let v = a.code_verifier.clone().expect("verifier");
        assert_eq!(v.len(), 43);
        let q: std::collections::HashMap<_, _> = url::Url::parse(&a.url)
            .expect("url")
            .query_pairs()
            .into_owned()
            .collect();
        assert_eq!(q.get("code_challenge"), Some(&s256_challenge(&v)));
        assert_eq!(
            q.get("code_challenge_method").map(String::as_str),
            Some("S256")
        );
        assert!(!a.url.contains(&v));
        let plain = authorization_url("https://svc.example", "cid", &params(false)).expect("url");
        assert!(plain.code_verifier.is_none() && !plain.url.contains("code_challenge"));
    }

    #[test]
    fn scope_rules() {
        assert!(check_scope("gca-aisp").is_ok());
        assert!(check_scope("gca-aisp openid").is_ok());
        for bad in ["", " ", "a  b", "a\"b", "a\\b", "caf\u{e9}", " gca-aisp"] {
            assert!(check_scope(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn url_has_every_parameter_and_a_long_state() {
        let a = auth();
        assert!(a.state.len() >= 22, "{}", a.state);
        let parsed = url::Url::parse(&a.url).expect("url");
        let q: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(q.get("response_type").map(String::as_str), Some("code"));
        assert_eq!(q.get("scope").map(String::as_str), Some("gca-aisp"));
        assert_eq!(
            q.get("redirect_uri").map(String::as_str),
            Some("https://app.example/cb")
        );
        assert_eq!(q.get("state"), Some(&a.state));
        assert_ne!(auth().state, a.state);
    }

    #[test]
    fn redirect_uri_rules() {
        assert!(check_redirect_uri("https://app.example/cb").is_ok());
        assert!(check_redirect_uri("com.example.app:/oauth").is_ok());
        assert!(check_redirect_uri("http://app.example/cb").is_err());
        assert!(check_redirect_uri("/relative").is_err());
    }

    #[test]
    fn an_https_redirect_uri_always_names_a_host() {
        // Why check_redirect_uri has no "https without a host" arm: such a URI never parses.
        for hostless in ["https://", "https:", "https://:443/cb", "https://?x=1"] {
            assert!(url::Url::parse(hostless).is_err(), "{hostless:?}");
            assert!(
                matches!(check_redirect_uri(hostless), Err(Error::Configuration(_))),
                "{hostless:?}"
            );
        }
        // Missing or extra slashes are mended, and the first segment is read as the host
        // ("https:/cb" and "https:///cb" are both "https://cb/").
        for mended in ["https:/cb", "https:///cb"] {
            let parsed = url::Url::parse(mended).expect(mended);
            assert_eq!(parsed.host_str(), Some("cb"), "{mended:?}");
        }
    }

    #[test]
    fn a_redirect_uri_with_a_fragment_is_refused_whatever_its_scheme() {
        for with_fragment in [
            "com.example.app:/oauth#x",
            "com.example.app:/oauth#",
            "https://app.example/cb#x",
            "https://app.example/cb#",
        ] {
            let err = check_redirect_uri(with_fragment).expect_err(with_fragment);
            assert!(
                matches!(&err, Error::Configuration(m) if m.contains("fragment")),
                "{with_fragment:?}: {err:?}"
            );
        }
        let p = AuthorizeParams {
            redirect_uri: "https://app.example/cb#top",
            ..params(true)
        };
        assert!(authorization_url("https://svc.example", "cid", &p).is_err());
    }

    #[test]
    fn callback_checks() {
        let a = auth();
        let ok = format!("https://app.example/cb?code=C1&state={}", a.state);
        assert_eq!(code_from_callback(&a, &ok).ok().as_deref(), Some("C1"));
        let qs = format!("code=C2&state={}", a.state);
        assert_eq!(code_from_callback(&a, &qs).ok().as_deref(), Some("C2"));
        assert!(matches!(
            code_from_callback(&a, "code=C&state=forged"),
            Err(Error::StateMismatch)
        ));
        assert!(matches!(
            code_from_callback(&a, "code=C"),
            Err(Error::StateMismatch)
        ));
        let denied = format!("?error=access_denied&state={}", a.state);
        assert!(
            matches!(code_from_callback(&a, &denied), Err(Error::OAuth { error, .. }) if error == "access_denied")
        );
    }

    #[test]
    fn an_error_callback_carries_its_description() {
        let a = auth();
        let denied = format!(
            "https://app.example/cb?error=access_denied&error_description=The+user+said+no&state={}",
            a.state
        );
        match code_from_callback(&a, &denied) {
            Err(Error::OAuth {
                error,
                description,
                status,
            }) => {
                assert_eq!(error, "access_denied");
                assert_eq!(description.as_deref(), Some("The user said no"));
                assert_eq!(status, None);
            }
            other => panic!("expected Error::OAuth, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_code_is_refused() {
        let a = auth();
        for cb in [
            format!("?code=&state={}", a.state),
            format!("?state={}", a.state),
        ] {
            match code_from_callback(&a, &cb) {
                Err(Error::OAuth { error, .. }) => assert_eq!(error, "invalid_request", "{cb}"),
                other => panic!("{cb}: expected Error::OAuth, got {other:?}"),
            }
        }
    }
}

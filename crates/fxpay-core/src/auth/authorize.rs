//! The authorization-code flow's first half: the URL to send the browser to, with a random
//! state, a scope and an RFC 7636 PKCE challenge, and the check of the callback the browser
//! comes back with.
use crate::error::{Error, Result};
use crate::sha256::Sha256;
use base64::Engine;
use subtle::ConstantTimeEq;

pub(crate) use crate::models::AuthorizationRequest;

/// `n` random bytes from the OS CSPRNG, base64url without padding.
pub(crate) fn random_token(n: usize) -> Result<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)
        .map_err(|e| Error::Internal(format!("the OS random source failed: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf))
}

/// A redirect URI must be `https://` or a custom scheme (native apps); plain http is refused.
/// Whatever its scheme, it must not carry a fragment (RFC 6749 3.1.2).
///
/// The URI is checked as written, not as `url` would mend it: `url` drops tabs, CR and LF
/// anywhere and spaces at either end, and reads `https:///cb` or `https:/cb` as the host
/// `cb`. A URI that needs mending is not the one the service has registered, so any control
/// or space character, and an `https` URI whose authority (after `https://`) names no host,
/// are refused.
pub(crate) fn check_redirect_uri(uri: &str) -> Result<()> {
    if let Some(c) = uri.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::config(format!(
            "redirect_uri must not contain control or space characters, got {c:?} in {uri:?}"
        )));
    }
    if uri
        .get(..6)
        .is_some_and(|s| s.eq_ignore_ascii_case("https:"))
    {
        let authority = uri[6..]
            .strip_prefix("//")
            .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or_default());
        let host = authority.map(|a| {
            let host_port = a.rsplit('@').next().unwrap_or_default();
            if host_port.starts_with('[') {
                host_port
            } else {
                host_port.split(':').next().unwrap_or_default()
            }
        });
        if host.is_none_or(str::is_empty) {
            return Err(Error::config(format!(
                "an https redirect_uri must be https://<host>/..., got {uri:?} with no host"
            )));
        }
    }
    let parsed = url::Url::parse(uri)
        .map_err(|e| Error::config(format!("redirect_uri {uri:?} is not an absolute URI: {e}")))?;
    if parsed.fragment().is_some() {
        return Err(Error::config(format!(
            "redirect_uri must not have a fragment, got {uri:?}"
        )));
    }
    match parsed.scheme() {
        "http" | "ws" | "wss" | "ftp" | "file" | "data" | "javascript" => Err(Error::config(
            format!("redirect_uri must be https:// or a custom scheme, got {uri:?}"),
        )),
        _ => Ok(()),
    }
}

/// The RFC 7636 `S256` challenge of a verifier: base64url (no padding) of its SHA-256.
pub(crate) fn s256_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A scope is one or more RFC 6749 §3.3 scope tokens separated by single spaces.
pub(crate) fn check_scope(scope: &str) -> Result<()> {
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
pub(crate) fn authorization_url(
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
///
/// RFC 6749 3.1 forbids repeating a parameter. A callback that repeats `state` is refused as
/// a state mismatch whatever its values (a forged one may come first or last), and one that
/// repeats `code`, `error` or `error_description` as an `invalid_request`, before anything is
/// sent: which code to redeem is not ours to guess.
pub(crate) fn code_from_callback(auth: &AuthorizationRequest, callback: &str) -> Result<String> {
    let query = match callback.find('?') {
        Some(i) => &callback[i + 1..],
        None => callback,
    };
    let query = query.split('#').next().unwrap_or_default();
    let mut code = None;
    let mut state = None;
    let mut error = None;
    let mut description = None;
    let mut repeated: Option<&'static str> = None;
    let mut state_repeated = false;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let (slot, name) = match k.as_ref() {
            "code" => (&mut code, "code"),
            "state" => (&mut state, "state"),
            "error" => (&mut error, "error"),
            "error_description" => (&mut description, "error_description"),
            _ => continue,
        };
        if slot.replace(v.into_owned()).is_some() {
            if name == "state" {
                state_repeated = true;
            } else {
                repeated.get_or_insert(name);
            }
        }
    }
    if state_repeated {
        return Err(Error::StateMismatch);
    }
    if let Some(name) = repeated {
        return Err(Error::OAuth {
            error: "invalid_request".into(),
            description: Some(format!("the callback repeats the parameter {name:?}")),
            status: None,
            headers: Vec::new(),
            body: None,
        });
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
            headers: Vec::new(),
            body: None,
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
            headers: Vec::new(),
            body: None,
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
        for hostless in ["https://", "https:", "https://:443/cb", "https://?x=1"] {
            assert!(url::Url::parse(hostless).is_err(), "{hostless:?}");
            assert!(
                matches!(check_redirect_uri(hostless), Err(Error::Configuration(_))),
                "{hostless:?}"
            );
        }
        // `url` mends missing or extra slashes and reads the first segment as the host
        // ("https:/cb" and "https:///cb" are both "https://cb/"); the check does not.
        for mended in [
            "https:/cb",
            "https:///cb",
            "https:///nohost",
            "HTTPS:///nohost",
            "https:cb",
            "https://user@/cb",
            "https://:8443",
        ] {
            let err = check_redirect_uri(mended).expect_err(mended);
            assert!(
                matches!(&err, Error::Configuration(m) if m.contains("no host")),
                "{mended:?}: {err:?}"
            );
        }
        for fine in [
            "https://app.example/cb",
            "https://app.example:8443/cb?x=1",
            "https://u@app.example/cb",
            "https://[::1]:8443/cb",
            "HTTPS://APP.EXAMPLE/cb",
        ] {
            assert!(check_redirect_uri(fine).is_ok(), "{fine:?}");
        }
    }

    #[test]
    fn a_redirect_uri_with_a_control_or_space_character_is_refused() {
        // `url` would silently drop each of these (or percent-encode it), and send a URI
        // that is not the one given.
        for bad in [
            "https://app.example/cb\r\n",
            "https://app.example/c\nb",
            "https://app.ex\rample/cb",
            "https://app.example/c\tb",
            " https://app.example/cb",
            "https://app.example/cb ",
            "https://app.example/c b",
            "https://app.example/cb\u{0}",
            "https://app.example/cb\u{7f}",
            "https://app.example/cb\u{85}",
            "https://app.example/c\u{a0}b",
            "https://app.example/c\u{2028}b",
            "https://app.example/c\u{3000}b",
            "com.example.app:/oauth\n",
            "com.example.app:/o auth",
        ] {
            let err = check_redirect_uri(bad).expect_err(bad);
            assert!(
                matches!(&err, Error::Configuration(m) if m.contains("control or space")),
                "{bad:?}: {err:?}"
            );
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
    fn a_repeated_state_is_a_mismatch_whichever_value_comes_last() {
        let a = auth();
        let s = &a.state;
        for cb in [
            format!("?state=WRONG&code=x&state={s}"),
            format!("?state={s}&code=x&state=WRONG"),
            format!("?state={s}&code=x&state={s}"),
            format!("https://app.example/cb?state={s}&state={s}&code=x"),
            format!("?error=access_denied&state={s}&state=WRONG"),
        ] {
            assert!(
                matches!(code_from_callback(&a, &cb), Err(Error::StateMismatch)),
                "{cb}"
            );
        }
    }

    #[test]
    fn a_repeated_code_or_error_is_an_invalid_request() {
        let a = auth();
        let s = &a.state;
        for (cb, name) in [
            (format!("?code=x&state={s}&code=y"), "code"),
            (format!("?code=x&code=x&state={s}"), "code"),
            (format!("?code=&code=y&state={s}"), "code"),
            (format!("?error=a&error=b&state={s}"), "error"),
            (
                format!("?error=a&error_description=x&error_description=y&state={s}"),
                "error_description",
            ),
        ] {
            match code_from_callback(&a, &cb) {
                Err(Error::OAuth {
                    error, description, ..
                }) => {
                    assert_eq!(error, "invalid_request", "{cb}");
                    let d = description.unwrap_or_default();
                    assert!(d.contains(&format!("{name:?}")), "{cb}: {d}");
                }
                other => panic!("{cb}: expected Error::OAuth, got {other:?}"),
            }
        }
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
                headers,
                body,
            }) => {
                assert_eq!(error, "access_denied");
                assert_eq!(body, None);
                assert_eq!(description.as_deref(), Some("The user said no"));
                assert_eq!(status, None);
                assert!(headers.is_empty());
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

//! Secrets out of cassettes: every secret a request or an answer carries is replaced by a
//! stable placeholder before it is written or compared.
//!
//! Stable means: within one cassette, the same secret always becomes the same placeholder,
//! and a placeholder is kept as it is. So a token answer recorded as
//! `fxpay-scrubbed-access-token-1` is replayed with that text as the token, the client sends
//! it back as `Bearer fxpay-scrubbed-access-token-1`, and that matches the recorded request.
//! Values the client makes up itself (callback nonces, code verifiers) and values that
//! differ between runs (the client secret of a fresh sandbox, authorization codes) are
//! numbered in the order they first appear, which is the same when a test runs the same
//! calls again.
use serde_json::Value;
use std::collections::HashMap;

/// Every placeholder starts with this; a value that does is never scrubbed again.
pub(crate) const PREFIX: &str = "fxpay-scrubbed-";

/// What a secret is, which names its placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    ClientSecret,
    Code,
    CodeVerifier,
    AccessToken,
    RefreshToken,
    IdToken,
    Nonce,
    Credentials,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::ClientSecret => "client-secret",
            Kind::Code => "code",
            Kind::CodeVerifier => "code-verifier",
            Kind::AccessToken => "access-token",
            Kind::RefreshToken => "refresh-token",
            Kind::IdToken => "id-token",
            Kind::Nonce => "nonce",
            Kind::Credentials => "credentials",
        }
    }

    /// The kind of a form field, query parameter or JSON key, if it holds a secret.
    pub(crate) fn of_field(name: &str) -> Option<Kind> {
        Some(match name {
            "client_secret" | "clientSecret" => Kind::ClientSecret,
            "code" => Kind::Code,
            "code_verifier" | "codeVerifier" => Kind::CodeVerifier,
            "access_token" | "accessToken" => Kind::AccessToken,
            "refresh_token" | "refreshToken" => Kind::RefreshToken,
            "id_token" | "idToken" => Kind::IdToken,
            "nonce" | "callback_nonce" | "callbackNonce" | "callback-nonce" => Kind::Nonce,
            "password" | "client_assertion" | "assertion" => Kind::Credentials,
            _ => return None,
        })
    }
}

/// The secrets seen so far and their placeholders.
#[derive(Debug, Default)]
pub(crate) struct Scrubber {
    placeholders: HashMap<String, String>,
    counts: HashMap<Kind, u32>,
}

impl Scrubber {
    /// The placeholder of `value`, made on first sight.
    pub(crate) fn placeholder(&mut self, kind: Kind, value: &str) -> String {
        if value.is_empty() || value.starts_with(PREFIX) {
            return value.to_string();
        }
        if let Some(p) = self.placeholders.get(value) {
            return p.clone();
        }
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let p = format!("{PREFIX}{}-{n}", kind.label());
        self.placeholders.insert(value.to_string(), p.clone());
        p
    }

    /// A form body or query string with its secret fields replaced (unchanged if it has none).
    pub(crate) fn form(&mut self, text: &str) -> String {
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(text.as_bytes())
            .into_owned()
            .collect();
        if !pairs.iter().any(|(k, _)| Kind::of_field(k).is_some()) {
            return self.redact_known(text);
        }
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            match Kind::of_field(k) {
                Some(kind) => out.append_pair(k, &self.placeholder(kind, v)),
                None => out.append_pair(k, &self.redact_known(v)),
            };
        }
        out.finish()
    }

    /// A JSON value with every secret field replaced, at any depth, and every secret already
    /// known replaced wherever else it appears.
    pub(crate) fn json(&mut self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    match (Kind::of_field(k), &*v) {
                        (Some(kind), Value::String(s)) => {
                            *v = Value::String(self.placeholder(kind, s));
                        }
                        _ => self.json(v),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::String(s) => *s = self.redact_known(s),
            _ => {}
        }
    }

    /// A request or answer header's value, scrubbed if the header carries a secret.
    pub(crate) fn header(&mut self, name: &str, value: &str) -> String {
        let lower = name.to_ascii_lowercase();
        if lower == "authorization" || lower == "proxy-authorization" {
            return match value.split_once(' ') {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => {
                    format!(
                        "{scheme} {}",
                        self.placeholder(Kind::AccessToken, rest.trim())
                    )
                }
                Some((scheme, rest)) => {
                    format!(
                        "{scheme} {}",
                        self.placeholder(Kind::Credentials, rest.trim())
                    )
                }
                None => self.placeholder(Kind::Credentials, value),
            };
        }
        if let Some(kind) = Kind::of_field(&lower) {
            return self.placeholder(kind, value);
        }
        if lower.contains("token") || lower.contains("secret") || lower.contains("cookie") {
            return self.placeholder(Kind::Credentials, value);
        }
        // A URL (`callback-location`, `location`) may carry secrets in its query.
        if let Some((url, query)) = value.split_once('?') {
            if url.contains("://") || url.starts_with('/') {
                return format!("{}?{}", self.redact_known(url), self.form(query));
            }
        }
        self.redact_known(value)
    }

    /// `text` with every secret seen so far replaced by its placeholder (for secrets echoed
    /// in error messages and the like). Very short values are left alone.
    pub(crate) fn redact_known(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (secret, p) in &self.placeholders {
            if secret.len() >= 8 && out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), p);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_secret_same_placeholder_and_placeholders_stay() {
        let mut s = Scrubber::default();
        let a = s.placeholder(Kind::AccessToken, "tok-AAAA");
        assert_eq!(a, "fxpay-scrubbed-access-token-1");
        assert_eq!(s.placeholder(Kind::AccessToken, "tok-AAAA"), a);
        assert_eq!(
            s.placeholder(Kind::AccessToken, "tok-BBBB"),
            "fxpay-scrubbed-access-token-2"
        );
        assert_eq!(s.placeholder(Kind::AccessToken, &a), a);
        assert_eq!(
            s.header("Authorization", "Bearer tok-AAAA"),
            format!("Bearer {a}")
        );
        assert_eq!(
            s.header("authorization", "Basic aWQ6c2VjcmV0"),
            "Basic fxpay-scrubbed-credentials-1"
        );
        assert_eq!(
            s.header("callback-nonce", "n0nce-xyz"),
            "fxpay-scrubbed-nonce-1"
        );
    }

    #[test]
    fn forms_and_json() {
        let mut s = Scrubber::default();
        let form = s.form("grant_type=refresh_token&refresh_token=R1-secret&client_id=cid&client_secret=S3cr3t-value&scope=gca-aisp");
        assert_eq!(form, "grant_type=refresh_token&refresh_token=fxpay-scrubbed-refresh-token-1&client_id=cid&client_secret=fxpay-scrubbed-client-secret-1&scope=gca-aisp");
        let mut v: Value = serde_json::from_str(
            r#"{"access_token":"A1-token","refresh_token":"R1-secret","expires_in":3600,"note":"was R1-secret"}"#,
        )
        .expect("json");
        s.json(&mut v);
        assert_eq!(v["access_token"], "fxpay-scrubbed-access-token-1");
        assert_eq!(v["refresh_token"], "fxpay-scrubbed-refresh-token-1");
        assert_eq!(v["note"], "was fxpay-scrubbed-refresh-token-1");
        assert_eq!(v["expires_in"], 3600);
        assert_eq!(s.form("a=1&b=2"), "a=1&b=2");
    }
}

//! OAuth access tokens (spec 2.1), with the instant they expire.
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// The token endpoint's answer as sent (RFC 6749 section 5.1).
#[derive(Clone, Deserialize)]
pub(crate) struct TokenResponse {
    pub access_token: String,
    #[serde(default = "bearer")]
    pub token_type: String,
    #[serde(default, deserialize_with = "lenient_seconds")]
    pub expires_in: Option<u64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
}

fn bearer() -> String {
    "Bearer".to_string()
}

/// `expires_in` as servers send it: a whole number, a number with a fraction (rounded down),
/// a string of digits (some servers quote it), or null.
fn lenient_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let v = serde_json::Value::deserialize(d)?;
    let text = match &v {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.trim().to_string(),
        other => {
            return Err(D::Error::custom(format!(
                "expires_in must be a number of seconds, got {other}"
            )))
        }
    };
    let whole = text.split_once('.').map_or(text.as_str(), |(w, _)| w);
    whole.parse::<u64>().map(Some).map_err(|_| {
        D::Error::custom(format!(
            "expires_in must be a non-negative number of seconds, got {text}"
        ))
    })
}

model! {
    /// An OAuth access token with the instant it expires (`expires_at`, unix seconds; an
    /// aware datetime in Python). The token values never show in `Debug` or `repr`.
    #[derive(Clone, Serialize, Deserialize)]
    pub struct Token secret(access_token, refresh_token) {
        pub access_token: String,
        pub token_type: String,
        pub expires_in: u64,
        pub expires_at: f64,
        pub refresh_token: Option<String>,
        pub scope: Option<String>,
    }
}

impl Token {
    /// `expires_at` to the microsecond, as Python's `datetime` holds it: tokens compare and
    /// hash by that, so a token that went through a `datetime` (a store, `Token.from_dict`)
    /// equals the one it came from.
    fn expires_at_micros(&self) -> i64 {
        // As CPython's `datetime.fromtimestamp` rounds: the fraction of the second, in
        // microseconds, to the nearest (ties to even).
        let whole = self.expires_at.trunc();
        let micros = ((self.expires_at - whole) * 1e6).round_ties_even();
        (whole as i64) * 1_000_000 + micros as i64
    }
}

impl PartialEq for Token {
    fn eq(&self, other: &Self) -> bool {
        self.access_token == other.access_token
            && self.token_type == other.token_type
            && self.expires_in == other.expires_in
            && self.expires_at_micros() == other.expires_at_micros()
            && self.refresh_token == other.refresh_token
            && self.scope == other.scope
    }
}

impl std::hash::Hash for Token {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.access_token.hash(state);
        self.token_type.hash(state);
        self.expires_in.hash(state);
        self.expires_at_micros().hash(state);
        self.refresh_token.hash(state);
        self.scope.hash(state);
    }
}

/// Seconds since the unix epoch on this machine's clock.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Token {
    /// A token that lives `expires_in` seconds from `received_at` (3599 s when unsaid).
    pub(crate) fn from_response(r: TokenResponse, received_at: f64) -> Token {
        let expires_in = r.expires_in.unwrap_or(3599);
        Token {
            access_token: r.access_token,
            token_type: r.token_type,
            expires_in,
            expires_at: received_at + expires_in as f64,
            refresh_token: r.refresh_token,
            scope: r.scope,
        }
    }

    /// True while the token has more than `margin` seconds left at `now`.
    pub(crate) fn fresh_at(&self, now: f64, margin: f64) -> bool {
        self.expires_at - margin > now
    }

    /// The margin before expiry at which a token is renewed: a tenth of its life, between
    /// 5 and 60 seconds.
    pub(crate) fn renew_margin(&self) -> f64 {
        (self.expires_in as f64 / 10.0).clamp(5.0, 60.0)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_secrets() {
        let t = Token {
            access_token: "SECRET-ACCESS".into(),
            token_type: "Bearer".into(),
            expires_in: 3599,
            expires_at: 10.0,
            refresh_token: Some("SECRET-REFRESH".into()),
            scope: Some("gca-aisp".into()),
        };
        let s = format!("{t:?}");
        assert!(!s.contains("SECRET"), "{s}");
        assert!(s.contains("gca-aisp"));
    }

    #[test]
    fn expires_in_is_read_leniently() {
        let parse = |body: &str| {
            serde_json::from_str::<TokenResponse>(body)
                .map(|r| r.expires_in)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            parse(r#"{"access_token":"a","expires_in":60}"#),
            Ok(Some(60))
        );
        assert_eq!(
            parse(r#"{"access_token":"a","expires_in":"60"}"#),
            Ok(Some(60))
        );
        assert_eq!(
            parse(r#"{"access_token":"a","expires_in":60.9}"#),
            Ok(Some(60))
        );
        assert_eq!(parse(r#"{"access_token":"a","expires_in":null}"#), Ok(None));
        assert_eq!(parse(r#"{"access_token":"a","x":[1]}"#), Ok(None));
        for bad in [r#""-5""#, "-5", r#""soon""#, "true", "1e3"] {
            let body = format!(r#"{{"access_token":"a","expires_in":{bad}}}"#);
            assert!(
                parse(&body).is_err_and(|e| e.contains("expires_in")),
                "{bad}"
            );
        }
    }

    #[test]
    fn tokens_compare_to_the_microsecond() {
        let t = |at: f64| Token {
            access_token: "a".into(),
            token_type: "Bearer".into(),
            expires_in: 60,
            expires_at: at,
            refresh_token: None,
            scope: None,
        };
        assert_eq!(t(1_795_000_000.123_456_2), t(1_795_000_000.123_456));
        assert_ne!(t(1_795_000_000.123_457), t(1_795_000_000.123_456));
        // Ties to even, on the fraction of the second (as `datetime` rounds).
        assert_eq!(t(1_795_000_000.000_000_5), t(1_795_000_000.0));
    }

    #[test]
    fn freshness_uses_margin() {
        let r: TokenResponse =
            serde_json::from_str(r#"{"access_token":"a","expires_in":3599,"token_type":"Bearer"}"#)
                .expect("parse");
        let t = Token::from_response(r, 1000.0);
        assert_eq!(t.expires_at, 4599.0);
        assert!(t.fresh_at(4000.0, t.renew_margin()));
        assert!(!t.fresh_at(4560.0, t.renew_margin()));
    }
}

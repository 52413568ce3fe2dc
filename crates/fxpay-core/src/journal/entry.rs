//! One journal entry: what a store keeps under an idempotency key, and its JSON text (the
//! only form a store needs to keep; stores compare it as text to swap one entry for another).
use serde::{Deserialize, Serialize};

/// Where a key's call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Claimed: its holder is sending, or about to.
    Pending,
    /// Created: `result` holds the id the service gave.
    Done,
    /// The request may have reached the service and its answer was lost: nothing is sent
    /// under this key until it is resolved.
    Unknown,
    /// Nothing was created: the key may be used again, with any request.
    Released,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Done => "done",
            State::Unknown => "unknown",
            State::Released => "released",
        }
    }
}

/// A key's record. Times are milliseconds since the Unix epoch (integers, so that the JSON
/// text of an entry read back is the text written, byte for byte).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub key: String,
    /// The creating call: `create_quote`, `create_beneficiary`, `create_deal`,
    /// `create_spot_deal`.
    pub operation: String,
    /// SHA-256 of the operation and its wire request (secrets aside): a repeat must match.
    pub fingerprint: String,
    pub state: State,
    /// The created id: a quote, beneficiary or deal id, or a spot deal's process id.
    pub result: Option<String>,
    /// A spot deal's deal id, once its `DealCreated` arrived.
    pub deal_id: Option<String>,
    /// Who claimed the key: `host/pid/token`.
    pub holder: String,
    /// Until when the holder's claim stands unless renewed.
    pub lease_until: u64,
    pub created_at: u64,
    pub updated_at: u64,
    /// Why the key is `unknown` or `released`.
    pub error: Option<String>,
    /// The service's answer (JSON text), kept so a replay returns what the first call did.
    pub response: Option<String>,
    /// A spot deal's callback nonce, so that a replay returns it too.
    pub nonce: Option<String>,
    /// The request's wire body (JSON text; it holds no secret), for reconciliation and for
    /// payouts that resume.
    #[serde(default)]
    pub request: Option<String>,
}

impl Entry {
    /// The entry's JSON text, as stores keep it.
    pub fn to_json(&self) -> String {
        // Serialising a struct of strings, integers and options cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// An entry from the text `to_json` gave; the error says what is wrong with it.
    pub fn from_json(text: &str) -> Result<Entry, String> {
        serde_json::from_str(text)
            .map_err(|e| format!("the journal holds an entry that is not valid: {e}"))
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            key: "k\u{e9}\"1".into(),
            operation: "create_deal".into(),
            fingerprint: "f".into(),
            state: State::Pending,
            result: None,
            deal_id: None,
            holder: "h/1/t".into(),
            lease_until: 1_700_000_030_123,
            created_at: 1_700_000_000_123,
            updated_at: 1_700_000_000_123,
            error: Some("x".into()),
            response: Some("{\"dealId\":\"d\"}".into()),
            nonce: None,
            request: Some("{}".into()),
        }
    }

    #[test]
    fn text_read_back_is_the_text_written() {
        let e = entry();
        let text = e.to_json();
        let back = Entry::from_json(&text).expect("valid");
        assert_eq!(back, e);
        assert_eq!(back.to_json(), text);
    }

    #[test]
    fn invalid_text_is_refused_with_a_reason() {
        let err = Entry::from_json("{\"key\": 1}").expect_err("invalid");
        assert!(err.contains("not valid"), "{err}");
    }
}

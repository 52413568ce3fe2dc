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
    /// The entry's JSON text, as stores keep it: byte for byte what `serde_json::to_string`
    /// writes (stores swap an entry by comparing its text, and texts written by earlier
    /// versions must compare equal), written here in one buffer sized once, with strings that
    /// need no escape copied whole (a keyed call writes two entries; serde's writer cost
    /// about 13k instructions of a 177k keyed call, bench/README.md).
    pub fn to_json(&self) -> String {
        let strings = [
            Some(self.key.as_str()),
            Some(self.operation.as_str()),
            Some(self.fingerprint.as_str()),
            self.result.as_deref(),
            self.deal_id.as_deref(),
            Some(self.holder.as_str()),
            self.error.as_deref(),
            self.response.as_deref(),
            self.nonce.as_deref(),
            self.request.as_deref(),
        ];
        // Field names, punctuation, three numbers of at most 20 digits, and the strings
        // (an escaped one may still grow the buffer).
        let size = 240 + strings.iter().flatten().map(|s| s.len() + 2).sum::<usize>();
        let mut out = String::with_capacity(size);
        out.push_str("{\"key\":");
        push_str(&mut out, &self.key);
        out.push_str(",\"operation\":");
        push_str(&mut out, &self.operation);
        out.push_str(",\"fingerprint\":");
        push_str(&mut out, &self.fingerprint);
        out.push_str(",\"state\":\"");
        out.push_str(self.state.as_str());
        out.push_str("\",\"result\":");
        push_opt(&mut out, self.result.as_deref());
        out.push_str(",\"deal_id\":");
        push_opt(&mut out, self.deal_id.as_deref());
        out.push_str(",\"holder\":");
        push_str(&mut out, &self.holder);
        out.push_str(",\"lease_until\":");
        push_u64(&mut out, self.lease_until);
        out.push_str(",\"created_at\":");
        push_u64(&mut out, self.created_at);
        out.push_str(",\"updated_at\":");
        push_u64(&mut out, self.updated_at);
        out.push_str(",\"error\":");
        push_opt(&mut out, self.error.as_deref());
        out.push_str(",\"response\":");
        push_opt(&mut out, self.response.as_deref());
        out.push_str(",\"nonce\":");
        push_opt(&mut out, self.nonce.as_deref());
        out.push_str(",\"request\":");
        push_opt(&mut out, self.request.as_deref());
        out.push('}');
        out
    }

    /// An entry from the text `to_json` gave; the error says what is wrong with it.
    pub fn from_json(text: &str) -> Result<Entry, String> {
        serde_json::from_str(text)
            .map_err(|e| format!("the journal holds an entry that is not valid: {e}"))
    }
}

fn push_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

fn push_opt(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => push_str(out, s),
        None => out.push_str("null"),
    }
}

/// Whether any of the 8 bytes in `w` is a control character, `"` or `\` ("has a byte less
/// than n" and "has a zero byte" of "Bit Twiddling Hacks": exact as a yes or no).
fn needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (below_space | zero_in(w ^ (ONES * u64::from(b'"'))) | zero_in(w ^ (ONES * u64::from(b'\\'))))
        != 0
}

/// What `serde_json` writes for a byte of a string: 0 for the byte itself, else the letter
/// of its escape (`u` for `\u00xx`).
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Appends the bytes kept whole since `from`, then the byte `s[at]` escaped as `ESCAPE`
/// says (`e`, not 0); returns where the bytes kept whole start now.
#[inline(never)]
fn escaped(out: &mut String, s: &str, at: usize, from: usize, e: u8) -> usize {
    // `at` holds an ASCII byte: both slices end on character boundaries.
    out.push_str(s.get(from..at).unwrap_or_default());
    out.push('\\');
    out.push(char::from(e));
    if e == b'u' {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let b = s.as_bytes()[at];
        out.push_str("00");
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    at + 1
}

/// `s` as a JSON string, escaped as `serde_json` escapes it: `"`, `\`, and control
/// characters (`\b \t \n \f \r` by name, the others as `\u00xx`); anything else as is.
/// Eight bytes are tested at a time; only a word that holds a byte to escape is read byte by
/// byte.
fn push_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let (mut at, mut from) = (0, 0);
    let bytewise = |out: &mut String, range: std::ops::Range<usize>, from: &mut usize| {
        for (i, &b) in bytes[range.clone()].iter().enumerate() {
            let e = ESCAPE[usize::from(b)];
            if e != 0 {
                *from = escaped(out, s, range.start + i, *from, e);
            }
        }
    };
    while let Some(word) = bytes.get(at..at + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if needs_escape(u64::from_le_bytes(w)) {
            bytewise(out, at..at + 8, &mut from);
        }
        at += 8;
    }
    bytewise(out, at..bytes.len(), &mut from);
    out.push_str(s.get(from..).unwrap_or_default());
    out.push('"');
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

    fn serde_text(e: &Entry) -> String {
        serde_json::to_string(e).expect("serialise")
    }

    #[test]
    fn the_text_is_serde_jsons_byte_for_byte() {
        let mut e = entry();
        assert_eq!(e.to_json(), serde_text(&e));
        // Every byte that is escaped, at every place of an 8-byte word, and every option.
        let mut every: String = (0u8..0x80).map(char::from).collect();
        every.push_str("\u{e9}\u{1f600}\u{7f}\\\"");
        for shift in 0..9 {
            let s = format!("{}{every}{}", "a".repeat(shift), "b".repeat(shift));
            e.key = s.clone();
            e.holder = s[..shift * 2].to_owned();
            e.result = Some(s.clone());
            e.deal_id = (shift % 2 == 0).then(|| s.clone());
            e.error = None;
            e.nonce = Some(String::new());
            e.request = (shift % 3 != 0).then(|| s.chars().rev().collect());
            e.lease_until = u64::MAX >> shift;
            e.created_at = shift as u64;
            e.updated_at = 10u64.pow(shift as u32);
            assert_eq!(e.to_json(), serde_text(&e), "shift {shift}");
            assert_eq!(Entry::from_json(&e.to_json()).expect("back"), e);
        }
        for state in [State::Pending, State::Done, State::Unknown, State::Released] {
            e.state = state;
            assert_eq!(e.to_json(), serde_text(&e));
        }
        for b in 0u8..0x80 {
            for at in 0..16 {
                let mut s = "x".repeat(16);
                s.replace_range(at..=at, &char::from(b).to_string());
                e.fingerprint = s;
                assert_eq!(e.to_json(), serde_text(&e), "byte {b:#x} at {at}");
            }
        }
    }

    #[test]
    fn invalid_text_is_refused_with_a_reason() {
        let err = Entry::from_json("{\"key\": 1}").expect_err("invalid");
        assert!(err.contains("not valid"), "{err}");
    }
}

//! How a fuzz input (or a corpus file) becomes the arguments of `parse_deal_created`.
//! Shared by the fuzz target and `crates/fxpay-core/tests/webhook_corpus.rs`.
//!
//! An input that starts with `N` is a small HTTP-like message: the rest of the first line is
//! the expected nonce, each following line up to an empty one is a `name: value` header,
//! and what follows the empty line is the body:
//!
//! ```text
//! Ns3cr3t
//! Callback-Nonce: s3cr3t
//!
//! {"status":"success", ...}
//! ```
//!
//! Any other input is a body checked without a nonce.

/// The arguments decoded from one input.
pub struct Case<'a> {
    pub body: &'a [u8],
    pub nonce: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl Case<'_> {
    /// The headers as the parser takes them.
    pub fn header_refs(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

/// The first line of `data` (without its `\n`) and what follows it.
fn line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

pub fn decode(data: &[u8]) -> Case<'_> {
    let Some(rest) = data.strip_prefix(b"N") else {
        return Case {
            body: data,
            nonce: None,
            headers: Vec::new(),
        };
    };
    let (nonce, mut rest) = line(rest);
    let mut headers = Vec::new();
    loop {
        let (h, r) = line(rest);
        rest = r;
        if h.is_empty() {
            break;
        }
        let text = String::from_utf8_lossy(h);
        let (name, value) = text.split_once(':').unwrap_or((&text, ""));
        headers.push((
            name.to_string(),
            value.strip_prefix(' ').unwrap_or(value).to_string(),
        ));
    }
    Case {
        body: rest,
        nonce: Some(String::from_utf8_lossy(nonce).into_owned()),
        headers,
    }
}

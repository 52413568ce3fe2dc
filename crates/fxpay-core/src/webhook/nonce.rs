//! Step 2 of the webhook checks: the `callback-nonce` header, compared in constant time.
use crate::error::{Error, Result};
use subtle::{Choice, ConstantTimeEq};

/// The header that carries the nonce back (spec 6.1).
pub const NONCE_HEADER: &str = "callback-nonce";

/// Checks that exactly one `callback-nonce` header is present and equals `expected`.
pub fn verify_nonce<'a>(
    expected: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<()> {
    if expected.is_empty() {
        return Err(Error::WebhookVerification(
            "the expected callback-nonce is empty, so no notification can be verified".into(),
        ));
    }
    let mut found: Option<&str> = None;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case(NONCE_HEADER) {
            if found.is_some() {
                return Err(Error::WebhookVerification(
                    "the callback-nonce header appears more than once".into(),
                ));
            }
            found = Some(value);
        }
    }
    let received = found
        .ok_or_else(|| Error::WebhookVerification("the callback-nonce header is missing".into()))?;
    if bool::from(ct_equal(expected.as_bytes(), received.as_bytes())) {
        Ok(())
    } else {
        Err(Error::WebhookVerification(
            "the callback-nonce does not match".into(),
        ))
    }
}

/// Constant-time equality whose running time depends only on the length of `expected`:
/// every byte of `expected` is compared, against the received byte or a stand-in that
/// cannot match, and the length comparison is folded in at the end.
pub(super) fn ct_equal(expected: &[u8], received: &[u8]) -> Choice {
    let same_len = (expected.len() as u64).ct_eq(&(received.len() as u64));
    let mut same_bytes = Choice::from(1u8);
    for (i, e) in expected.iter().enumerate() {
        let r = received.get(i).copied().unwrap_or(!*e);
        same_bytes &= e.ct_eq(&r);
    }
    same_len & same_bytes
}

//! Verification and strict parsing of the `DealCreated` notification (spec 6.1 and 6.2).
//!
//! The checks run in this order, and the first one that fails decides the error:
//!
//! 1. size: a body over [`MAX_BODY_BYTES`] is refused before anything else reads it
//!    ([`Error::WebhookPayload`]);
//! 2. nonce, only when the caller passes one: exactly one `callback-nonce` header (name in
//!    any case) whose value equals the nonce, compared in constant time
//!    ([`Error::WebhookVerification`]); the messages never contain either value;
//! 3. encoding and syntax: UTF-8 JSON ([`Error::WebhookPayload`]);
//! 4. schema (spec 6.2), every refusal naming the field ([`Error::WebhookPayload`]):
//!    a top-level object with `eventType` `"DealCreated"`, `status` `"success"` or `"fail"`
//!    and an `eventBody` object whose `processId` is a UUID; on success a UUID `dealId` and
//!    no `errors` (absent, null or `[]`); on fail no `dealId` (absent or null) and a
//!    non-empty `errors` array of objects with string `errorCode`, `fieldName` and
//!    `message`. UUIDs must be in the 36-character hyphenated form (either case). Unknown
//!    extra fields are allowed anywhere and kept in `raw`.
//!
//! Duplicate keys: refused in the objects this module interprets (the top-level object,
//! `eventBody` and each `errors` entry), whatever the key, because two `status` keys mean
//! different things to different JSON parsers. Inside values it does not interpret (unknown
//! extra fields) the last duplicate wins, as with Python's `json.loads`.
//!
//! The body is parsed once into a `serde_json::Value`, which becomes `raw` as it is; the
//! checks read from it, and the duplicate-key check is a second pass that keeps only keys and
//! runs only on bodies that passed everything else.
//!
//! Files: `mod.rs` runs the checks in their order (and checks the size), `nonce.rs`
//! verifies the nonce, `schema.rs` checks the fields, `duplicates.rs` is the duplicate-key
//! visitor, `tests.rs` holds the tests.
mod duplicates;
pub(crate) mod nonce;
mod schema;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::models::DealCreated;
use serde_json::Value;

pub(crate) use nonce::{verify_nonce, NONCE_HEADER};

/// The largest body accepted: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1_048_576;

/// Verifies and parses a `DealCreated` notification.
///
/// `headers` are the request's headers as (name, value) pairs; they are read only when
/// `nonce` is given. See the module documentation for every rule.
pub fn parse_deal_created(
    body: &[u8],
    headers: &[(&str, &str)],
    nonce: Option<&str>,
) -> Result<(DealCreated, Value)> {
    check_size(body.len())?;
    if let Some(expected) = nonce {
        verify_nonce(expected, headers.iter().map(|(k, v)| (*k, *v)))?;
    }
    parse_body_raw(body)
}

/// Refuses a body of more than [`MAX_BODY_BYTES`].
pub fn check_size(len: usize) -> Result<()> {
    if len > MAX_BODY_BYTES {
        return Err(Error::WebhookPayload(format!(
            "the body is {len} bytes, over the limit of {MAX_BODY_BYTES} bytes (1 MiB)"
        )));
    }
    Ok(())
}

/// Parses and checks the body (no size or nonce check).
pub fn parse_body(body: &[u8]) -> Result<DealCreated> {
    parse_body_raw(body).map(|(event, _)| event)
}

/// [`parse_body`], with the whole body as parsed (unknown fields included).
pub(crate) fn parse_body_raw(body: &[u8]) -> Result<(DealCreated, Value)> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Error::WebhookPayload("the body is not valid UTF-8".to_string()))?;
    let raw: Value = serde_json::from_str(text)
        .map_err(|e| Error::WebhookPayload(format!("the body is not valid JSON: {e}")))?;
    let event = schema::check(&raw)?;
    duplicates::check(text)?;
    Ok((
        DealCreated {
            status: event.status,
            process_id: event.process_id,
            deal_id: event.deal_id,
            errors: event.errors,
        },
        raw,
    ))
}

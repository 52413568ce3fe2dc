//! The four creating calls under an idempotency key: each one's fingerprint, what is kept
//! of its result, and how a replay rebuilds it.
use super::entry::Entry;
use super::keyed_call::{keyed_call, KeyedRequest};
use super::store::JournalStore;
use crate::auth::authorize::random_token;
use crate::client::{to_json, Client, IdAndText, WithRaw};
use crate::error::{Error, Result};
use crate::models::{Beneficiary, Deal, DealRequest, QuoteRequest, SpotDeal};
use crate::sha256::Sha256;
use crate::transport::Observer;
use serde_json::Value;
use std::sync::Arc;

/// SHA-256 (hex) of an operation and the parts of its request that define it.
pub(crate) fn fingerprint(operation: &str, parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    h.update(operation.as_bytes());
    for p in parts {
        h.update(&[0u8]);
        h.update(&(p.len() as u64).to_be_bytes());
        h.update(p);
    }
    data_encoding::HEXLOWER.encode(&h.finish())
}

/// The answer kept in the journal, read back (or `{field: id}` when none was kept).
fn kept_raw(e: &Entry, field: &str, id: &str) -> Value {
    e.response
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| serde_json::json!({ field: id }))
}

/// The answer kept in the journal as text (or `{field: id}` when none was kept).
fn kept_text(e: &Entry, field: &str, id: &str) -> bytes::Bytes {
    match &e.response {
        Some(t) => bytes::Bytes::from(t.clone()),
        None => bytes::Bytes::from(serde_json::json!({ field: id }).to_string()),
    }
}

/// A created object's answer as the journal keeps it: its text as it came.
fn response_text(raw: &[u8]) -> Option<String> {
    std::str::from_utf8(raw).ok().map(str::to_owned)
}

fn result_of(e: &Entry) -> Result<String> {
    e.result
        .clone()
        .ok_or_else(|| Error::journal(format!("journal key {:?} is done without a result", e.key)))
}

/// A call of `c` under `key`. Its fingerprint holds the service and the account the request
/// goes to (`base_url`, `client_id`) as well as the request: a journal shared by clients of
/// two accounts (tenants, say) or two services (the sandbox and production) must never answer
/// one's call with the other's result, sending nothing; the key is refused instead.
fn keyed_request(
    c: &Client,
    key: &str,
    operation: &'static str,
    body: &[u8],
    extra: &[u8],
) -> KeyedRequest {
    let (service, account) = (&c.config().base_url, &c.config().client_id);
    KeyedRequest {
        key: key.to_string(),
        operation,
        fingerprint: fingerprint(
            operation,
            &[body, extra, service.as_bytes(), account.as_bytes()],
        ),
        nonce: None,
        // The body is JSON that serde_json wrote: UTF-8, checked a word at a time here.
        request: Some(match std::str::from_utf8(body) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(body).into_owned(),
        }),
    }
}

/// Checks an idempotency key: non-empty text of at most 255 characters, no control
/// characters.
pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.chars().count() > 255 || key.chars().any(char::is_control) {
        return Err(Error::invalid(
            "idempotency_key must be 1 to 255 characters, none of them a control character",
        ));
    }
    Ok(())
}

pub async fn create_quote(
    c: &Client,
    store: &Arc<dyn JournalStore>,
    key: &str,
    req: &QuoteRequest,
    obs: Option<&dyn Observer>,
) -> Result<(IdAndText, bool)> {
    check_key(key)?;
    // Encoded once: the fingerprint is taken from the bytes that are sent.
    let body = to_json(req)?;
    keyed_call(
        store,
        keyed_request(c, key, "create_quote", &body, b""),
        move |_| c.create_quote_encoded(body, obs),
        |(id, raw)| (id.clone(), response_text(raw)),
        |e| {
            let id = result_of(e)?;
            Ok((id.clone(), kept_text(e, "id", &id)))
        },
    )
    .await
}

pub async fn create_beneficiary(
    c: &Client,
    store: &Arc<dyn JournalStore>,
    key: &str,
    b: &Beneficiary,
    obs: Option<&dyn Observer>,
) -> Result<(IdAndText, bool)> {
    check_key(key)?;
    b.check()?;
    let body = to_json(b)?;
    keyed_call(
        store,
        keyed_request(c, key, "create_beneficiary", &body, b""),
        move |_| c.create_beneficiary_encoded(body, obs),
        |(id, raw)| (id.clone(), response_text(raw)),
        |e| {
            let id = result_of(e)?;
            Ok((id.clone(), kept_text(e, "beneficiaryId", &id)))
        },
    )
    .await
}

pub async fn create_deal(
    c: &Client,
    store: &Arc<dyn JournalStore>,
    key: &str,
    req: DealRequest,
    obs: Option<&dyn Observer>,
) -> Result<(WithRaw<Deal>, bool)> {
    check_key(key)?;
    req.check()?;
    let for_replay = req.clone();
    let body = to_json(&req)?;
    keyed_call(
        store,
        keyed_request(c, key, "create_deal", &body, b""),
        move |_| c.create_deal_encoded(req, body, obs),
        |(deal, raw)| (deal.deal_id.clone(), Some(raw.to_string())),
        |e| {
            let id = result_of(e)?;
            let raw = kept_raw(e, "dealId", &id);
            Ok((Deal::booked(id, for_replay), raw))
        },
    )
    .await
}

pub async fn create_spot_deal(
    c: &Client,
    store: &Arc<dyn JournalStore>,
    key: &str,
    req: DealRequest,
    callback_url: Option<String>,
    callback_nonce: Option<String>,
    obs: Option<&dyn Observer>,
) -> Result<(WithRaw<SpotDeal>, bool)> {
    check_key(key)?;
    req.check()?;
    // The nonce is part of the claim (a replay returns it), so it is made before the claim;
    // it is a secret, so it is not part of the fingerprint.
    let nonce = match (&callback_url, callback_nonce) {
        (Some(_), None) => Some(random_token(32)?),
        (_, n) => n,
    };
    let url = callback_url.clone().unwrap_or_default();
    let mut k = keyed_request(c, key, "create_spot_deal", &to_json(&req)?, url.as_bytes());
    k.nonce = nonce.clone();
    let index = nonce.clone();
    let sent_url = callback_url.clone();
    let out = keyed_call(
        store,
        k,
        |claim| {
            let claim = claim.clone();
            async move {
                // Before anything is sent: a receiver given the journal verifies the deal's
                // DealCreated by this nonce (issued to this claim alone), and settles the key
                // even if the answer is lost.
                if let Some(n) = index {
                    super::store::blocking(store, move |s| {
                        super::settle::index_nonce(s, &n, &claim)
                    })
                    .await?;
                }
                c.create_spot_deal(req, sent_url, nonce, obs).await
            }
        },
        |(spot, raw)| (spot.process_id.clone(), Some(raw.to_string())),
        |e| {
            let id = result_of(e)?;
            let raw = kept_raw(e, "processId", &id);
            let spot = SpotDeal {
                process_id: id,
                callback_url: callback_url.clone(),
                callback_nonce: e.nonce.clone(),
            };
            Ok((spot, raw))
        },
    )
    .await?;
    // Its DealCreated may have reached a receiver before the process id was recorded.
    let pid = out.0 .0.process_id.clone();
    let _ = super::store::blocking(store, move |s| super::admin::adopt_early(s, &pid)).await;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_as_its_text_came_and_read_back_as_kept() {
        let text = b"{ \"id\" : \"q-1\",\n  \"rate\": 1.50 }";
        let kept = response_text(text).expect("UTF-8");
        assert_eq!(kept.as_bytes(), text);
        let mut e = super::super::machine::claim("k", "create_quote", "f", "h", None, None, 0);
        e.response = Some(kept);
        assert_eq!(&kept_text(&e, "id", "q-1")[..], text);
        // Nothing kept: the id alone, as JSON.
        e.response = None;
        assert_eq!(&kept_text(&e, "id", "q-1")[..], br#"{"id":"q-1"}"#);
        assert_eq!(response_text(b"\xff"), None);
    }

    #[test]
    fn fingerprints_tell_parts_apart() {
        let a = fingerprint("create_deal", &[b"ab", b"c"]);
        assert_eq!(a, fingerprint("create_deal", &[b"ab", b"c"]));
        assert_ne!(a, fingerprint("create_deal", &[b"a", b"bc"]));
        assert_ne!(a, fingerprint("create_quote", &[b"ab", b"c"]));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn a_fingerprint_is_the_one_earlier_releases_stored() {
        // A journal written by an earlier release must still match its keys' calls: this is
        // SHA-256 over the operation, then each part as a zero byte, its length (u64, big
        // endian) and its bytes, in lower-case hex (Python's hashlib gives the same).
        let parts: [&[u8]; 4] = [
            br#"{"amount":"1.00"}"#,
            b"",
            b"http://127.0.0.1:1",
            b"client",
        ];
        assert_eq!(
            fingerprint("create_quote", &parts),
            "f5db49d3e5230f2ba20133302095e8c3e374bf055b15a5bd5d4ec1f7994ce020"
        );
    }

    #[test]
    fn keys_are_checked() {
        assert!(check_key("invoice-1/deal").is_ok());
        assert!(check_key(&"x".repeat(255)).is_ok());
        for bad in [String::new(), "x".repeat(256), "a\nb".into(), "a\0".into()] {
            assert!(
                matches!(check_key(&bad), Err(Error::InvalidRequest(_))),
                "{bad:?}"
            );
        }
    }
}

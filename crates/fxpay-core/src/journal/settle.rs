//! A keyed spot deal settled by its `DealCreated`: the index from its callback nonce to its
//! key (written before the request is sent), the check that a notification carries a nonce
//! the journal issued, and the settlement the verified notification makes (`done` on
//! success, `released` on failure, whatever state the key is in). A lost answer of a spot
//! deal so needs no person.
use super::entry::{now_ms, Entry, State};
use super::machine;
use super::store::Store;
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};

const TRIES: usize = 16;

/// The key of the index entry that names the spot deal key a callback nonce was issued
/// for. It holds the SHA-256 of the nonce, never the nonce, and starts with a control
/// character, which no caller's key may hold.
fn nonce_key(nonce: &str) -> String {
    let digest = Sha256::digest(nonce.as_bytes());
    format!("\u{1}nonce/{}", data_encoding::HEXLOWER.encode(&digest))
}

/// Records, before a keyed spot deal is sent, that `nonce` was issued for `key`: a
/// receiver given the journal can then verify its `DealCreated` and settle the key even when
/// the deal's answer was lost. A nonce given again for another key names the newest one.
pub(crate) fn index_nonce(store: &dyn Store, nonce: &str, key: &str) -> Result<()> {
    let index = Entry {
        state: State::Done,
        result: Some(key.to_string()),
        ..machine::claim(
            &nonce_key(nonce),
            "callback_nonce",
            "",
            "",
            None,
            None,
            now_ms(),
        )
    };
    for _ in 0..TRIES {
        let Some(existing) = store.claim(&index)? else {
            return Ok(());
        };
        if existing.result.as_deref() == Some(key) {
            return Ok(());
        }
        let new = Entry {
            result: Some(key.to_string()),
            updated_at: now_ms(),
            ..existing.clone()
        };
        if store.swap(&existing, &new)? {
            return Ok(());
        }
    }
    Err(Error::journal(format!(
        "the journal's index of callback nonces kept changing while key {key:?} was indexed"
    )))
}

/// The spot deal entry whose callback nonce is `nonce`, if the journal issued it (the
/// nonces compared in constant time).
pub fn issued(store: &dyn Store, nonce: &str) -> Result<Option<Entry>> {
    if nonce.is_empty() {
        return Ok(None);
    }
    let Some(index) = store.get(&nonce_key(nonce))? else {
        return Ok(None);
    };
    let Some(key) = index.result.filter(|_| index.operation == "callback_nonce") else {
        return Ok(None);
    };
    let Some(entry) = store.get(&key)? else {
        return Ok(None);
    };
    let Some(expected) = entry.nonce.as_deref() else {
        return Ok(None);
    };
    if entry.operation != "create_spot_deal"
        || crate::webhook::verify_nonce(expected, [(crate::webhook::NONCE_HEADER, nonce)]).is_err()
    {
        return Ok(None);
    }
    Ok(Some(entry))
}

/// Settles the spot deal under `key` by its verified `DealCreated` (see
/// [`machine::by_event`]): the entry as it now stands, or None when the journal holds no
/// spot deal under `key`.
pub fn settle_spot(
    store: &dyn Store,
    key: &str,
    ok: bool,
    process_id: &str,
    deal_id: Option<&str>,
    failure: &str,
) -> Result<Option<Entry>> {
    for _ in 0..TRIES {
        let Some(cur) = store.get(key)? else {
            return Ok(None);
        };
        if cur.operation != "create_spot_deal" {
            return Ok(None);
        }
        let Some(new) = machine::by_event(&cur, ok, process_id, deal_id, failure, now_ms()) else {
            return Ok(Some(cur));
        };
        if store.swap(&cur, &new)? {
            return Ok(Some(new));
        }
    }
    Err(Error::journal(format!(
        "the journal entry of key {key:?} kept changing while its DealCreated settled it"
    )))
}

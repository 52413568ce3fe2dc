//! A keyed spot deal settled by its `DealCreated`: the index from its callback nonce to the
//! one claim it was issued to (written before the request is sent), the check that a
//! notification carries the nonce of its key's current claim, and the settlement the verified
//! notification makes, forward only (`pending`/`unknown` become `done` on success, `released`
//! on failure; a contradiction changes nothing). A lost answer of a spot deal so needs no
//! person, and a notification can never release or overwrite a booked deal.
use super::entry::{now_ms, Entry, State};
use super::machine::{self, ByEvent};
use super::store::JournalStore;
use crate::error::{Error, Result};
use crate::sha256::Sha256;

const TRIES: usize = 16;

/// The key of the index entry that names the spot deal key a callback nonce was issued
/// for. It holds the SHA-256 of the nonce, never the nonce, and starts with a control
/// character, which no caller's key may hold.
fn nonce_key(nonce: &str) -> String {
    let digest = Sha256::digest(nonce.as_bytes());
    format!("\u{1}nonce/{}", data_encoding::HEXLOWER.encode(&digest))
}

/// Records, before a keyed spot deal is sent, that `nonce` was issued to `claim` (the
/// entry that claimed its key): a receiver given the journal can then verify its
/// `DealCreated` and settle the key even when the deal's answer was lost. A nonce is issued
/// to one claim: one already issued to another key, or to an earlier claim of this key, is an
/// `InvalidRequest` (the claim is then released, and nothing is sent).
pub(crate) fn index_nonce(store: &dyn JournalStore, nonce: &str, claim: &Entry) -> Result<()> {
    let index = Entry {
        state: State::Done,
        result: Some(claim.key.clone()),
        ..machine::claim(
            &nonce_key(nonce),
            "callback_nonce",
            "",
            &claim.holder,
            None,
            None,
            claim.created_at,
        )
    };
    let Some(existing) = store.claim(&index)? else {
        return Ok(());
    };
    if same_claim(&existing, claim) {
        return Ok(());
    }
    let whose = match existing.result.as_deref() {
        Some(k) if k == claim.key => "an earlier claim of this key".to_string(),
        Some(k) => format!("key {k:?}"),
        None => "another claim".to_string(),
    };
    Err(Error::invalid(format!(
        "callback_nonce was already issued to {whose}: a nonce settles one claim only, so \
         key {:?} needs a nonce of its own (leave callback_nonce out and fxpay makes one); \
         nothing was sent",
        claim.key
    )))
}

/// Whether the nonce index entry `index` names the claim `claim` (its key, holder and the
/// time it was claimed).
fn same_claim(index: &Entry, claim: &Entry) -> bool {
    index.operation == "callback_nonce"
        && index.result.as_deref() == Some(claim.key.as_str())
        && index.holder == claim.holder
        && index.created_at == claim.created_at
}

/// The spot deal entry whose callback nonce is `nonce`, if the journal issued it (the
/// nonces compared in constant time).
pub fn issued(store: &dyn JournalStore, nonce: &str) -> Result<Option<Entry>> {
    if nonce.is_empty() {
        return Ok(None);
    }
    let Some(index) = store.get(&nonce_key(nonce))? else {
        return Ok(None);
    };
    let Some(key) = index
        .result
        .clone()
        .filter(|_| index.operation == "callback_nonce")
    else {
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
    // Indexed by an fxpay that recorded the claim (a holder): it must be the key's current one.
    if !index.holder.is_empty() && !same_claim(&index, &entry) {
        return Ok(None);
    }
    Ok(Some(entry))
}

/// What a verified `DealCreated` made of its spot deal's entry.
#[derive(Clone, Debug)]
pub struct Settled {
    /// The entry as it now stands.
    pub entry: Entry,
    /// Why the entry was left as it was, when the notification contradicts it (a `fail` for
    /// a `done` key, another deal): to be logged as an error, and answered 200 all the same.
    pub contradiction: Option<String>,
}

/// Settles the spot deal under `key` by its verified `DealCreated`, forward only (see
/// [`machine::by_event`]): what it made of the entry, or None when the journal holds no spot
/// deal under `key`.
pub fn settle_spot(
    store: &dyn JournalStore,
    key: &str,
    ok: bool,
    process_id: &str,
    deal_id: Option<&str>,
    failure: &str,
) -> Result<Option<Settled>> {
    for _ in 0..TRIES {
        let Some(cur) = store.get(key)? else {
            return Ok(None);
        };
        if cur.operation != "create_spot_deal" {
            return Ok(None);
        }
        let new = match machine::by_event(&cur, ok, process_id, deal_id, failure, now_ms()) {
            ByEvent::Settle(new) => *new,
            ByEvent::Same => {
                return Ok(Some(Settled {
                    entry: cur,
                    contradiction: None,
                }))
            }
            ByEvent::Contradiction(why) => {
                return Ok(Some(Settled {
                    entry: cur,
                    contradiction: Some(why),
                }))
            }
        };
        if store.swap(&cur, &new)? {
            return Ok(Some(Settled {
                entry: new,
                contradiction: None,
            }));
        }
    }
    Err(Error::journal(format!(
        "the journal entry of key {key:?} kept changing while its DealCreated settled it"
    )))
}

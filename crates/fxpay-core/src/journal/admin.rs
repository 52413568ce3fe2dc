//! What a journal's owner does by hand: settle an unknown key, list the unknown ones, and
//! complete a spot deal's entry when its `DealCreated` arrives.
use super::entry::{now_ms, Entry, State};
use super::machine;
use super::store::JournalStore;
use crate::error::{Error, Result};

const TRIES: usize = 16;

/// Settles `key`: `Some(id)` created as that id (later calls return it), `None` not created
/// (the key is released). Only an unknown key, or a pending one whose holder is gone.
pub fn resolve(store: &dyn JournalStore, key: &str, result: Option<String>) -> Result<Entry> {
    for _ in 0..TRIES {
        let Some(cur) = store.get(key)? else {
            return Err(Error::invalid(format!("the journal holds no key {key:?}")));
        };
        let new = machine::resolved(&cur, result.clone(), now_ms(), store.holders())?;
        if store.swap(&cur, &new)? {
            return Ok(new);
        }
    }
    Err(Error::journal(format!(
        "the journal entry of key {key:?} kept changing while it was resolved"
    )))
}

/// Of `candidates` (a store's pending and unknown entries), the unknown ones: a pending
/// entry whose holder is gone is marked unknown here.
pub fn unknown(store: &dyn JournalStore, candidates: Vec<Entry>) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for e in candidates {
        let now = now_ms();
        match e.state {
            State::Unknown => out.push(e),
            State::Pending if e.lease_until <= now || store.holders().is_dead(&e.holder) => {
                let gone = machine::failed(
                    &e,
                    machine::Settle::Unknown,
                    "its holder stopped (or lost its lease) while its request may have been sent"
                        .into(),
                    now,
                );
                if store.swap(&e, &gone)? {
                    out.push(gone);
                } else if let Some(now_stored) = store.get(&e.key)? {
                    if now_stored.state == State::Unknown {
                        out.push(now_stored);
                    }
                }
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.key.cmp(&b.key)));
    Ok(out)
}

/// The key of the note a `DealCreated` leaves when it arrives before its spot deal's entry
/// records the process id (the notification can overtake the answer). It starts with a
/// control character, which no caller's key may hold, so it never meets one.
fn early_key(process_id: &str) -> String {
    format!("\u{1}deal-created/{process_id}")
}

/// Records `deal_id` on the spot deal whose process id is `process_id`; the entry, or None
/// when the journal holds no such spot deal yet (a note is left for `adopt_early`, which the
/// spot deal's call runs once it has recorded its process id).
pub fn complete_spot(
    store: &dyn JournalStore,
    process_id: &str,
    deal_id: &str,
) -> Result<Option<Entry>> {
    if let Some(e) = record_deal_id(store, process_id, deal_id)? {
        return Ok(Some(e));
    }
    let now = now_ms();
    let note = Entry {
        state: State::Done,
        deal_id: Some(deal_id.to_string()),
        ..machine::claim(
            &early_key(process_id),
            "deal_created",
            "",
            "",
            None,
            None,
            now,
        )
    };
    let _ = store.claim(&note)?;
    // The spot deal may have recorded its process id meanwhile, before the note was there.
    record_deal_id(store, process_id, deal_id)
}

/// Takes a `DealCreated` that arrived before the spot deal `process_id` was recorded.
pub(crate) fn adopt_early(store: &dyn JournalStore, process_id: &str) -> Result<Option<Entry>> {
    match store.get(&early_key(process_id))? {
        Some(note) => match note.deal_id {
            Some(deal_id) => record_deal_id(store, process_id, &deal_id),
            None => Ok(None),
        },
        None => Ok(None),
    }
}

fn record_deal_id(
    store: &dyn JournalStore,
    process_id: &str,
    deal_id: &str,
) -> Result<Option<Entry>> {
    for _ in 0..TRIES {
        let Some(cur) = store.find(process_id)? else {
            return Ok(None);
        };
        if cur.operation != "create_spot_deal" {
            return Ok(None);
        }
        // Recorded already, or another deal's: a notification never overwrites a deal id.
        if cur.deal_id.is_some() {
            return Ok(Some(cur));
        }
        let new = machine::with_deal_id(&cur, deal_id, now_ms());
        if store.swap(&cur, &new)? {
            return Ok(Some(new));
        }
    }
    Err(Error::journal(format!(
        "the journal entry of spot deal {process_id:?} kept changing"
    )))
}

#[cfg(test)]
mod tests {
    use super::super::machine;
    use super::super::store::memory::MemoryJournalStore;
    use super::super::store::JournalStore;
    use super::{adopt_early, complete_spot};

    #[test]
    fn a_deal_created_that_overtakes_its_spot_deal_is_kept_until_the_entry_is_there() {
        let store = MemoryJournalStore::default();
        // The notification first: no entry holds its process id yet, so a note is left.
        assert!(complete_spot(&store, "pid-1", "deal-1")
            .expect("complete")
            .is_none());
        // Then the spot deal's entry records the process id, and adopts the note.
        let pending = machine::claim("s", "create_spot_deal", "fp", "h/1/t", None, None, 1);
        assert!(store.claim(&pending).expect("claim").is_none());
        let done = machine::done(&pending, "pid-1".into(), None, 2);
        assert!(store.swap(&pending, &done).expect("swap"));
        let adopted = adopt_early(&store, "pid-1")
            .expect("adopt")
            .expect("the note is found");
        assert_eq!(adopted.deal_id.as_deref(), Some("deal-1"));
        assert_eq!(
            store.get("s").expect("get").and_then(|e| e.deal_id),
            Some("deal-1".to_string())
        );
        // In the usual order (the entry first) the deal id is recorded at once.
        assert_eq!(
            complete_spot(&store, "pid-1", "deal-1")
                .expect("complete")
                .and_then(|e| e.deal_id),
            Some("deal-1".to_string())
        );
        assert!(adopt_early(&store, "pid-unknown").expect("adopt").is_none());
    }
}

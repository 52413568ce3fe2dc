//! A creating call under an idempotency key: claim (durably) before anything is sent, send,
//! record. A repeat replays, refuses or reports an unknown outcome, as `machine.rs` decides.
use super::entry::{now_ms, Entry, State};
use super::group_commit;
use super::machine::{self, Found, Settle};
use super::store::{blocking, JournalStore};
use super::undo::guarded;
use crate::error::{Error, Result};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A creating request as the journal sees it.
pub(crate) struct KeyedRequest {
    pub key: String,
    pub operation: &'static str,
    pub fingerprint: String,
    /// A spot deal's callback nonce (kept so a replay returns it).
    pub nonce: Option<String>,
    /// The request's wire body (JSON text).
    pub request: Option<String>,
}

/// How many times a claim is tried when other callers keep changing the entry under it.
const TRIES: usize = 16;

/// The result of `call` under `keyed.key`, and whether it was replayed from the journal.
///
/// `call` is given the claim it runs under. `record` gives what to keep of a result (its id and the answer's JSON text); `replay`
/// rebuilds a result from a done entry.
pub(crate) async fn keyed_call<T, F, Fut>(
    store: &Arc<dyn JournalStore>,
    keyed: KeyedRequest,
    call: F,
    record: impl FnOnce(&T) -> (String, Option<String>),
    replay: impl FnOnce(&Entry) -> Result<T>,
) -> Result<(T, bool)>
where
    F: FnOnce(&Entry) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    // Counted while it runs: a process ending normally waits for it to settle its key.
    let _work = super::background::busy();
    let hold = match begin(store, &keyed).await? {
        Begun::Replay(e) => return Ok((replay(&e)?, true)),
        Begun::Held(h) => h,
    };
    let result = {
        let renewing = hold.renewing();
        tokio::pin!(renewing);
        let call = call(&hold.claimed);
        tokio::pin!(call);
        tokio::select! {
            r = &mut call => r,
            never = &mut renewing => match never {},
        }
    };
    let now = now_ms();
    match result {
        Ok(v) => {
            let (id, response) = record(&v);
            // The result is returned even if it cannot be recorded yet: the object exists,
            // and its entry is recorded again in the background until the journal answers.
            let _ = hold
                .settle(move |cur| machine::done(cur, id.clone(), response.clone(), now))
                .await;
            Ok((v, false))
        }
        Err(e) => {
            let how = machine::settle(&e);
            let text = e.to_string();
            let unknown = how == Settle::Unknown;
            let failure = text.clone();
            let saved = hold
                .settle(move |cur| machine::failed(cur, how, failure.clone(), now))
                .await;
            match (unknown, saved) {
                (true, Some(entry)) => {
                    Err(machine::refusal(&Found::Unknown, &entry, keyed.operation).with_cause(e))
                }
                (true, None) => {
                    // Settled meanwhile by what knows the outcome (a spot deal's DealCreated
                    // can overtake the lost answer): this call's own answer is still lost.
                    let key = keyed.key.clone();
                    match blocking(store, move |s| s.get(&key)).await {
                        Ok(Some(entry)) if entry.state != State::Pending => {
                            Err(machine::lost_but_settled(&entry, keyed.operation, &text)
                                .with_cause(e))
                        }
                        _ => Err(e),
                    }
                }
                _ => Err(e),
            }
        }
    }
}

enum Begun {
    Replay(Box<Entry>),
    Held(Hold),
}

/// Claims `keyed.key`, or says what the entry already there means.
async fn begin(store: &Arc<dyn JournalStore>, keyed: &KeyedRequest) -> Result<Begun> {
    let me = super::holder::me();
    // Read once: whether a leader waits for this call's claims (not a payout's row).
    let gathered = group_commit::gathered();
    for _ in 0..TRIES {
        let now = now_ms();
        // Shared, not copied: the store call, its undo and the hold read the same claim.
        let mine = Arc::new(machine::claim(
            &keyed.key,
            keyed.operation,
            &keyed.fingerprint,
            me,
            keyed.nonce.clone(),
            keyed.request.clone(),
            now,
        ));
        let m = mine.clone();
        let queued = store.claim_queued(&mine, gathered);
        // A claim made on a thread of the blocking pool is counted in flight as this task's.
        let claim = move |s: &dyn JournalStore| group_commit::prompt_here(gathered, || s.claim(&m));
        let Some(existing) = guarded(store, &mine, claim, queued, Option::is_none).await? else {
            return Ok(Begun::Held(Hold::new(store.clone(), mine)));
        };
        let found = machine::decide(
            &existing,
            keyed.operation,
            &keyed.fingerprint,
            now,
            store.holders(),
        );
        match found {
            Found::Replay => return Ok(Begun::Replay(Box::new(existing))),
            Found::Free => {
                let (old, new) = (existing, mine.clone());
                if guarded(store, &mine, move |s| s.swap(&old, &new), None, |won| *won).await? {
                    return Ok(Begun::Held(Hold::new(store.clone(), mine)));
                }
            }
            Found::Lapsed => {
                let gone = machine::failed(
                    &existing,
                    Settle::Unknown,
                    "its holder stopped (or lost its lease) while its request may have been sent"
                        .into(),
                    now,
                );
                let (old, new) = (existing, gone.clone());
                if blocking(store, move |s| s.swap(&old, &new)).await? {
                    return Err(machine::refusal(&Found::Unknown, &gone, keyed.operation));
                }
            }
            Found::Reused | Found::InProgress | Found::Unknown => {
                return Err(machine::refusal(&found, &existing, keyed.operation))
            }
        }
    }
    Err(Error::journal(format!(
        "the journal entry of key {:?} kept changing while it was claimed",
        keyed.key
    )))
}

/// A claim this call holds. Dropped before it is settled (the call was cancelled, or its
/// process interrupted), it marks the key unknown: the request may have been sent.
struct Hold {
    store: Arc<dyn JournalStore>,
    /// The entry as claimed.
    claimed: Arc<Entry>,
    /// The entry as this holder last stored it (renewed), until the call settles it.
    current: Arc<Mutex<Option<Arc<Entry>>>>,
}

impl Hold {
    fn new(store: Arc<dyn JournalStore>, entry: Arc<Entry>) -> Self {
        Hold {
            store,
            claimed: entry.clone(),
            current: Arc::new(Mutex::new(Some(entry))),
        }
    }

    fn current(&self) -> Option<Arc<Entry>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Renews the lease while the call runs; never ends.
    async fn renewing(&self) -> std::convert::Infallible {
        loop {
            tokio::time::sleep(Duration::from_millis(machine::RENEW_EVERY_MS)).await;
            let Some(cur) = self.current() else {
                continue;
            };
            let new = Arc::new(machine::renewed(&cur, now_ms()));
            let (old, next) = (cur, new.clone());
            if let Ok(true) = blocking(&self.store, move |s| s.swap(&old, &next)).await {
                let mut slot = self.current.lock().unwrap_or_else(PoisonError::into_inner);
                if slot.is_some() {
                    *slot = Some(new);
                }
            }
        }
    }

    /// Records the call's end (`to` applied to the entry as stored); the saved entry, or
    /// None when it could not be saved now. A journal that fails is tried again in the
    /// background ([`record_later`]) until it answers, so a booked result is never left
    /// `pending` for a lease to turn `unknown`.
    async fn settle(self, to: impl Fn(&Entry) -> Entry + Send + Sync + 'static) -> Option<Entry> {
        let taken = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let cur = taken?;
        let new = to(&cur);
        if self.store.swap_at_once(&cur, &new) {
            // Kept for the store's next commit, in memory: no blocking-pool hand-off.
            return Some(new);
        }
        let (store, seen) = (self.store.clone(), cur.clone());
        let to = Arc::new(to);
        let first = to.clone();
        match blocking(&self.store, move |s| record(s, &cur, &*first)).await {
            Ok(saved) => saved,
            Err(_) => {
                record_later(store, seen, to);
                None
            }
        }
    }
}

/// Records `to` over `cur` (the entry this holder last stored); the saved entry, or None
/// when the key is now another's (or settled by what knows the outcome). An error: the
/// journal failed, and nothing is known of the write.
fn record(
    s: &dyn JournalStore,
    first: &Entry,
    to: &dyn Fn(&Entry) -> Entry,
) -> Result<Option<Entry>> {
    let mut read: Option<Entry> = None; // what the store held instead of `first`, if read
    for _ in 0..TRIES {
        let cur = read.as_ref().unwrap_or(first);
        let new = to(cur);
        if s.swap(cur, &new)? {
            return Ok(Some(new));
        }
        // A renewal still in flight, or another caller that found the lease lapsed and
        // marked the key unknown: this holder knows the outcome, so it records it over
        // either (but never over another holder's claim). A swap that failed before may
        // have landed after all: then the key holds `new` already.
        match s.get(&cur.key)? {
            Some(stored) if stored == new => return Ok(Some(new)),
            Some(stored)
                if stored.holder == cur.holder
                    && stored.created_at == cur.created_at
                    && matches!(stored.state, State::Pending | State::Unknown) =>
            {
                read = Some(stored)
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Records `to` over `cur` on a thread of its own, trying again while the journal fails.
fn record_later(
    store: Arc<dyn JournalStore>,
    cur: Arc<Entry>,
    to: Arc<dyn Fn(&Entry) -> Entry + Send + Sync + 'static>,
) {
    super::background::spawn("fxpay-journal-record", move || {
        super::background::retry(|| record(&*store, &cur, &*to).map(|_| ()));
    });
}

impl Drop for Hold {
    fn drop(&mut self) {
        let taken = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(cur) = taken else {
            return;
        };
        let store = self.store.clone();
        let gone = machine::failed(
            &cur,
            Settle::Unknown,
            "the call was cancelled or interrupted after its request may have been sent".into(),
            now_ms(),
        );
        // Off this thread: a store call blocks, and this may run on a runtime worker. Tried
        // again while the journal fails; counted, so that a normal exit waits for it.
        super::background::spawn("fxpay-journal", move || {
            super::background::retry(|| store.swap(&cur, &gone).map(|_| ()));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::entry::State;
    use super::super::machine::{LEASE_MS, RENEW_EVERY_MS};
    use super::super::store::memory::MemoryJournalStore;
    use super::super::store::JournalStore;
    use super::{keyed_call, KeyedRequest};
    use crate::error::Error;
    use std::sync::Arc;

    /// A call that outlasts its lease keeps it: while it runs, its holder renews the entry's
    /// lease (every `RENEW_EVERY_MS`), so the key never lapses into "unknown" under a live call.
    /// The runtime's clock is paused: the call's 25 s pass at once, and the renewals run in the
    /// order of their timers.
    #[tokio::test(start_paused = true)]
    async fn a_call_longer_than_its_lease_keeps_renewing_it() {
        let store: Arc<dyn JournalStore> = Arc::new(MemoryJournalStore::default());
        let keyed = KeyedRequest {
            key: "long".into(),
            operation: "create_beneficiary",
            fingerprint: "f".into(),
            nonce: None,
            request: None,
        };
        let seen = store.clone();
        let call = |_: &_| async move {
            let claimed = seen.get("long")?.expect("claimed before the call runs");
            let mut leases = vec![claimed.lease_until];
            // Past the first lease (30 s) in steps of 1 s of the paused clock.
            for _ in 0..(LEASE_MS / 1000 - 5) {
                // A lease is wall-clock time: let the wall clock move on between renewals (which
                // are 10 s apart on the paused clock, but not on the wall's).
                std::thread::sleep(std::time::Duration::from_millis(2));
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let e = seen.get("long")?.expect("still there");
                assert_eq!(e.state, State::Pending);
                if leases.last() != Some(&e.lease_until) {
                    leases.push(e.lease_until);
                }
            }
            Ok::<_, Error>(leases)
        };
        let (leases, replayed) = keyed_call(
            &store,
            keyed,
            call,
            |_| ("b1".into(), None),
            |_| Ok(Vec::new()),
        )
        .await
        .expect("the call ends");
        assert!(!replayed);
        // 25 s of call: renewed at 10 s and 20 s, each lease later than the one before.
        assert_eq!(
            leases.len(),
            1 + (25_000 / RENEW_EVERY_MS) as usize,
            "{leases:?}"
        );
        assert!(leases.windows(2).all(|w| w[1] > w[0]), "{leases:?}");
        let done = store.get("long").expect("get").expect("entry");
        assert_eq!(
            (done.state, done.result.as_deref()),
            (State::Done, Some("b1"))
        );
    }
}

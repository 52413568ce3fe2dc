//! A claim the call gave up on is undone. A call's deadline can pass (or the call be
//! cancelled) while its claim is still on its way to a slow journal (a Redis stopped, a disk
//! stalled): the call fails with nothing sent, and the claim may still land afterwards. Left
//! there, it would read `InProgressError` for a lease, then `OutcomeUnknownError`, for a
//! request that never went out, and a person would have to settle it. So a claim whose
//! answer nobody took, or whose store call failed (its outcome unknown: it may land later),
//! is undone as soon as the journal answers again: the key ends absent or `released`.
//!
//! The undo uses only the store's `claim` and `swap`: it stores the claim's `released` form
//! where nothing is stored (so a claim still on its way finds the key taken and lands
//! nothing), or swaps the claim, if it landed, for its `released` form. Anything else under
//! the key is another caller's and is left alone.
use super::entry::{now_ms, Entry};
use super::machine::{self, Settle};
use super::store::{blocking, JournalStore};
use crate::error::Result;
use futures_util::future::BoxFuture;
use std::sync::{Arc, Mutex, PoisonError};

const TRIES: usize = 16;

/// Where a guarded claim stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The store call runs; its caller waits.
    Waiting,
    /// The store call stored the claim, or failed (the claim may still land); its caller
    /// has not taken the answer yet.
    Landed,
    /// The caller took the answer: the claim, if stored, is its own to settle.
    Taken,
    /// The caller gave up before the answer came: whatever the store call does is undone.
    Abandoned,
}

/// Marks the claim abandoned when the waiting future is dropped before it took the answer.
struct Waiter {
    stage: Arc<Mutex<Stage>>,
    store: Arc<dyn JournalStore>,
    mine: Arc<Entry>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        match *stage {
            Stage::Waiting => *stage = Stage::Abandoned,
            Stage::Landed => {
                *stage = Stage::Abandoned;
                drop(stage);
                spawn_undo(self.store.clone(), self.mine.clone());
            }
            Stage::Taken | Stage::Abandoned => {}
        }
    }
}

/// Runs `op` (a claim or a swap that stores `mine`) off the runtime's workers, or `queued`
/// (the store's claim waiting for its commit with no thread: `op` is then not run) as a task
/// of its own, within the current call's deadline. `stored` tells from the answer whether
/// it stored `mine`.
///
/// A deadline that passes first gives the deadline's error (nothing was sent). If the call
/// gave up (deadline or cancel) before taking the answer, or the store call failed, `mine`
/// is undone once the journal answers. The store call runs on when its caller gave up, so
/// that what it did is known and undone.
pub(crate) async fn guarded<T, F>(
    store: &Arc<dyn JournalStore>,
    mine: &Arc<Entry>,
    op: F,
    queued: Option<BoxFuture<'static, Result<T>>>,
    stored: fn(&T) -> bool,
) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&dyn JournalStore) -> Result<T> + Send + 'static,
{
    let stage = Arc::new(Mutex::new(Stage::Waiting));
    let waiter = Waiter {
        stage: stage.clone(),
        store: store.clone(),
        mine: mine.clone(),
    };
    let (undo_store, undo_mine) = (store.clone(), mine.clone());
    // Counted until the store call has answered (and any undo it needs has started): a call
    // that gave up leaves it running, and a normal exit waits for it.
    let work = super::background::busy();
    let answered = move |out: Result<T>| {
        let _work = work;
        let mut st = stage.lock().unwrap_or_else(PoisonError::into_inner);
        match (&out, *st) {
            (Ok(v), Stage::Abandoned) if stored(v) => {
                drop(st);
                spawn_undo(undo_store, undo_mine);
            }
            (Err(_), Stage::Abandoned) => {
                drop(st);
                spawn_undo(undo_store, undo_mine);
            }
            // Stored, or failed (it may land later): to be undone unless its caller takes it.
            (Ok(v), Stage::Waiting) if stored(v) => *st = Stage::Landed,
            (Err(_), Stage::Waiting) => *st = Stage::Landed,
            _ => {}
        }
        out
    };
    let run = async move {
        match queued {
            Some(claim) => match tokio::spawn(async move { answered(claim.await) }).await {
                Ok(out) => out,
                Err(e) => Err(crate::error::Error::journal(format!(
                    "the journal call failed: {e}"
                ))),
            },
            None => blocking(store, move |s| answered(op(s))).await,
        }
    };
    let out =
        match crate::deadline::ends_at() {
            Some(end) => match tokio::time::timeout_at(end.into(), run).await {
                Ok(out) => out,
                // `waiter` is dropped on return: the claim is abandoned, and undone if it lands.
                Err(_) => return Err(crate::deadline::passed_while(
                    "while its idempotency key was being claimed in the journal; nothing was sent",
                    true,
                )),
            },
            None => run.await,
        };
    *waiter.stage.lock().unwrap_or_else(PoisonError::into_inner) = Stage::Taken;
    if out.is_err() {
        // The store call failed: a timeout or a lost connection may still land the claim.
        spawn_undo(waiter.store.clone(), waiter.mine.clone());
    }
    out
}

/// Undoes `mine` on a thread of its own, trying again (backing off) while the journal fails.
fn spawn_undo(store: Arc<dyn JournalStore>, mine: Arc<Entry>) {
    super::background::spawn("fxpay-journal-undo", move || {
        super::background::retry(|| undo(&*store, &mine));
    });
}

/// Leaves `mine`'s key absent or released, unless another caller's entry is there.
pub(crate) fn undo(store: &dyn JournalStore, mine: &Entry) -> Result<()> {
    let released = machine::failed(
        mine,
        Settle::Released,
        "the call gave up before its request was sent (its deadline passed, or it was \
         cancelled, while the journal was slow)"
            .into(),
        now_ms(),
    );
    for _ in 0..TRIES {
        match store.claim(&released)? {
            None => return Ok(()),
            Some(existing) if existing == *mine => {
                if store.swap(mine, &released)? {
                    return Ok(());
                }
            }
            Some(_) => return Ok(()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::entry::State;
    use crate::journal::store::memory::MemoryJournalStore;
    use std::time::Duration;

    /// A queued claim (no thread waits for it) whose caller gave up before it landed is
    /// undone once it lands: the call's task is not what carries the claim to its end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_queued_claim_that_lands_after_its_caller_gave_up_is_undone() {
        let store: Arc<dyn JournalStore> = Arc::new(MemoryJournalStore::default());
        let mine = Arc::new(machine::claim(
            "late",
            "create_quote",
            "f",
            "me",
            None,
            None,
            now_ms(),
        ));
        let (land, landed) = tokio::sync::oneshot::channel::<()>();
        let (s, m) = (store.clone(), mine.clone());
        let queued: BoxFuture<'static, Result<Option<Entry>>> = Box::pin(async move {
            let _ = landed.await;
            s.claim(&m)
        });
        let call = guarded(
            &store,
            &mine,
            |_| panic!("a queued claim does not run `op`"),
            Some(queued),
            Option::is_none,
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(20), call)
                .await
                .is_err(),
            "the caller gives up first"
        );
        assert_eq!(store.get("late").expect("get"), None, "not landed yet");
        land.send(()).expect("the claim is still on its way");
        let mut state = None;
        for _ in 0..500 {
            state = store.get("late").expect("get").map(|e| e.state);
            if state == Some(State::Released) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            state,
            Some(State::Released),
            "landed after its caller gave up: undone"
        );
    }
}

//! What fxpay's durable stores (SQLite, Redis) share around their own commit: a keyed call's
//! result kept for the next commit (`later`), the claims of concurrent calls in one commit
//! (`group_commit`), and a result that found its key changed written over it or reported.
//! Each store says how it reads a key and runs a write; the rest is here, once.
use super::entry::Entry;
use super::group_commit::{Group, Op, Write};
use super::later::{self, Later, Waiting};
use super::store::JournalStore;
use crate::error::{Error, Result};
use futures_util::future::BoxFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// A durable store, as its keyed calls' results need it.
pub(crate) trait Durable {
    /// This process's queue of writes.
    fn group(&self) -> &Group;
    /// This process's results waiting.
    fn later(&self) -> &Later;
    /// The stored text and entry of `key`.
    fn read(&self, key: &str) -> Result<Option<(String, Entry)>>;
    /// Runs `op` in the next group commit; its count once durable ([`write`]).
    fn write(&self, op: Op) -> Result<usize>;
    /// Runs `writes` in one commit (a transaction, a pipeline), each answered with its row
    /// count, or every one with the error that kept the commit from landing.
    fn commit(&self, writes: &[&Arc<Write>]);
    /// Has the flusher write the results waiting (and, once per process, the exit).
    fn wake(&self);
    /// Has the flusher try the results waiting again once [`RETRY_DELAY`] has passed (their
    /// commit failed), without holding up other journals' results ([`retry`]).
    fn retry(&self);
    /// Reports a result that could not be recorded (logged, with the id, for `resolve`).
    fn not_recorded(&self, key: &str, result: Option<&str>);
}

/// Every durable store is a journal the flusher writes.
impl<T: Durable + Send + Sync> later::Flushes for T {
    fn flush_waiting(&self) {
        flush_waiting(self);
    }
}

/// Runs `op` in the store's next group commit; its count once durable. A leader goes on
/// leading while queued claims wait (they have no thread to lead).
pub(crate) fn write(d: &impl Durable, op: Op) -> Result<usize> {
    let (n, led) = d.group().write(op, |batch| lead(d, batch));
    if let Some((results, late)) = led {
        results_landed(d, &results, &late);
        lead_queued(d);
    }
    n
}

/// Takes turns while queued claims wait and no leader runs (a thread of the blocking pool
/// a queued claim asked for, or a leader whose own turn has ended).
pub(crate) fn lead_queued(d: &impl Durable) {
    while let Some((results, late)) = d.group().lead_queued(|batch| lead(d, batch)) {
        results_landed(d, &results, &late);
    }
}

/// A keyed call's claim queued for the store's next commit, no thread waiting for it: a
/// leader is asked for on the blocking pool if none runs. It answers as `claim` does; a key
/// found taken is read on the blocking pool, by the store's `claim`. `None` (the call then
/// claims on a thread of its own, `claim`): no other call of the process is about (a lone
/// call leads its own commit, cheaper), no runtime runs this task, the store is being
/// dropped, or `ready` (the store's own check) says no. `gathered`: whether a leader waits
/// for the call once it is in flight ([`super::group_commit::gathered`]).
pub(crate) fn claim_queued<S>(
    me: &Weak<S>,
    entry: &Entry,
    gathered: bool,
    ready: impl FnOnce() -> bool,
) -> Option<BoxFuture<'static, Result<Option<Entry>>>>
where
    S: Durable + JournalStore + Send + Sync + 'static,
{
    let me = me.upgrade()?;
    if !me.group().busy() || !ready() {
        return None;
    }
    let rt = tokio::runtime::Handle::try_current().ok()?;
    let (w, ask) = me.group().queue(
        Op::Claim {
            key: entry.key.clone(),
            state: entry.state.as_str(),
            result: entry.result.clone(),
            text: entry.to_json(),
        },
        entry,
        gathered,
    );
    if ask {
        let d = me.clone();
        drop(rt.spawn_blocking(move || lead_queued(&*d)));
    }
    let entry = entry.clone();
    Some(Box::pin(async move {
        if w.landed().await? == 1 {
            return Ok(None); // in flight since it landed (the leader said so)
        }
        match rt.spawn_blocking(move || me.claim(&entry)).await {
            Ok(r) => r,
            Err(e) => Err(Error::journal(format!("the journal call failed: {e}"))),
        }
    }))
}

/// A leader's turn: `batch` and the results waiting, in one commit (the store's `commit`,
/// given every write but the `Nothing`s, answers each).
pub(crate) fn lead(d: &impl Durable, batch: &[Arc<Write>]) -> (Vec<Waiting>, Vec<Arc<Write>>) {
    let results = d.later().taken();
    let late = late_writes(&results);
    let all: Vec<&Arc<Write>> = late
        .iter()
        .chain(batch.iter())
        .filter(|w| !matches!(w.op, Op::Nothing))
        .collect();
    if !all.is_empty() {
        d.commit(&all);
    }
    for w in batch {
        w.answer(Ok(0)); // a `Nothing` (the others are answered)
    }
    (results, late)
}

/// `get`, with `after_read` run once the store was read (a test lands a result there).
/// This process's result of the key is looked up before the read: one that lands in between
/// is in what was read. Looked up only after the read, it would be in neither, and the key
/// would read its claim, `pending`, though its result is stored (the fork stress found this
/// order in `RedisJournal.get()`).
pub(crate) fn get_then(
    d: &impl Durable,
    key: &str,
    after_read: impl FnOnce(),
) -> Result<Option<Entry>> {
    let later = d.later();
    let mine = later.get(key);
    let stored = d.read(key)?.map(|(_, e)| e);
    after_read();
    Ok(later.news_given(stored, mine))
}

/// Has the flusher write the results of the store `me` in `delay`. The first time in this
/// process (`hooked`), the store is held for the exit's flush (`hold`) and its owner is told
/// (`result_waits`).
pub(crate) fn wake<S: Durable + Send + Sync + 'static>(
    me: &Weak<S>,
    hooked: &AtomicBool,
    hold: impl FnOnce(Arc<S>),
    result_waits: &dyn Fn(),
    delay: Duration,
) {
    if !hooked.swap(true, Ordering::AcqRel) {
        if let Some(store) = me.upgrade() {
            hold(store);
        }
        result_waits();
    }
    let me: Weak<dyn later::Flushes> = me.clone();
    later::wake(me, delay);
}

/// The swap that writes `w` over the entry stored as `old`.
fn swap_op(w: &Waiting, old: String) -> Op {
    Op::Swap {
        key: w.key.clone(),
        state: w.new.state.as_str(),
        result: w.new.result.clone(),
        text: w.text.clone(),
        old,
    }
}

/// The writes of the results waiting that a leader's commit carries.
pub(crate) fn late_writes(results: &[Waiting]) -> Vec<Arc<Write>> {
    results
        .iter()
        .map(|w| Write::new(swap_op(w, w.old.clone())))
        .collect()
}

/// After a commit that carried results: those written leave `Later`. One whose entry
/// changed meanwhile (its lease lapsed and another process marked the key `unknown`) is
/// written over that entry if it is still this call's claim; else reported, with the id,
/// for `resolve`. A commit that failed keeps them waiting.
pub(crate) fn results_landed(d: &impl Durable, results: &[Waiting], late: &[Arc<Write>]) {
    if late.is_empty() {
        return;
    }
    let counts: Vec<Result<usize>> = late.iter().map(|w| w.outcome()).collect();
    if counts.iter().any(Result::is_err) {
        d.later().missed(results);
        return;
    }
    d.later().landed(results);
    for (w, n) in results.iter().zip(counts) {
        if matches!(n, Ok(1)) {
            continue;
        }
        let stored = match d.read(&w.key) {
            Ok(s) => s,
            Err(_) => {
                d.not_recorded(&w.key, w.new.result.as_deref());
                continue;
            }
        };
        let entry = stored.as_ref().map(|(_, e)| e);
        if stored.as_ref().is_some_and(|(t, _)| *t == w.text)
            || later::written_otherwise(entry, &w.new)
        {
            continue;
        }
        if later::still_its_claim(entry, &w.new) {
            if let Some((old, _)) = stored {
                if matches!(d.write(swap_op(w, old)), Ok(1)) {
                    continue;
                }
            }
        }
        d.not_recorded(&w.key, w.new.result.as_deref());
    }
}

/// A call's own result kept for the next commit (in memory): true when kept.
pub(crate) fn swap_at_once(d: &impl Durable, old: &Entry, new: &Entry) -> bool {
    if old.key != new.key || !later::may_wait(old, new) {
        return false;
    }
    if d.later().get(&old.key).is_some() {
        return false; // a result of the key waits: written first, by `swap`
    }
    let old_text = d.group().answered(old).unwrap_or_else(|| old.to_json());
    let waits = d.later().defer(Waiting {
        key: old.key.clone(),
        old: old_text,
        new: new.clone(),
        text: new.to_json(),
    });
    if waits {
        d.wake();
    }
    waits
}

/// Replaces `old` by `new` if the stored entry is still `old`: kept for the next commit
/// when it may wait, else written now (after a result of the key still waiting).
pub(crate) fn swap(d: &impl Durable, journal: &str, old: &Entry, new: &Entry) -> Result<bool> {
    if old.key != new.key {
        return Err(Error::InvalidRequest(format!(
            "{journal}.swap(): old and new must have the same key"
        )));
    }
    if swap_at_once(d, old, new) {
        return Ok(true);
    }
    let old_text = d.group().answered(old).unwrap_or_else(|| old.to_json());
    if d.later().get(&old.key).is_some() {
        // A result of the key still waits: written first.
        d.write(Op::Nothing)?;
    }
    let n = d.write(Op::Swap {
        key: old.key.clone(),
        state: new.state.as_str(),
        result: new.result.clone(),
        text: new.to_json(),
        old: old_text,
    })?;
    Ok(n == 1)
}

/// The entry whose result is `result` among the results on their way: what its key reads
/// (the store may be ahead of them).
pub(crate) fn find_waiting(
    d: &impl Durable,
    result: &str,
    get: impl Fn(&str) -> Result<Option<Entry>>,
) -> Result<Option<Entry>> {
    for e in d.later().entries() {
        if e.result.as_deref() == Some(result) {
            if let Some(got) = get(&e.key)? {
                if got.result.as_deref() == Some(result) {
                    return Ok(Some(got));
                }
            }
        }
    }
    Ok(None)
}

/// Writes the results waiting now (a payout's end, the process's exit).
pub(crate) fn flush(d: &impl Durable) -> Result<()> {
    // A commit of another thread (the flusher's) may carry results now: they are on disk
    // when this returns (one that failed leaves them waiting: written here).
    d.later().wait_flying(FLYING_WAIT);
    if !d.later().has_results() {
        return Ok(());
    }
    d.write(Op::Nothing).map(drop)
}

/// How long [`flush`] waits at most for a commit the flusher has in flight (a normal exit
/// ends its rows within 10 s).
const FLYING_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long the flusher waits before it tries again a commit of results that failed.
const RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

/// A store's [`Durable::retry`]: its next turn [`RETRY_DELAY`] from now, and none before.
pub(crate) fn retry<S: Durable + Send + Sync + 'static>(me: &Weak<S>) {
    let me: Weak<dyn later::Flushes> = me.clone();
    later::retry(me, RETRY_DELAY);
}

/// The flusher's turn: the results waiting, written. A commit that failed (another process
/// held the write lock past the timeout, a full disk, a server gone) keeps them waiting,
/// readable here, and they are tried again in a while.
pub(crate) fn flush_waiting(d: &impl Durable) {
    if !d.later().has_results() {
        return;
    }
    let _ = d.write(Op::Nothing);
    if d.later().has_results() {
        d.retry();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::group_commit::tests::claim;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Condvar, Mutex};

    /// A store whose commits answer every write with 1 (or, `refusing`, with an error), the
    /// first commit held until `open` (a leader's turn that lasts); it counts the flusher's
    /// turns it asks for.
    #[derive(Default)]
    struct Held {
        group: Group,
        later: Later,
        commits: AtomicUsize,
        gate: Mutex<(bool, bool)>, // (the first commit entered, the gate open)
        moved: Condvar,
        refusing: bool,
        wakes: AtomicUsize,
        retries: AtomicUsize,
    }

    impl Held {
        fn wait_for(&self, what: impl Fn(&(bool, bool)) -> bool) {
            let mut g = self.gate.lock().expect("gate");
            while !what(&g) {
                g = self.moved.wait(g).expect("gate");
            }
        }
        fn open(&self) {
            self.gate.lock().expect("gate").1 = true;
            self.moved.notify_all();
        }
    }

    impl Durable for Held {
        fn group(&self) -> &Group {
            &self.group
        }
        fn later(&self) -> &Later {
            &self.later
        }
        fn read(&self, _key: &str) -> Result<Option<(String, Entry)>> {
            Ok(None)
        }
        fn write(&self, op: Op) -> Result<usize> {
            write(self, op)
        }
        fn commit(&self, writes: &[&Arc<Write>]) {
            if self.commits.fetch_add(1, Ordering::AcqRel) == 0 {
                self.gate.lock().expect("gate").0 = true;
                self.moved.notify_all();
                self.wait_for(|g| g.1);
            }
            for w in writes {
                w.answer(if self.refusing {
                    Err("the server is gone".into())
                } else {
                    Ok(1)
                });
            }
        }
        fn wake(&self) {
            self.wakes.fetch_add(1, Ordering::AcqRel);
        }
        fn retry(&self) {
            self.retries.fetch_add(1, Ordering::AcqRel);
        }
        fn not_recorded(&self, _key: &str, _result: Option<&str>) {}
    }

    fn entry(key: &str) -> Entry {
        crate::journal::machine::claim(key, "create_quote", "f", "me", None, None, 0)
    }

    /// The flusher's turn of a store whose commit fails keeps the results waiting and asks
    /// for a retry (a turn of its own, later), never sleeping in the one flusher thread
    /// while other journals' results wait.
    #[test]
    fn a_failed_flush_keeps_its_results_and_asks_for_a_retry() {
        let d = Held {
            refusing: true,
            ..Held::default()
        };
        d.open();
        let c = entry("k");
        let new = crate::journal::machine::done(&c, "q-1".into(), None, 1);
        assert!(d.later().defer(Waiting {
            key: "k".into(),
            old: c.to_json(),
            text: new.to_json(),
            new,
        }));
        flush_waiting(&d);
        assert!(d.later().has_results(), "the results wait again");
        assert_eq!(d.retries.load(Ordering::Acquire), 1);
        assert_eq!(d.wakes.load(Ordering::Acquire), 0);
    }

    fn landed(w: &Write) -> Result<usize> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            match tokio::time::timeout(Duration::from_secs(10), w.landed()).await {
                Ok(n) => n,
                Err(_) => panic!("the queued claim was never committed: no leader took it"),
            }
        })
    }

    /// A claim queued while a caller's own write leads (no leader asked for: one runs) is
    /// committed by that leader once its turn has ended: a queued claim has no thread of
    /// its own to lead.
    #[test]
    fn a_claim_queued_during_a_leaders_turn_is_led_by_it_next() {
        let d = Arc::new(Held::default());
        let leader = {
            let d = d.clone();
            std::thread::spawn(move || d.write(claim("a")))
        };
        d.wait_for(|g| g.0);
        let (w, ask) = d.group().queue(claim("b"), &entry("b"), true);
        assert!(!ask, "a leader runs: none is asked for");
        d.open();
        assert_eq!(leader.join().expect("leader").expect("a"), 1);
        assert_eq!(landed(&w).expect("b"), 1);
        assert_eq!(d.commits.load(Ordering::Acquire), 2, "a's commit, then b's");
    }

    /// The first queued claim with no leader asks for one, the next ones do not; the leader
    /// asked for commits them all in one turn, each answered.
    #[test]
    fn queued_claims_ask_for_one_leader_that_commits_them_together() {
        let d = Arc::new(Held::default());
        d.open();
        let (a, ask_a) = d.group().queue(claim("a"), &entry("a"), true);
        let (b, ask_b) = d.group().queue(claim("b"), &entry("b"), true);
        assert!(ask_a && !ask_b, "one leader asked for: {ask_a} {ask_b}");
        lead_queued(&*d);
        // In flight from the moment they landed, before their tasks woke: the leader's
        // next turn counts them.
        assert!(d.group().answered(&entry("a")).is_some(), "a in flight");
        assert_eq!((landed(&a).expect("a"), landed(&b).expect("b")), (1, 1));
        assert_eq!(d.commits.load(Ordering::Acquire), 1, "one commit for both");
        let (_, ask_c) = d.group().queue(claim("c"), &entry("c"), true);
        assert!(ask_c, "the leader has left: the next claim asks again");
    }
}

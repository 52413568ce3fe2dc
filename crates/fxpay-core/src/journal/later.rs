//! One durable write per keyed call: the results of this process's keyed calls that wait for
//! their journal's next commit, and the thread that writes them.
//!
//! Only a claim must be on disk before a byte is sent. A call's result (its `pending` claim
//! made `done`) rides the journal's next commit: the next claim's (one fsync for both), the
//! flusher's `delay` later, and at the latest the process's exit (`SqliteStore::flush`, which
//! Python's exit hooks call). Until then this process reads it from here; another process
//! reads the key `pending`, its holder alive, and if this process dies first, its holder is
//! gone and the key is `unknown`: a result is never lost as `released`, never sent twice.
use crate::journal::entry::{Entry, State};
use crate::runtime::fork::PerProcess;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// A result waiting: the entry it replaces (as stored, text), the result and its text.
#[derive(Clone)]
pub(crate) struct Waiting {
    pub key: String,
    pub old: String,
    pub new: Entry,
    pub text: String,
}

/// Set at exit (after the last flush): results are written at once from then on.
static EXITING: AtomicBool = AtomicBool::new(false);

pub(crate) fn set_exiting() {
    EXITING.store(true, Ordering::Release);
}

/// Whether the swap of `old` for `new` may wait for the next commit: a call's own result
/// only (its `pending` claim made `done`). A notification's settle (its `deal_id` set) is
/// written at once: its sender is answered only once it is on disk. At exit, nothing waits.
pub(crate) fn may_wait(old: &Entry, new: &Entry) -> bool {
    new.state == State::Done
        && old.state == State::Pending
        && new.deal_id.is_none()
        && !EXITING.load(Ordering::Acquire)
}

/// Whether two entries of a key are one claim (its holder, its start, its request).
pub(crate) fn same_claim(a: &Entry, b: &Entry) -> bool {
    a.holder == b.holder && a.created_at == b.created_at && a.fingerprint == b.fingerprint
}

fn open(e: &Entry) -> bool {
    matches!(e.state, State::Pending | State::Unknown)
}

/// Whether a result that found its claim changed needs nothing more: the key is done with
/// the same result for the same claim (its spot deal's notification settled it first).
pub(crate) fn written_otherwise(stored: Option<&Entry>, new: &Entry) -> bool {
    stored.is_some_and(|s| s.state == State::Done && s.result == new.result && same_claim(s, new))
}

/// Whether `stored` is still the claim the result `new` settles (`pending`, or `unknown`
/// once its lease lapsed while the result waited): written over.
pub(crate) fn still_its_claim(stored: Option<&Entry>, new: &Entry) -> bool {
    stored.is_some_and(|s| open(s) && same_claim(s, new))
}

/// Keyed by idempotency keys, which the application chooses: foldhash (a per-process
/// random seed) rather than SipHash. SipHash here and in the group commit's calls in flight
/// cost about 2,000 instructions per keyed call (SQLite, 8 threads; bench/README.md).
#[derive(Default)]
struct Held {
    results: HashMap<String, Waiting, foldhash::fast::RandomState>,
    /// Taken by a commit, still read from here until they land.
    flying: HashMap<String, Waiting, foldhash::fast::RandomState>,
}

/// The results of one journal file waiting in this process; a forked child's also reads the
/// results its parent held when it forked (the parent writes them).
#[derive(Default)]
pub(crate) struct Later {
    held: Mutex<Held>,
    /// Notified when a commit that carried results landed or failed ([`Later::wait_flying`]).
    settled: Condvar,
    inherited: HashMap<String, Entry>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change is one insert or one move between maps.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Later {
    pub(crate) fn with_inherited(inherited: HashMap<String, Entry>) -> Self {
        Later {
            held: Mutex::default(),
            settled: Condvar::new(),
            inherited,
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<Entry> {
        let h = lock(&self.held);
        h.results
            .get(key)
            .or_else(|| h.flying.get(key))
            .map(|w| w.new.clone())
    }

    pub(crate) fn has_results(&self) -> bool {
        !lock(&self.held).results.is_empty()
    }

    /// Waits until the commits of other threads (the flusher's) that carry results now have
    /// ended, each landed or failed (its results then wait again), or `timeout` passed.
    /// Results taken later are not waited for.
    pub(crate) fn wait_flying(&self, timeout: Duration) {
        let h = lock(&self.held);
        let keys: Vec<String> = h.flying.keys().cloned().collect();
        drop(
            self.settled
                .wait_timeout_while(h, timeout, |h| {
                    keys.iter().any(|k| h.flying.contains_key(k))
                })
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    /// What the key reads, given what the store holds and `mine` (this process's result of
    /// the key, looked up before the store was read: one that lands in between is then in
    /// `stored`): while the store still holds the claim that `mine` replaces, `mine`; in a
    /// forked child, its parent's result for the parent's claim the store holds `pending`;
    /// else `None` (what the store holds stands: a notification that settled the key first
    /// is newer).
    pub(crate) fn newer_than(&self, stored: &Entry, mine: Option<Entry>) -> Option<Entry> {
        if !open(stored) {
            return None;
        }
        if let Some(mine) = mine {
            if same_claim(stored, &mine) {
                return Some(mine);
            }
        }
        match self.inherited.get(&stored.key) {
            Some(p) if stored.state == State::Pending && same_claim(stored, p) => Some(p.clone()),
            _ => None,
        }
    }

    /// What the key reads: `stored`, or the result of this process that `newer_than` finds.
    pub(crate) fn news_given(&self, stored: Option<Entry>, mine: Option<Entry>) -> Option<Entry> {
        stored.map(|s| self.newer_than(&s, mine).unwrap_or(s))
    }

    /// Keeps `w` for the next commit; false when a result of its key already waits.
    pub(crate) fn defer(&self, w: Waiting) -> bool {
        let mut h = lock(&self.held);
        if h.results.contains_key(&w.key) || h.flying.contains_key(&w.key) {
            return false;
        }
        h.results.insert(w.key.clone(), w);
        true
    }

    /// The results waiting now, for one commit to carry.
    pub(crate) fn taken(&self) -> Vec<Waiting> {
        let mut h = lock(&self.held);
        if h.results.is_empty() {
            return Vec::new();
        }
        let taken: Vec<Waiting> = std::mem::take(&mut h.results).into_values().collect();
        for w in &taken {
            h.flying.insert(w.key.clone(), w.clone());
        }
        taken
    }

    pub(crate) fn landed(&self, written: &[Waiting]) {
        let mut h = lock(&self.held);
        for w in written {
            h.flying.remove(&w.key);
        }
        self.settled.notify_all();
    }

    /// The commit that carried them failed: they wait for the next one.
    pub(crate) fn missed(&self, written: &[Waiting]) {
        let mut h = lock(&self.held);
        for w in written {
            if let Some(got) = h.flying.remove(&w.key) {
                h.results.insert(w.key.clone(), got);
            }
        }
        self.settled.notify_all();
    }

    /// Every result waiting or being written.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        let h = lock(&self.held);
        h.results
            .values()
            .chain(h.flying.values())
            .map(|w| w.new.clone())
            .collect()
    }

    /// What a child forked now inherits: its parent's results, to read.
    pub(crate) fn for_child(&self) -> HashMap<String, Entry> {
        let h = lock(&self.held);
        let mut all = self.inherited.clone();
        for w in h.flying.values().chain(h.results.values()) {
            all.insert(w.key.clone(), w.new.clone());
        }
        all
    }
}

/// What the flusher writes: a journal with results waiting.
pub(crate) trait Flushes: Send + Sync {
    fn flush_waiting(&self);
}

#[derive(Default)]
struct Due {
    waiting: Vec<(Instant, Weak<dyn Flushes>)>,
    /// Journals whose last commit of results failed: no turn of theirs before the time
    /// ([`retry`]).
    held: Vec<(Instant, Weak<dyn Flushes>)>,
    running: bool,
}

impl Due {
    /// When a turn of `journal` due `at` may run: not before a retry it is held for.
    fn turn(&self, at: Instant, journal: &Weak<dyn Flushes>) -> Instant {
        self.held
            .iter()
            .filter(|(_, h)| Weak::ptr_eq(h, journal))
            .map(|(until, _)| *until)
            .fold(at, Instant::max)
    }
}

#[derive(Default)]
struct Flusher {
    due: Mutex<Due>,
    wake: Condvar,
}

/// This process's flusher (a child makes its own: its parent's thread does not exist in it).
static FLUSHER: PerProcess<Flusher> = PerProcess::empty();

/// Has the flusher write `journal`'s results in `delay`.
pub(crate) fn wake(journal: Weak<dyn Flushes>, delay: Duration) {
    schedule(journal, delay, false);
}

/// A commit of `journal`'s results failed (a server gone, a lock held past its timeout): the
/// flusher tries them again in `delay`, and no turn of `journal` runs before then, however
/// many results wake it meanwhile. The flusher does not wait for it: every other journal's
/// results are written at their own delay.
pub(crate) fn retry(journal: Weak<dyn Flushes>, delay: Duration) {
    schedule(journal, delay, true);
}

fn schedule(journal: Weak<dyn Flushes>, delay: Duration, hold: bool) {
    let f = FLUSHER.get_or_make(Flusher::default);
    let mut due = lock(&f.due);
    let now = Instant::now();
    if hold {
        due.held.retain(|(until, h)| {
            *until > now && h.strong_count() > 0 && !Weak::ptr_eq(h, &journal)
        });
        due.held.push((now + delay, journal.clone()));
    }
    let at = now + delay;
    // A turn of `journal` already due by then carries this result too (a turn's flush writes
    // every result its journal holds, and this one was kept before this call): no second turn,
    // and no wake of the flusher, which has nothing new to wait for. A payout makes two
    // results a row; each used to wake the flusher and lengthen the list it scans.
    if !hold
        && due.running
        && due
            .waiting
            .iter()
            .any(|(when, j)| *when <= at && Weak::ptr_eq(j, &journal))
    {
        return;
    }
    due.waiting.push((at, journal));
    if !due.running {
        due.running = true;
        let spawned = std::thread::Builder::new()
            .name("fxpay-journal-results".into())
            .spawn(move || flush_loop(f));
        if spawned.is_err() {
            // No thread: the next claim's commit, or the exit's, writes them.
            due.running = false;
        }
    }
    f.wake.notify_one();
}

fn flush_loop(f: &'static Flusher) {
    loop {
        let mut due = lock(&f.due);
        while due.waiting.is_empty() {
            due = f.wake.wait(due).unwrap_or_else(PoisonError::into_inner);
        }
        let first = due.waiting.iter().map(|(at, j)| due.turn(*at, j)).min();
        let left = first.map_or(Duration::ZERO, |at| {
            at.saturating_duration_since(Instant::now())
        });
        if !left.is_zero() {
            drop(f.wake.wait_timeout(due, left));
            continue;
        }
        // The journals due now are flushed, each once: the flush carries every result it
        // holds, so its later turns go too (a result kept after this pushes a turn of its
        // own). Other journals keep their turns: a journal is written at its own delay,
        // never at another's, and one held for a retry waits without holding up the rest.
        let now = Instant::now();
        let mut ready: Vec<Weak<dyn Flushes>> = Vec::new();
        for (at, j) in &due.waiting {
            if due.turn(*at, j) <= now && !ready.iter().any(|r| Weak::ptr_eq(r, j)) {
                ready.push(j.clone());
            }
        }
        due.waiting
            .retain(|(_, j)| !ready.iter().any(|r| Weak::ptr_eq(r, j)));
        drop(due);
        for j in ready {
            if let Some(j) = j.upgrade() {
                j.flush_waiting();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::machine::{self, Settle};
    use std::sync::Arc;

    fn claim(key: &str, holder: &str, at: u64) -> Entry {
        machine::claim(key, "create_quote", "fp", holder, None, None, at)
    }

    fn waiting(c: &Entry, result: &str) -> Waiting {
        let new = machine::done(c, result.into(), None, c.created_at + 1);
        Waiting {
            key: c.key.clone(),
            old: c.to_json(),
            text: new.to_json(),
            new,
        }
    }

    #[test]
    fn only_a_calls_own_result_waits_for_the_next_commit() {
        let c = claim("k", "h/1/t", 10);
        let done = machine::done(&c, "q-1".into(), None, 11);
        assert!(may_wait(&c, &done));
        // Not a result: released, unknown.
        for how in [Settle::Released, Settle::Unknown] {
            assert!(!may_wait(&c, &machine::failed(&c, how, "e".into(), 11)));
        }
        // Not over its claim: an unknown key resolved, a done key settled again.
        let unknown = machine::failed(&c, Settle::Unknown, "lost".into(), 11);
        assert!(!may_wait(
            &unknown,
            &machine::done(&unknown, "q-1".into(), None, 12)
        ));
        assert!(!may_wait(
            &done,
            &machine::done(&done, "q-1".into(), None, 12)
        ));
        // A notification's settle (a deal id) is written at once.
        let spot = machine::with_deal_id(&done, "d-1", 12);
        assert!(!may_wait(&c, &spot));
    }

    #[test]
    fn a_claim_is_its_holder_its_start_and_its_request() {
        let c = claim("k", "h/1/t", 10);
        assert!(same_claim(&c, &machine::done(&c, "q".into(), None, 11)));
        assert!(!same_claim(&c, &claim("k", "h/2/t", 10)));
        assert!(!same_claim(&c, &claim("k", "h/1/t", 11)));
        let other = machine::claim("k", "create_quote", "fp2", "h/1/t", None, None, 10);
        assert!(!same_claim(&c, &other));
    }

    #[test]
    fn a_result_is_written_over_its_own_open_claim_only() {
        let c = claim("k", "h/1/t", 10);
        let mine = machine::done(&c, "q-1".into(), None, 11);
        assert!(still_its_claim(Some(&c), &mine));
        let lapsed = machine::failed(&c, Settle::Unknown, "lease".into(), 12);
        assert!(still_its_claim(Some(&lapsed), &mine));
        assert!(!still_its_claim(None, &mine));
        assert!(!still_its_claim(Some(&claim("k", "h/2/t", 10)), &mine));
        let released = machine::failed(&c, Settle::Released, "4xx".into(), 12);
        assert!(!still_its_claim(Some(&released), &mine));
        assert!(!still_its_claim(Some(&mine), &mine));
    }

    #[test]
    fn a_result_already_written_by_a_notification_needs_nothing_more() {
        let c = claim("k", "h/1/t", 10);
        let mine = machine::done(&c, "p-1".into(), None, 11);
        let settled = machine::with_deal_id(&mine, "d-1", 12);
        assert!(written_otherwise(Some(&settled), &mine));
        assert!(!written_otherwise(None, &mine));
        assert!(!written_otherwise(Some(&c), &mine));
        let other = machine::done(&c, "p-2".into(), None, 11);
        assert!(!written_otherwise(Some(&other), &mine));
        let theirs = machine::done(&claim("k", "h/2/t", 10), "p-1".into(), None, 11);
        assert!(!written_otherwise(Some(&theirs), &mine));
    }

    #[test]
    fn a_result_waits_is_taken_by_a_commit_and_is_read_until_it_lands() {
        let l = Later::default();
        let (a, b) = (claim("a", "h/1/t", 10), claim("b", "h/1/t", 10));
        assert!(!l.has_results());
        assert!(l.taken().is_empty());
        assert!(l.defer(waiting(&a, "q-a")));
        assert!(
            !l.defer(waiting(&a, "q-again")),
            "one result of a key waits"
        );
        assert!(l.has_results());
        assert_eq!(l.get("a").and_then(|e| e.result), Some("q-a".into()));
        assert_eq!(l.get("b"), None);
        let taken = l.taken();
        assert_eq!(taken.len(), 1);
        assert!(!l.has_results(), "taken: nothing waits for the next commit");
        // Flying: still read from here, still one per key, still a child's to read.
        assert_eq!(l.get("a").and_then(|e| e.result), Some("q-a".into()));
        assert!(!l.defer(waiting(&a, "q-again")));
        assert_eq!(l.entries().len(), 1);
        assert!(l.for_child().contains_key("a"));
        assert!(l.defer(waiting(&b, "q-b")));
        assert_eq!(l.entries().len(), 2);
        // Its commit failed: it waits again, for the next one.
        l.missed(&taken);
        assert!(l.has_results());
        let again = l.taken();
        assert_eq!(again.len(), 2);
        l.landed(&again);
        assert_eq!(l.get("a"), None);
        assert_eq!(l.get("b"), None);
        assert!(l.entries().is_empty());
        assert!(l.for_child().is_empty());
        assert!(
            l.defer(waiting(&a, "q-a2")),
            "landed: the key may wait again"
        );
    }

    #[test]
    fn what_a_key_reads_is_the_stored_entry_or_this_process_newer_result() {
        let c = claim("k", "h/1/t", 10);
        let mine = machine::done(&c, "q-1".into(), None, 11);
        let l = Later::default();
        assert_eq!(l.newer_than(&c, Some(mine.clone())), Some(mine.clone()));
        assert_eq!(
            l.news_given(Some(c.clone()), Some(mine.clone())),
            Some(mine.clone())
        );
        // The store holds something newer, or another claim: it stands.
        assert_eq!(l.newer_than(&mine, Some(mine.clone())), None);
        let theirs = claim("k", "h/2/t", 20);
        assert_eq!(l.newer_than(&theirs, Some(mine.clone())), None);
        assert_eq!(
            l.news_given(Some(theirs.clone()), Some(mine.clone())),
            Some(theirs)
        );
        assert_eq!(l.news_given(None, Some(mine.clone())), None);
        assert_eq!(l.newer_than(&c, None), None);
        // A forked child reads its parent's result over the parent's pending claim only.
        let child = Later::with_inherited(HashMap::from([("k".to_string(), mine.clone())]));
        assert_eq!(child.newer_than(&c, None), Some(mine.clone()));
        let lapsed = machine::failed(&c, Settle::Unknown, "lease".into(), 12);
        assert_eq!(child.newer_than(&lapsed, None), None);
        assert_eq!(child.newer_than(&claim("k", "h/3/t", 10), None), None);
        assert_eq!(child.for_child().get("k"), Some(&mine));
    }

    /// A journal that records when it was flushed.
    #[derive(Default)]
    struct Counted(Mutex<Vec<Instant>>);

    impl Flushes for Counted {
        fn flush_waiting(&self) {
            lock(&self.0).push(Instant::now());
        }
    }

    impl Counted {
        fn times(&self) -> Vec<Instant> {
            lock(&self.0).clone()
        }

        fn first_within(&self, limit: Duration) -> Option<Instant> {
            let start = Instant::now();
            while start.elapsed() < limit {
                if let Some(t) = self.times().first() {
                    return Some(*t);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            None
        }
    }

    fn weak(j: &Arc<Counted>) -> Weak<dyn Flushes> {
        let j: Arc<dyn Flushes> = j.clone();
        Arc::downgrade(&j)
    }

    #[test]
    fn the_flusher_writes_each_journal_at_its_own_delay_once_per_turn() {
        let (soon, late) = (Arc::new(Counted::default()), Arc::new(Counted::default()));
        let start = Instant::now();
        wake(weak(&late), Duration::from_millis(800));
        // Two turns of one journal due together: one flush carries both.
        wake(weak(&soon), Duration::from_millis(250));
        wake(weak(&soon), Duration::from_millis(250));
        let first = soon.first_within(Duration::from_secs(10)).expect("flushed");
        assert!(first >= start + Duration::from_millis(250));
        let last = late.first_within(Duration::from_secs(10)).expect("flushed");
        assert!(
            last >= start + Duration::from_millis(800),
            "at its own delay, not another's"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(soon.times().len(), 1, "two turns due together: one flush");
        assert_eq!(late.times().len(), 1);
        // A journal gone by its turn is skipped, and the flusher goes on.
        let gone = Arc::new(Counted::default());
        let gone_weak = weak(&gone);
        drop(gone);
        wake(gone_weak, Duration::ZERO);
        let after = Arc::new(Counted::default());
        wake(weak(&after), Duration::ZERO);
        assert!(after.first_within(Duration::from_secs(10)).is_some());
    }

    #[test]
    fn results_kept_while_a_turn_is_due_add_no_turn_and_a_sooner_one_or_a_later_one_does() {
        let j = Arc::new(Counted::default());
        let w = weak(&j);
        let turns = || {
            let f = FLUSHER.get_or_make(Flusher::default);
            let due = lock(&f.due);
            due.waiting
                .iter()
                .filter(|(_, x)| Weak::ptr_eq(x, &w))
                .count()
        };
        let start = Instant::now();
        for _ in 0..100 {
            wake(w.clone(), Duration::from_millis(400));
        }
        assert_eq!(turns(), 1, "one turn carries every result kept before it");
        // A result due sooner than the turn waiting gets a turn of its own, which carries all.
        wake(w.clone(), Duration::ZERO);
        let first = j.first_within(Duration::from_secs(10)).expect("flushed");
        assert!(
            first < start + Duration::from_millis(400),
            "waited for the later turn"
        );
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(
            j.times().len(),
            1,
            "the later turn went with the first flush"
        );
        assert_eq!(turns(), 0);
        // A result kept after its journal's turn was taken gets a turn of its own.
        wake(w.clone(), Duration::from_millis(20));
        let deadline = Instant::now() + Duration::from_secs(10);
        while j.times().len() < 2 {
            assert!(
                Instant::now() < deadline,
                "a result after the turn was never flushed"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A journal whose every flush fails: it asks for a retry in 30 s each time.
    #[derive(Default)]
    struct Failing {
        tries: Counted,
        me: std::sync::OnceLock<Weak<dyn Flushes>>,
    }

    impl Flushes for Failing {
        fn flush_waiting(&self) {
            self.tries.flush_waiting();
            retry(self.me.get().expect("set").clone(), Duration::from_secs(30));
        }
    }

    #[test]
    fn a_journal_held_for_a_retry_is_not_tried_before_it_nor_holds_up_another() {
        let failing = Arc::new(Failing::default());
        let me: Arc<dyn Flushes> = failing.clone();
        let me = Arc::downgrade(&me);
        failing.me.set(me.clone()).expect("once");
        wake(me.clone(), Duration::ZERO);
        assert!(failing
            .tries
            .first_within(Duration::from_secs(10))
            .is_some());
        // A result that comes meanwhile does not bring its retry forward...
        wake(me, Duration::ZERO);
        // ...and another journal's turn runs at its own delay meanwhile.
        let other = Arc::new(Counted::default());
        wake(weak(&other), Duration::ZERO);
        assert!(
            other.first_within(Duration::from_secs(10)).is_some(),
            "another journal waited for the retry"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            failing.tries.times().len(),
            1,
            "tried again before its retry"
        );
    }
}

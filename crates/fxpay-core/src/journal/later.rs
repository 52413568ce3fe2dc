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
    }

    /// The commit that carried them failed: they wait for the next one.
    pub(crate) fn missed(&self, written: &[Waiting]) {
        let mut h = lock(&self.held);
        for w in written {
            if let Some(got) = h.flying.remove(&w.key) {
                h.results.insert(w.key.clone(), got);
            }
        }
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
    running: bool,
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
    let f = FLUSHER.get_or_make(Flusher::default);
    let mut due = lock(&f.due);
    due.waiting.push((Instant::now() + delay, journal));
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
        let first = due.waiting.iter().map(|(at, _)| *at).min();
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
        // never at another's.
        let now = Instant::now();
        let mut ready: Vec<Weak<dyn Flushes>> = Vec::new();
        for (at, j) in &due.waiting {
            if *at <= now && !ready.iter().any(|r| Weak::ptr_eq(r, j)) {
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

//! Group commit: the writes of concurrent calls wait in a queue, and one of them (the leader)
//! commits them all in one transaction, so they share one fsync. A claim is still on disk
//! before its caller goes on.
//!
//! A commit delay, as PostgreSQL's `commit_delay` and `commit_siblings` (and fxpay's Redis
//! and PostgreSQL journals, `fxpay._group_commit`): a leader that knows other keyed calls of
//! this process are in flight (claimed here, their result not yet in: each is about to claim
//! again, in a loop, a pool or a payout) waits up to [`COMMIT_DELAY`] for them to join its
//! commit, and stops as soon as they have. With none in flight (a lone call) it commits at
//! once.
//!
//! A call made [`promptly`] (a payout's row) is never waited for: its next claim is not
//! about to come (a row reads its quote between its two claims, and its rows run at a
//! fixed concurrency, so every wait is that much less throughput). Measured on 20,000 rows
//! at concurrency 8 (bench/README.md), a leader waiting for a payout's rows cut its rows/s
//! by 1.5-1.8x.
//!
//! A keyed call's claim waits for its commit without a thread of its own ([`Group::queue`]):
//! it is queued, and the call's task sleeps until the commit that carries it has landed. A
//! leader then runs on a thread of the blocking pool, and takes turns while queued writes
//! wait (a write with a thread of its own leads itself). One thread hand-off per commit, not
//! three per claim.
use crate::error::{Error, Result};
use crate::journal::entry::Entry;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a leader waits at most for the keyed calls in flight to join its commit.
const COMMIT_DELAY: Duration = Duration::from_millis(3);
/// A call claimed longer ago than this is no longer counted as in flight (it is not about
/// to claim again soon, or it ended without a result).
const IN_FLIGHT_HORIZON: Duration = Duration::from_secs(1);

tokio::task_local! {
    /// Set for a task whose keyed calls no leader waits for ([`promptly`]).
    static PROMPT: ();
}

thread_local! {
    /// Set on a thread of the blocking pool while it claims for such a task ([`prompt_here`]).
    static PROMPT_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` as a task whose keyed calls no leader waits for: they are not counted in flight
/// (a payout's row).
pub(crate) async fn promptly<F: std::future::Future>(f: F) -> F::Output {
    PROMPT.scope((), f).await
}

/// Whether the keyed calls made here are counted in flight (waited for by a leader).
pub(crate) fn gathered() -> bool {
    PROMPT.try_with(|_| ()).is_err() && !PROMPT_HERE.with(std::cell::Cell::get)
}

/// Whether a claim made on this thread of the blocking pool is waited for ([`prompt_here`]).
fn gathered_here() -> bool {
    !PROMPT_HERE.with(std::cell::Cell::get)
}

/// Runs `f` (a claim on a thread of the blocking pool) as made where `gathered` was read.
pub(crate) fn prompt_here<T>(gathered: bool, f: impl FnOnce() -> T) -> T {
    if gathered {
        return f();
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PROMPT_HERE.with(|p| p.set(false));
        }
    }
    PROMPT_HERE.with(|p| p.set(true));
    let _reset = Reset;
    f()
}

/// One write statement.
pub(crate) enum Op {
    /// Inserts the entry unless its key is stored.
    Claim {
        key: String,
        state: &'static str,
        result: Option<String>,
        text: String,
    },
    /// Replaces the entry stored as `old` (text).
    Swap {
        key: String,
        state: &'static str,
        result: Option<String>,
        text: String,
        old: String,
    },
    /// No statement: the commit carries the results waiting.
    Nothing,
}

/// A write waiting for its commit, and what came of it (its row count).
pub(crate) struct Write {
    pub op: Op,
    outcome: Mutex<Option<std::result::Result<usize, String>>>,
    /// A queued claim's entry (no thread waits for such a write: a leader takes turns while
    /// it waits): in flight from the moment its commit lands (registered by the leader,
    /// before its next turn counts the calls in flight).
    claim: Option<Entry>,
    /// Whether the queued claim's call is counted in flight ([`gathered`]).
    gathers: bool,
    /// Wakes the task of a queued write once it is answered.
    answered: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each value behind these locks is replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Write {
    pub(crate) fn new(op: Op) -> Arc<Write> {
        Write::made(op, None, false)
    }

    fn made(op: Op, claim: Option<Entry>, gathers: bool) -> Arc<Write> {
        Arc::new(Write {
            op,
            outcome: Mutex::new(None),
            gathers: claim.is_some() && gathers,
            claim,
            answered: tokio::sync::Notify::new(),
        })
    }

    /// Sets what came of it (the leader, once per write).
    pub(crate) fn answer(&self, outcome: std::result::Result<usize, String>) {
        let mut o = lock(&self.outcome);
        if o.is_none() {
            *o = Some(outcome);
            drop(o);
            self.answered.notify_one();
        }
    }

    /// Its row count once its commit has landed (a queued write's task waits here).
    pub(crate) async fn landed(&self) -> Result<usize> {
        while !self.done() {
            // `notify_one` keeps its wake for a task not waiting yet: none is lost.
            self.answered.notified().await;
        }
        self.outcome()
    }

    fn done(&self) -> bool {
        lock(&self.outcome).is_some()
    }

    /// The row count, or the error that kept its commit from landing.
    pub(crate) fn outcome(&self) -> Result<usize> {
        match &*lock(&self.outcome) {
            Some(Ok(n)) => Ok(*n),
            Some(Err(e)) => Err(Error::journal(e.clone())),
            None => Err(Error::journal("the journal's commit never ran")),
        }
    }
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Arc<Write>>,
    leading: bool,
    /// A leader was asked for (a thread of the blocking pool) and has not started yet:
    /// queued writes do not ask again.
    asked: bool,
    /// How many writes a gathering leader waits for (the calls in flight to join): a write
    /// that joins wakes it only when it is the last of them (one wake per commit, not one
    /// per joining write).
    want: Option<usize>,
    /// Keys claimed here whose call has not settled them yet: when, the claim with its text
    /// (the call's result replaces that text: not serialised again), and whether a leader
    /// waits for the call ([`gathered`]).
    /// Keyed by idempotency keys: foldhash, as `later`'s maps.
    in_flight: HashMap<String, (Instant, Entry, String, bool), foldhash::fast::RandomState>,
}

impl Queue {
    /// The calls in flight that a leader waits for, those past the horizon forgotten.
    fn others(&mut self, now: Instant) -> usize {
        if self.in_flight.is_empty() {
            return 0;
        }
        // Counted in the pass that forgets: one walk of the map per turn.
        let mut gathered = 0;
        self.in_flight.retain(|_, (at, .., gathers)| {
            let kept = now.saturating_duration_since(*at) <= IN_FLIGHT_HORIZON;
            gathered += usize::from(kept && *gathers);
            kept
        });
        gathered
    }
}

/// One journal file's queue of writes, in this process.
pub(crate) struct Group {
    queue: Mutex<Queue>,
    landed: Condvar,
    joined: Condvar,
    /// [`COMMIT_DELAY`], but in tests.
    delay: Duration,
    /// How many times a gathering leader woke (a test counts them).
    #[cfg(test)]
    wakes: std::sync::atomic::AtomicUsize,
}

impl Default for Group {
    fn default() -> Self {
        Group::with_delay(COMMIT_DELAY)
    }
}

/// Ends a leader's turn even if its commit panicked: every write of its batch answered,
/// the next leader free to start.
struct Turn<'a> {
    group: &'a Group,
    batch: Vec<Arc<Write>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        for w in &self.batch {
            w.answer(Err("the journal's commit failed".into()));
        }
        let mut q = lock(&self.group.queue);
        let now = Instant::now();
        for w in &self.batch {
            if let (Some(entry), Op::Claim { text, .. }) = (&w.claim, &w.op) {
                if matches!(*lock(&w.outcome), Some(Ok(1))) {
                    let kept = (now, entry.clone(), text.clone(), w.gathers);
                    q.in_flight.insert(entry.key.clone(), kept);
                }
            }
        }
        q.leading = false;
        // A leader that panics takes no further turn (it leads queued claims after its own
        // turn, `Group::lead_queued`), and a queued claim has no thread to lead: fail the
        // ones that joined meanwhile, or they would wait for the next keyed call of the
        // process. None of them was committed. Writes with a thread of their own are woken
        // below and lead themselves.
        let orphans: Vec<Arc<Write>> = match std::thread::panicking() {
            true => {
                let (queued, own): (Vec<_>, Vec<_>) = std::mem::take(&mut q.waiting)
                    .into_iter()
                    .partition(|w| w.claim.is_some());
                q.waiting = own;
                queued
            }
            false => Vec::new(),
        };
        drop(q);
        for w in &orphans {
            w.answer(Err(
                "the journal's commit failed: its leader panicked".into()
            ));
        }
        self.group.landed.notify_all();
    }
}

impl Group {
    fn with_delay(delay: Duration) -> Self {
        Group {
            queue: Mutex::default(),
            landed: Condvar::new(),
            joined: Condvar::new(),
            delay,
            #[cfg(test)]
            wakes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Runs `op` in the next commit and returns its row count once that commit is on disk.
    /// The caller that finds no leader leads: `lead` commits the batch (every write waiting
    /// then, answered each), and what it returns comes back here with the row count, to be
    /// handled once the turn has ended.
    pub(crate) fn write<R>(
        &self,
        op: Op,
        lead: impl FnOnce(&[Arc<Write>]) -> R,
    ) -> (Result<usize>, Option<R>) {
        let mine = Write::new(op);
        let mut q = lock(&self.queue);
        self.join(&mut q, mine.clone());
        loop {
            if mine.done() {
                return (mine.outcome(), None);
            }
            if q.leading {
                q = self.landed.wait(q).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            q.leading = true;
            let led = self.turn(q, lead);
            return (mine.outcome(), Some(led));
        }
    }

    /// Queues the claim of `entry` (`op`) for the next commit with no thread waiting for
    /// it: its task awaits [`Write::landed`]; once stored, it is in flight, and waited for
    /// by a leader if `gathered` (read once by the call, [`gathered`]). True when no
    /// leader runs or was asked for: the caller then has a thread of the blocking pool run
    /// [`Group::lead_queued`].
    pub(crate) fn queue(&self, op: Op, entry: &Entry, gathered: bool) -> (Arc<Write>, bool) {
        let mine = Write::made(op, Some(entry.clone()), gathered);
        let mut q = lock(&self.queue);
        self.join(&mut q, mine.clone());
        let ask = !q.leading && !q.asked;
        q.asked |= ask;
        (mine, ask)
    }

    /// Takes a turn if queued writes wait and no leader runs (the leader a queued write
    /// asked for, or one whose turn has ended and whose results are handled): what `lead`
    /// returned, or `None` when there was nothing for it to lead.
    pub(crate) fn lead_queued<R>(&self, lead: impl FnOnce(&[Arc<Write>]) -> R) -> Option<R> {
        let mut q = lock(&self.queue);
        q.asked = false;
        if q.leading || !q.waiting.iter().any(|w| w.claim.is_some()) {
            return None;
        }
        q.leading = true;
        Some(self.turn(q, lead))
    }

    /// `mine` waits for the next commit; a gathering leader is woken by the last write it
    /// waits for.
    fn join(&self, q: &mut Queue, mine: Arc<Write>) {
        q.waiting.push(mine);
        if q.want.is_some_and(|want| q.waiting.len() >= want) {
            self.joined.notify_one();
        }
    }

    /// A leader's turn (the caller set `leading`): it waits up to the delay for the calls
    /// in flight to join, then `lead` commits every write waiting, each answered.
    fn turn<'a, R>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        lead: impl FnOnce(&[Arc<Write>]) -> R,
    ) -> R {
        let now = Instant::now();
        let others = q.others(now);
        if others > 0 {
            let want = q.waiting.len() + others;
            let until = now + self.delay;
            q.want = Some(want);
            while q.waiting.len() < want {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                q = self
                    .joined
                    .wait_timeout(q, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                #[cfg(test)]
                self.wakes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            q.want = None;
        }
        let batch = std::mem::take(&mut q.waiting);
        drop(q);
        let turn = Turn { group: self, batch };
        let led = lead(&turn.batch);
        drop(turn);
        led
    }

    /// A call's claim (`entry`, stored as `text`) is stored on a thread of the blocking
    /// pool: in flight until [`Group::answered`], waited for unless [`prompt_here`] says
    /// otherwise (no task runs there, so [`PROMPT`] is never set).
    pub(crate) fn claimed(&self, entry: &Entry, text: String) {
        let kept = (Instant::now(), entry.clone(), text, gathered_here());
        lock(&self.queue).in_flight.insert(entry.key.clone(), kept);
    }

    /// The call of `key` is being settled (its result, an undo): no longer in flight. The
    /// text of its claim if that claim is `old`.
    pub(crate) fn answered(&self, old: &Entry) -> Option<String> {
        let mut q = lock(&self.queue);
        if q.in_flight.is_empty() {
            return None;
        }
        match q.in_flight.remove(&old.key) {
            Some((_, claim, text, _)) if claim == *old => Some(text),
            _ => None,
        }
    }

    /// Whether other writes or keyed calls of this process are about: a leader runs, writes
    /// wait, or calls are in flight. A lone call's claim is cheaper led by its own thread.
    pub(crate) fn busy(&self) -> bool {
        let q = lock(&self.queue);
        q.leading || !q.waiting.is_empty() || !q.in_flight.is_empty()
    }

    /// How many writes wait for the next commit.
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.queue).waiting.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    /// The claim of `key` as a write (the journal's other tests use it too).
    pub(crate) fn claim(key: &str) -> Op {
        Op::Claim {
            key: key.into(),
            state: "pending",
            result: None,
            text: String::new(),
        }
    }

    fn in_flight(g: &Group, key: &str) {
        let e = crate::journal::machine::claim(key, "create_quote", "f", "me", None, None, 0);
        g.claimed(&e, String::new());
    }

    /// A leader whose commit panics fails the claims queued during its turn (they have no
    /// thread to lead, and it takes no further turn) instead of leaving them to wait for the
    /// next keyed call; the writes of its own batch fail too, and none is counted in flight.
    #[test]
    fn a_leader_that_panics_fails_the_claims_queued_meanwhile() {
        let g = Group::with_delay(Duration::ZERO);
        let entry = crate::journal::machine::claim("b", "create_quote", "f", "me", None, None, 0);
        let mut queued = None;
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            g.write(claim("a"), |_| {
                queued = Some(g.queue(claim("b"), &entry, true));
                panic!("a bug in a store's commit");
            })
        }));
        assert!(
            panicked.is_err(),
            "the leader's panic goes on to its caller"
        );
        let (w, ask) = queued.expect("queued during the turn");
        assert!(!ask, "a leader ran: none was asked for");
        let outcome = w.outcome();
        assert!(
            matches!(&outcome, Err(e) if e.to_string().contains("its leader panicked")),
            "{outcome:?}"
        );
        let q = lock(&g.queue);
        assert!(q.waiting.is_empty() && !q.leading && q.in_flight.is_empty());
    }

    /// A payout's row (`promptly`) is not waited for: a leader with only such calls in
    /// flight commits at once, whether the row claimed on a thread of its own or queued its
    /// claim; a call of a loop in flight is waited for, up to the delay.
    #[test]
    fn a_leader_waits_for_the_gathered_calls_in_flight_only() {
        let e =
            |k: &str| crate::journal::machine::claim(k, "create_quote", "f", "me", None, None, 0);
        let g = Group::with_delay(Duration::from_secs(30));
        // A claim on a thread of the blocking pool, for a row's task.
        prompt_here(false, || g.claimed(&e("own"), String::new()));
        assert!(gathered(), "set while the claim ran only");
        // A claim queued by a row's task, stored by a leader's commit.
        assert!(
            !PROMPT.sync_scope((), gathered),
            "a row's task is not gathered"
        );
        let (queued, _) = g.queue(claim("queued"), &e("queued"), false);
        assert!(!queued.gathers);
        let started = Instant::now();
        assert_eq!(
            g.write(claim("x"), |b| {
                b.iter().for_each(|w| w.answer(Ok(1)));
                b.len()
            })
            .1,
            Some(2)
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the row's claim in flight was waited for"
        );
        assert_eq!(
            lock(&g.queue).in_flight.len(),
            2,
            "each stored claim is in flight"
        );
        g.claimed(&e("loop"), String::new());
        assert_eq!(
            lock(&g.queue).others(Instant::now()),
            1,
            "the loop's call alone counts"
        );
        assert!(g.answered(&e("loop")).is_some());
        let started = Instant::now();
        assert_eq!(g.write(claim("a"), |b| b.len()).1, Some(1));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "committed at once"
        );
        // A loop's call in flight: waited for.
        let g = Group::with_delay(Duration::from_millis(150));
        g.claimed(&e("loop"), String::new());
        let started = Instant::now();
        assert_eq!(g.write(claim("b"), |b| b.len()).1, Some(1));
        assert!(
            started.elapsed() >= Duration::from_millis(150),
            "waited for it to join"
        );
    }

    /// A call claimed longer ago than the horizon is forgotten, not waited for: it is not
    /// about to claim again (or it ended without a result).
    #[test]
    fn a_call_past_the_horizon_is_forgotten_and_not_counted() {
        let g = Group::with_delay(Duration::from_secs(30));
        in_flight(&g, "old");
        let mut q = lock(&g.queue);
        let at = q.in_flight["old"].0;
        assert_eq!(
            q.others(at + IN_FLIGHT_HORIZON),
            1,
            "at the horizon: counted"
        );
        let later = at + IN_FLIGHT_HORIZON + Duration::from_millis(1);
        assert_eq!(q.others(later), 0, "past it: not counted");
        assert!(q.in_flight.is_empty(), "and forgotten");
    }

    /// A leader gathering for the calls in flight is woken once, by the last of them to
    /// join, not once per joining write: each wake is a context switch, paid per keyed call.
    #[test]
    fn a_gathering_leader_is_woken_by_the_last_write_it_waits_for_only() {
        let g = Arc::new(Group::with_delay(Duration::from_secs(30)));
        for k in ["b", "c", "d"] {
            in_flight(&g, k);
        }
        let leader = {
            let g = g.clone();
            std::thread::spawn(move || g.write(claim("a"), |batch| batch.len()))
        };
        while lock(&g.queue).want.is_none() {
            std::thread::yield_now();
        }
        // One at a time, each given time to wake a leader that would be woken by it.
        let joiners: Vec<_> = ["b", "c", "d"]
            .into_iter()
            .map(|k| {
                let g2 = g.clone();
                let j = std::thread::spawn(move || g2.write(claim(k), |_| 0).1);
                // Joined: waiting, or taken already by a leader that stopped gathering.
                while !{
                    let q = lock(&g.queue);
                    q.want.is_none()
                        || q.waiting
                            .iter()
                            .any(|w| matches!(&w.op, Op::Claim { key, .. } if key == k))
                } {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(20));
                j
            })
            .collect();
        let (_, led) = leader.join().expect("leader");
        assert_eq!(led, Some(4), "the leader commits every write it waited for");
        for j in joiners {
            assert_eq!(j.join().expect("joiner"), None, "a joiner does not lead");
        }
        assert_eq!(
            g.wakes.load(Relaxed),
            1,
            "woken once, by the last write it waited for"
        );
    }

    /// A call's answer takes back the text of its own claim only: another claim of the key
    /// (another holder's, a claim made again) gets none, so its swap compares with its own.
    #[test]
    fn an_answer_takes_back_the_text_of_its_own_claim_only() {
        let g = Group::default();
        let mine = crate::journal::machine::claim("k", "create_quote", "f", "me", None, None, 7);
        let other =
            crate::journal::machine::claim("k", "create_quote", "f", "another", None, None, 7);
        g.claimed(&mine, "mine".into());
        assert_eq!(g.answered(&other), None, "another claim of the key");
        g.claimed(&mine, "mine".into());
        assert_eq!(g.answered(&mine).as_deref(), Some("mine"));
        assert_eq!(g.answered(&mine), None, "answered once");
    }

    /// `busy` (a lone call's claim is led by its own thread only when it is false): a leader
    /// running with nothing else about, writes waiting, a call in flight each make it true.
    #[test]
    fn a_group_is_busy_while_a_leader_runs_writes_wait_or_a_call_is_in_flight() {
        let g = Group::default();
        assert!(!g.busy(), "nothing about");
        in_flight(&g, "flying");
        assert!(g.busy(), "a call in flight");
        let flying =
            crate::journal::machine::claim("flying", "create_quote", "f", "me", None, None, 0);
        assert!(g.answered(&flying).is_some());
        assert!(!g.busy(), "answered");
        let e = crate::journal::machine::claim("q", "create_quote", "f", "me", None, None, 0);
        let (_write, ask) = g.queue(claim("q"), &e, false);
        assert!(ask, "no leader runs: the caller asks for one");
        assert!(g.busy(), "a write waits");
        let inside = g.lead_queued(|batch| (batch.len(), g.busy(), g.waiting()));
        assert_eq!(
            inside,
            Some((1, true, 0)),
            "leading alone, its batch taken: still busy"
        );
        assert!(!g.busy(), "the turn is over");
    }

    /// `waiting` (the stores' `writes_waiting` diagnostic) counts the writes queued for the
    /// next commit, and none once a leader took them.
    #[test]
    fn waiting_counts_the_writes_queued_for_the_next_commit() {
        let g = Group::default();
        assert_eq!(g.waiting(), 0);
        for k in ["a", "b"] {
            let e = crate::journal::machine::claim(k, "create_quote", "f", "me", None, None, 0);
            g.queue(claim(k), &e, false);
        }
        assert_eq!(g.waiting(), 2);
        assert_eq!(g.lead_queued(|batch| batch.len()), Some(2));
        assert_eq!(g.waiting(), 0);
    }
}

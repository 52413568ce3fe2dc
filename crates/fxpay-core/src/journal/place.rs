//! Where a durable store's side in this process lives. Every store of one place (a server and
//! a prefix, a database and a table) shares, per process, what a keyed call leaves behind:
//! the results waiting for the next commit, and the connections. A forked child makes its
//! own on first use and never touches its parent's; it inherits the results waiting, to read.
use super::durable::{self, Durable};
use super::entry::Entry;
use crate::runtime::fork::PerProcess;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The values behind these locks are replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One place: its side in each process (`H`), and what a child forked next inherits.
pub(crate) struct Place<H> {
    here: PerProcess<H>,
    /// The results a child forked next inherits, taken by the forking thread.
    forked: Mutex<Option<HashMap<String, Entry>>>,
}

impl<H> Place<H> {
    /// This process's side, made by `make` (given what the process inherited) on first use.
    pub(crate) fn here(&self, make: impl FnOnce(HashMap<String, Entry>) -> H) -> &H {
        self.here
            .get_or_make(|| make(lock(&self.forked).take().unwrap_or_default()))
    }

    /// Run by the thread about to fork: what the child inherits.
    pub(crate) fn before_fork(&self, inherited: HashMap<String, Entry>) {
        *lock(&self.forked) = Some(inherited);
    }

    /// The parent, after the fork: forgets what `before_fork` kept.
    pub(crate) fn after_fork_in_parent(&self) {
        lock(&self.forked).take();
    }
}

/// The places of one kind of store in this process (a child starts with none).
pub(crate) struct Places<H>(PerProcess<Mutex<HashMap<String, Weak<Place<H>>>>>);

impl<H> Places<H> {
    pub(crate) const fn new() -> Self {
        Places(PerProcess::empty())
    }

    /// The place named `name`, shared with every live store of it in this process.
    pub(crate) fn of(&self, name: &str) -> Arc<Place<H>> {
        let mut by_name = lock(self.0.get_or_make(Mutex::default));
        if let Some(p) = by_name.get(name).and_then(Weak::upgrade) {
            return p;
        }
        let p = Arc::new(Place {
            here: PerProcess::empty(),
            forked: Mutex::new(None),
        });
        by_name.retain(|_, w| w.strong_count() > 0);
        by_name.insert(name.to_owned(), Arc::downgrade(&p));
        p
    }
}

/// A store of each place that had a result waiting in this process, held: a result outlives
/// the journal and the client that made it. The exit's flush writes them (`flush_all`).
pub(crate) struct Holding<S>(PerProcess<Mutex<HashMap<String, Arc<S>>>>);

impl<S> Holding<S> {
    pub(crate) const fn new() -> Self {
        Holding(PerProcess::empty())
    }

    pub(crate) fn hold(&self, place: &str, store: Arc<S>) {
        lock(self.0.get_or_make(Mutex::default)).insert(place.to_owned(), store);
    }

    /// Every store held, for `f` (called without the registry's lock).
    pub(crate) fn each(&self, f: impl Fn(&S)) {
        let all: Vec<Arc<S>> = lock(self.0.get_or_make(Mutex::default))
            .values()
            .cloned()
            .collect();
        for s in all {
            f(&s);
        }
    }
}

impl<S: Durable> Holding<S> {
    /// Writes the results waiting in every store held (the exit's flush; a payout's end).
    pub(crate) fn flush_each(&self) {
        self.each(|s| {
            let _ = durable::flush(s);
        });
    }
}

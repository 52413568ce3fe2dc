//! `fxpay.SqliteJournal`'s storage, below the `JournalStore` port: a keyed call on an SQLite
//! journal never climbs into Python (issue 55's decision, issue 56's cost).
//!
//! - `file`: the file's identity, and a connection made the journal's way;
//! - `fork_gate`: no thread is inside SQLite when the process forks;
//! - the journal's `group_commit` (concurrent writes share one transaction and one fsync)
//!   and `later` (a call's result rides the next commit), shared with the Redis store.
//!
//! The file format is the Python journal's, byte for byte (one table, an entry's JSON text
//! per key): fxpay versions, and processes of either, share a journal file.
//!
//! Per process: a connection, a queue of writes and the results waiting, shared by every
//! store of the same path in the process; a forked child makes its own on first use and
//! never touches its parent's (it reads the results its parent held when it forked).
mod file;
mod fork_gate;

use super::durable::{self, Durable};
use super::entry::Entry;
use super::group_commit::{Group, Op, Write};
use super::holder::{HolderCheck, LocalProcesses};
use super::later::Later;
use super::place::{Holding, Place, Places};
use super::store::JournalStore;
use crate::error::{Error, Result};
use futures_util::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// What an SQLite journal tells its owner (the Python `SqliteJournal`), rarely: once per
/// process when its first result waits for a commit (the owner makes sure the process's
/// exit writes it, `flush_journals`), and for a result that found its key changed
/// otherwise and was not written (logged, with the id, for `resolve`).
// The two callbacks' types are spelled out: an alias would be one more public item.
#[allow(clippy::type_complexity)]
struct Hooks {
    result_waits: Box<dyn Fn() + Send + Sync>,
    not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
}

/// How many times a claim is tried when its entry keeps vanishing under it.
const TRIES: usize = 16;

const GET: &str = "SELECT data FROM fxpay_journal WHERE key = ?1";
const CLAIM: &str = "INSERT INTO fxpay_journal (key, state, result, data) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (key) DO NOTHING";
const SWAP: &str =
    "UPDATE fxpay_journal SET state = ?1, result = ?2, data = ?3 WHERE key = ?4 AND data = ?5";
const FIND: &str = "SELECT data FROM fxpay_journal WHERE result = ?1 ORDER BY rowid LIMIT 1";
const CANDIDATES: &str =
    "SELECT data FROM fxpay_journal WHERE state IN ('pending', 'unknown') ORDER BY rowid";

/// One process's side of a journal file.
struct Here {
    conn: Mutex<Option<Connection>>,
    group: Group,
    later: Later,
    /// Whether `SqliteHooks::result_waits` was called in this process.
    hooked: AtomicBool,
}

impl Drop for Here {
    fn drop(&mut self) {
        // Closed inside the gate: never while the process forks.
        let _in = fork_gate::enter();
        drop(lock(&self.conn).take());
    }
}

impl Here {
    fn new(inherited: HashMap<String, Entry>) -> Here {
        Here {
            conn: Mutex::new(None),
            group: Group::default(),
            later: Later::with_inherited(inherited),
            hooked: AtomicBool::new(false),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The values behind these locks are replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The journal files of this process, by path (a child starts with none).
static PLACES: Places<Here> = Places::new();

/// A store of each file that had a result waiting in this process (for `flush_all`), held:
/// a result outlives the journal and the client that made it (a worker's task returns, its
/// client is dropped, and its process's exit still writes the result). One per file: the
/// results wait per file, and any store of it writes them.
pub(super) static HOLDING: Holding<SqliteStore> = Holding::new();

/// A journal's storage in an SQLite file; `single_host` (a pending key whose holder process
/// exited is gone at once).
pub(crate) struct SqliteStore {
    path: String,
    ident: (u64, u64),
    timeout: Duration,
    delay: Duration,
    hooks: Hooks,
    shared: Arc<Place<Here>>,
    /// Whether this store's `before_fork` was counted by the fork gate (its
    /// `after_fork_in_parent` then is too).
    fork_held: AtomicBool,
    me: Weak<SqliteStore>,
}

impl SqliteStore {
    /// The journal at `path` (an absolute path, whose file has the (device, inode) `ident`:
    /// checked before every claim), connected now. `timeout` bounds the wait for another
    /// process's write lock; `delay`, how long a result may wait for a claim's commit.
    #[allow(clippy::type_complexity)] // see `Hooks`
    pub(crate) fn open(
        path: &str,
        ident: (u64, u64),
        timeout: Duration,
        delay: Duration,
        result_waits: Box<dyn Fn() + Send + Sync>,
        not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
    ) -> Result<Arc<SqliteStore>> {
        let hooks = Hooks {
            result_waits,
            not_recorded,
        };
        let shared = PLACES.of(path);
        let store = Arc::new_cyclic(|me| SqliteStore {
            path: path.to_owned(),
            ident,
            timeout,
            delay,
            hooks,
            shared,
            fork_held: AtomicBool::new(false),
            me: me.clone(),
        });
        store.with_conn("open", |_| Ok(()))?;
        Ok(store)
    }

    fn here(&self) -> &Here {
        self.shared.here(Here::new)
    }

    /// Runs `f` on this process's connection (made on first use), inside the fork gate;
    /// a lock another process holds is waited for up to the timeout.
    fn with_conn<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.timeout;
        let here = self.here();
        loop {
            let got = {
                let _in = fork_gate::enter();
                let mut conn = lock(&here.conn);
                if conn.is_none() {
                    *conn = Some(file::connect(&self.path, self.ident, self.timeout)?);
                }
                match conn.as_ref() {
                    Some(c) => f(c),
                    None => return Err(Error::journal("the journal's connection is gone")),
                }
            };
            match got {
                Ok(v) => return Ok(v),
                Err(e) if file::is_busy(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(file::failed(what, &e)),
            }
        }
    }

    fn texts(&self, what: &str, sql: &str, arg: Option<&str>) -> Result<Vec<Entry>> {
        let texts: Vec<String> = self.with_conn(what, |c| {
            let mut s = c.prepare_cached(sql)?;
            let params: &[&dyn rusqlite::ToSql] = match &arg {
                Some(a) => &[a],
                None => &[],
            };
            let rows = s.query_map(params, |r| r.get(0))?;
            rows.collect()
        })?;
        texts
            .iter()
            .map(|t| Entry::from_json(t).map_err(Error::journal))
            .collect()
    }

    /// Runs `writes` in one transaction; each gets its row count, or every one the error
    /// that kept the transaction from committing.
    fn transaction(&self, writes: &[&Arc<Write>]) {
        let got = self.with_conn("commit", |c| {
            c.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            let run = || -> rusqlite::Result<Vec<usize>> {
                let mut counts = Vec::with_capacity(writes.len());
                for w in writes {
                    counts.push(match &w.op {
                        Op::Claim {
                            key,
                            state,
                            result,
                            text,
                        } => c
                            .prepare_cached(CLAIM)?
                            .execute(rusqlite::params![key, state, result, text])?,
                        Op::Swap {
                            key,
                            state,
                            result,
                            text,
                            old,
                        } => c
                            .prepare_cached(SWAP)?
                            .execute(rusqlite::params![state, result, text, key, old])?,
                        Op::Nothing => 0,
                    });
                }
                c.prepare_cached("COMMIT")?.execute([])?;
                Ok(counts)
            };
            let counts = run();
            if counts.is_err() && !c.is_autocommit() {
                // SQLite may have rolled back already (a full disk): only if still open.
                let _ = c.execute_batch("ROLLBACK");
            }
            counts
        });
        match got {
            Ok(counts) => {
                for (w, n) in writes.iter().zip(counts) {
                    w.answer(Ok(n));
                }
            }
            Err(e) => {
                let text = e.to_string();
                for w in writes {
                    w.answer(Err(text.clone()));
                }
            }
        }
    }
}

impl Durable for SqliteStore {
    fn group(&self) -> &Group {
        &self.here().group
    }

    fn later(&self) -> &Later {
        &self.here().later
    }

    /// The stored text and entry of `key`.
    fn read(&self, key: &str) -> Result<Option<(String, Entry)>> {
        let text: Option<String> = self.with_conn("get", |c| {
            c.prepare_cached(GET)?
                .query_row([key], |r| r.get(0))
                .optional()
        })?;
        text.map(|t| Entry::from_json(&t).map(|e| (t, e)).map_err(Error::journal))
            .transpose()
    }

    /// Runs `op` in the next group commit; its row count once on disk.
    fn write(&self, op: Op) -> Result<usize> {
        durable::write(self, op)
    }

    fn commit(&self, writes: &[&Arc<Write>]) {
        self.transaction(writes);
    }

    fn wake(&self) {
        let hooked = &self.here().hooked;
        let hold = |me| HOLDING.hold(&self.path, me);
        durable::wake(
            &self.me,
            hooked,
            hold,
            &*self.hooks.result_waits,
            self.delay,
        );
    }

    fn retry(&self) {
        durable::retry(&self.me);
    }

    fn not_recorded(&self, key: &str, result: Option<&str>) {
        (self.hooks.not_recorded)(key, result);
    }
}

impl JournalStore for SqliteStore {
    fn get(&self, key: &str) -> Result<Option<Entry>> {
        durable::get_then(self, key, || {})
    }

    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        file::check(&self.path, self.ident)?;
        let text = entry.to_json();
        for _ in 0..TRIES {
            let n = self.write(Op::Claim {
                key: entry.key.clone(),
                state: entry.state.as_str(),
                result: entry.result.clone(),
                text: text.clone(),
            })?;
            if n == 1 {
                self.here().group.claimed(entry, text);
                return Ok(None);
            }
            let later = &self.here().later;
            let mine = later.get(&entry.key); // before the read, as `get_then`
            if let Some((_, stored)) = self.read(&entry.key)? {
                // A result of this process still on its way to the file is the key's news.
                return Ok(later.news_given(Some(stored), mine));
            }
        }
        Err(Error::journal(format!(
            "the entry of key {:?} kept vanishing while it was claimed",
            entry.key
        )))
    }

    /// The claim queued for the next group commit, no thread waiting for it, when other
    /// calls are about (a lone call's claim leads its own commit: no task is woken).
    fn claim_queued(
        &self,
        entry: &Entry,
        gathered: bool,
    ) -> Option<BoxFuture<'static, Result<Option<Entry>>>> {
        // A removed or replaced file: `claim` says why.
        durable::claim_queued(&self.me, entry, gathered, || {
            file::check(&self.path, self.ident).is_ok()
        })
    }

    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        durable::swap(self, "SqliteJournal", old, new)
    }

    fn find(&self, result: &str) -> Result<Option<Entry>> {
        if let Some(got) = durable::find_waiting(self, result, |k| self.get(k))? {
            return Ok(Some(got));
        }
        Ok(self.texts("find", FIND, Some(result))?.into_iter().next())
    }

    fn holders(&self) -> &dyn HolderCheck {
        &LocalProcesses
    }

    /// A call's result is kept for the next commit (in memory).
    fn swap_at_once(&self, old: &Entry, new: &Entry) -> bool {
        durable::swap_at_once(self, old, new)
    }

    /// Every entry that is `pending` or `unknown`, in the order their keys were claimed
    /// (a key whose result waits here to be written is done, not listed).
    fn candidates(&self) -> Result<Vec<Entry>> {
        let later = &self.here().later;
        // The results waiting, looked up before the read (as `get_then`).
        let mine: HashMap<String, Entry> = later
            .entries()
            .into_iter()
            .map(|e| (e.key.clone(), e))
            .collect();
        Ok(self
            .texts("candidates", CANDIDATES, None)?
            .into_iter()
            .filter(|e| later.newer_than(e, mine.get(&e.key).cloned()).is_none())
            .collect())
    }

    /// Writes the results waiting now (a payout's end, the process's exit).
    fn flush(&self) -> Result<()> {
        durable::flush(self)
    }

    /// What this process's side of the journal runs with, for tests and support: an SQLite
    /// setting of its connection (`synchronous`, `journal_mode`, `page_count`,
    /// `max_page_count`, the last settable to `value`: a full disk, for tests), or its own
    /// counts (`writes_waiting`: writes queued for the next commit; `results_waiting`:
    /// results waiting or being written).
    fn diagnostic(&self, name: &str, value: Option<i64>) -> Result<String> {
        let here = self.here();
        match (name, value) {
            ("writes_waiting", None) => return Ok(here.group.waiting().to_string()),
            ("results_waiting", None) => return Ok(here.later.entries().len().to_string()),
            ("synchronous" | "journal_mode" | "page_count" | "max_page_count", None)
            | ("max_page_count", Some(_)) => {}
            _ => {
                return Err(Error::InvalidRequest(format!(
                    "SqliteJournal: {name:?} cannot be read or set here"
                )))
            }
        }
        let sql = match value {
            Some(v) => format!("PRAGMA {name} = {v}"),
            None => format!("PRAGMA {name}"),
        };
        self.with_conn("diagnostic", |c| {
            c.query_row(&sql, [], |r| {
                Ok(match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    _ => String::new(),
                })
            })
        })
    }

    /// Writes the results waiting, then closes this process's connection (made again on
    /// next use).
    fn close(&self) -> Result<()> {
        let flushed = self.flush();
        let here = self.here();
        let _in = fork_gate::enter();
        drop(lock(&here.conn).take());
        flushed
    }

    /// Run by the thread about to fork: takes what the child inherits (the results waiting,
    /// to read), and holds the fork gate (at most the timeout) so that no thread is inside
    /// SQLite at the fork.
    fn before_fork(&self) {
        self.shared.before_fork(self.here().later.for_child());
        let held = fork_gate::before_fork(self.timeout);
        self.fork_held.store(held, Ordering::Release);
    }

    /// The parent, after the fork: releases what `before_fork` held.
    fn after_fork_in_parent(&self) {
        self.shared.after_fork_in_parent();
        if self.fork_held.swap(false, Ordering::AcqRel) {
            fork_gate::after_fork_in_parent();
        }
    }
}

/// Makes a new journal in the file at `path`, a new temporary file that
/// `fxpay.SqliteJournal` then links into place: the schema's one home (`file::create`).
pub fn create_sqlite_journal(path: &str) -> Result<()> {
    file::create(path)
}

/// `fxpay.SqliteJournal`'s storage: the journal at `path` (an absolute path, whose file has
/// the (device, inode) `ident`: checked before every claim), connected now. `timeout`
/// bounds the wait for another process's write lock; `delay`, how long a result may wait
/// for a claim's commit. `result_waits` is called once per process when its first result
/// waits, `not_recorded(key, result)` for a result that found its key changed otherwise.
#[allow(clippy::type_complexity)] // see `Hooks`
pub fn sqlite_store(
    path: &str,
    ident: (u64, u64),
    timeout: Duration,
    delay: Duration,
    result_waits: Box<dyn Fn() + Send + Sync>,
    not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
) -> Result<Arc<dyn JournalStore>> {
    let store = SqliteStore::open(path, ident, timeout, delay, result_waits, not_recorded)?;
    Ok(store)
}

#[cfg(test)]
mod tests;

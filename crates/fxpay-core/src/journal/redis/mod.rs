//! `fxpay.RedisJournal`'s storage (a journal made from a URL), below the `JournalStore`
//! port: a keyed call on a Redis journal never climbs into Python (issue 55's decision,
//! issue 56's cost).
//!
//! - `connection`: a connection made the journal's way (timeouts; a replica, or a Redis that
//!   forgets, refused before its first command);
//! - `signals`: the process's signals held off a thread while it waits for Redis (a read
//!   a signal interrupted fails a command that was sent);
//! - `texts`: the two scripts every write runs (each checks the journal's identity first),
//!   and the journal's refusals;
//! - the journal's `group_commit` (the claims of concurrent calls, and the results waiting,
//!   in one pipeline: Redis reads it at once and writes its AOF once) and `later` (a call's
//!   result rides the next commit), shared with the SQLite store.
//!
//! The keys are the Python journal's (`prefix + "k:" + key`, the open-keys set, the result
//! index, the identity key), and so are the scripts: fxpay versions, and processes of
//! either, share a journal.
//!
//! Per process: a connection, the results waiting, shared by every store of the same place
//! (server and prefix) in the process, and a queue of claims per store; a forked child makes
//! its own on first use and never touches its parent's.
mod connection;
mod signals;
pub(crate) mod texts;

use super::durable::{self, Durable};
use super::entry::{Entry, State};
use super::group_commit::{Group, Op, Write};
use super::holder::{HolderCheck, LeaseOnly};
use super::later::Later;
use super::place::{Holding, Place, Places};
use super::store::JournalStore;
use crate::error::{Error, Result};
use crate::runtime::fork::PerProcess;
use arc_swap::ArcSwapOption;
use connection::{Failed, Settings};
use futures_util::future::BoxFuture;
use redis::{Client, Connection, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// What a Redis journal tells its owner (the Python `RedisJournal`), rarely: once per
/// process when its first result waits (the exit writes it, `flush_all`), a result that
/// found its key changed otherwise (logged, with the id, for `resolve`), and a warning
/// about the server (once per journal and kind).
// The callbacks' types are spelled out: an alias would be one more public item.
#[allow(clippy::type_complexity)]
struct Hooks {
    result_waits: Box<dyn Fn() + Send + Sync>,
    not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
    warn: Box<dyn Fn(&str) + Send + Sync>,
}

/// How many keys one MGET reads.
const MGET_CHUNK: usize = 1000;
/// A connection unused this long is asked a `PING` before its next command.
const IDLE: Duration = Duration::from_secs(1);

/// A command that failed, and whether any of it may have reached Redis.
struct Lost {
    e: redis::RedisError,
    sent: bool,
}

impl From<redis::RedisError> for Lost {
    fn from(e: redis::RedisError) -> Self {
        Lost { e, sent: true }
    }
}

/// One process's side of a place.
struct Here {
    /// The connection, and when it was last used.
    conn: Mutex<Option<(Connection, Instant)>>,
    later: Later,
    /// Whether `Hooks::result_waits` was called in this process.
    hooked: AtomicBool,
}

impl Here {
    fn new(inherited: HashMap<String, Entry>) -> Here {
        Here {
            conn: Mutex::new(None),
            later: Later::with_inherited(inherited),
            hooked: AtomicBool::new(false),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The values behind these locks are replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

static PLACES: Places<Here> = Places::new();
/// A store of each place that had a result waiting in this process (for `flush_all`).
pub(super) static HOLDING: Holding<RedisStore> = Holding::new();

/// A journal's storage in Redis, shared by every process and machine that uses it. A
/// pending key's holder is gone only once its lease lapses.
pub(crate) struct RedisStore {
    place: String,
    client: Client,
    prefix: String,
    open_key: String,
    id_key: String,
    require_persistence: bool,
    timeout: Duration,
    delay: Duration,
    hooks: Hooks,
    /// The warnings given (each once; a bit per kind). No lock: a lock another thread
    /// held at a fork would stay held in the child.
    warned: AtomicU8,
    /// The identity of the journal this process opened (read on first use, or made by
    /// `create`): every claim and swap runs only where it is still the one stored. Read
    /// and set without a lock, as `warned`.
    id: ArcSwapOption<String>,
    shared: Arc<Place<Here>>,
    /// This store's claims waiting for their commit, per process.
    group: PerProcess<Group>,
    me: Weak<RedisStore>,
}

impl RedisStore {
    /// The journal under `prefix` in the Redis at `url` (`redis://`, `unix://`); no
    /// connection is made yet. `timeout` bounds connecting and each command; `delay`, how
    /// long a result may wait for a claim's commit. A URL it cannot use is a
    /// `Configuration` error.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)] // see `Hooks`
    pub(crate) fn open(
        url: &str,
        prefix: &str,
        require_persistence: bool,
        timeout: Duration,
        delay: Duration,
        result_waits: Box<dyn Fn() + Send + Sync>,
        not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
        warn: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Arc<RedisStore>> {
        let client = Client::open(url).map_err(|e| {
            Error::Configuration(format!(
                "RedisJournal cannot use the URL {}: {e}",
                texts::repr(url)
            ))
        })?;
        let info = client.get_connection_info();
        let place = format!(
            "redis:{:?}:{}:{prefix}",
            info.addr(),
            info.redis_settings().db()
        );
        let shared = PLACES.of(&place);
        Ok(Arc::new_cyclic(|me| RedisStore {
            place,
            client,
            prefix: prefix.to_owned(),
            open_key: format!("{prefix}open"),
            id_key: format!("{prefix}journal"),
            require_persistence,
            timeout,
            delay,
            hooks: Hooks {
                result_waits,
                not_recorded,
                warn,
            },
            warned: AtomicU8::new(0),
            id: ArcSwapOption::empty(),
            shared,
            group: PerProcess::empty(),
            me: me.clone(),
        }))
    }

    fn here(&self) -> &Here {
        self.shared.here(Here::new)
    }

    fn warn_once(&self, what: &'static str, message: String) {
        let bit = match what {
            "role" => 1,
            "config" => 2,
            _ => 4,
        };
        if self.warned.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
            (self.hooks.warn)(&message);
        }
    }

    fn failed(&self, what: &str, f: Failed) -> Error {
        match f {
            Failed::Refused(text) => Error::journal(text),
            Failed::Redis(e) if connection::is_reply(&e) => Error::journal(format!(
                "RedisJournal.{what}() failed: ResponseError: {}",
                connection::shown(&e)
            )),
            Failed::Redis(e) => Error::journal(format!(
                "RedisJournal.{what}() failed: {}: {} (the journal's Redis at {})",
                connection::kind(&e),
                connection::shown(&e),
                self.client.get_connection_info().addr()
            )),
        }
    }

    /// Runs `f` on this process's connection (made and checked on first use, and again
    /// after one failed). A connection idle for [`IDLE`] is asked a `PING` first, and made
    /// anew if the server closed it meanwhile (a restart, its `timeout`, `CLIENT KILL`): a
    /// write never goes out on a connection known to be dead. A read whose connection
    /// failed is run once more on a new one, and so is a write that failed before it was
    /// sent; a write that may have reached Redis never is (the caller fails closed, and the
    /// core undoes a claim that landed).
    fn with_conn<T>(
        &self,
        what: &str,
        read: bool,
        mut f: impl FnMut(&mut Connection) -> std::result::Result<T, Lost>,
    ) -> Result<T> {
        let _held = signals::Held::new(); // no EINTR on a command sent: signals.rs
        let here = self.here();
        let mut conn = lock(&here.conn);
        let mut tries = 2;
        loop {
            tries -= 1;
            if let Some((c, used)) = conn.as_mut() {
                if used.elapsed() > IDLE && redis::cmd("PING").query::<String>(c).is_err() {
                    *conn = None;
                }
            }
            if conn.is_none() {
                let warn = |what: &'static str, m: String| self.warn_once(what, m);
                let settings = Settings {
                    client: &self.client,
                    timeout: self.timeout,
                    require_persistence: self.require_persistence,
                    warn: &warn,
                };
                let made = connection::connect(&settings).map_err(|e| self.failed(what, e))?;
                *conn = Some((made, Instant::now()));
            }
            let Some((c, used)) = conn.as_mut() else {
                return Err(Error::journal("the journal's connection is gone"));
            };
            match f(c) {
                Ok(v) => {
                    *used = Instant::now();
                    return Ok(v);
                }
                Err(Lost { e, .. }) if connection::is_reply(&e) => {
                    *used = Instant::now();
                    return Err(self.failed(what, Failed::Redis(e)));
                }
                Err(Lost { e, sent }) => {
                    *conn = None; // never used again
                    if tries == 0 || (sent && !read) {
                        return Err(self.failed(what, Failed::Redis(e)));
                    }
                }
            }
        }
    }

    fn k(&self, key: &str) -> String {
        format!("{}k:{key}", self.prefix)
    }

    /// The identity of the journal this process opened: read on first use. A Redis that
    /// holds none is refused.
    fn identity(&self, what: &str) -> Result<Arc<String>> {
        if let Some(id) = self.id.load_full() {
            return Ok(id);
        }
        let stored: Option<String> = self.with_conn(what, true, |c| {
            Ok(redis::cmd("GET").arg(&self.id_key).query(c)?)
        })?;
        match stored {
            None => Err(Error::journal(texts::no_journal(
                &self.prefix,
                &self.id_key,
            ))),
            Some(s) => {
                // The first identity read stands: another thread may have read it first.
                let fresh = Arc::new(s);
                let before = self
                    .id
                    .compare_and_swap(&None::<Arc<String>>, Some(fresh.clone()));
                Ok((*before).clone().unwrap_or(fresh))
            }
        }
    }

    fn not_this_journal(&self, found: &str) -> Error {
        let mine = self
            .id
            .load_full()
            .map(|m| (*m).clone())
            .unwrap_or_default();
        Error::journal(texts::not_this_journal(
            &self.prefix,
            &self.id_key,
            found.trim(),
            &mine,
        ))
    }

    /// For the readings people act on (`unknown()`, a payout's progress): the journal this
    /// process opened is still the one stored, so an emptied Redis never reads as a
    /// journal with nothing open.
    fn check_still_here(&self, what: &str) -> Result<()> {
        let mine = self.identity(what)?;
        let stored: Option<String> = self.with_conn(what, true, |c| {
            Ok(redis::cmd("GET").arg(&self.id_key).query(c)?)
        })?;
        match stored {
            Some(s) if *s == *mine => Ok(()),
            other => Err(self.not_this_journal(other.as_deref().unwrap_or(""))),
        }
    }

    fn entry(text: &str) -> Result<Entry> {
        Entry::from_json(text).map_err(Error::journal)
    }

    /// The entries of `keys` that exist, each as this process reads it (MGET by 1,000).
    fn read_many(&self, what: &str, keys: &[String]) -> Result<Vec<Entry>> {
        let later = &self.here().later;
        let mut out = Vec::new();
        for part in keys.chunks(MGET_CHUNK) {
            // This process's results, looked up before the read: one that lands in between
            // is in what was read (after it, it would be in neither, and read pending).
            let mine: Vec<Option<Entry>> = part.iter().map(|k| later.get(k)).collect();
            let texts: Vec<Option<String>> = self.with_conn(what, true, |c| {
                let mut cmd = redis::cmd("MGET");
                for key in part {
                    cmd.arg(self.k(key));
                }
                Ok(cmd.query(c)?)
            })?;
            for (t, mine) in texts.into_iter().zip(mine) {
                if let Some(t) = t {
                    out.extend(later.news_given(Some(Self::entry(&t)?), mine));
                }
            }
        }
        Ok(out)
    }

    /// Sends `writes` in one pipeline; each gets its count (a claim: 1 when made; a swap: 1
    /// when made), or its refusal, or every one the error that kept the pipeline from
    /// being answered. A write that met a Redis without the scripts (restarted, or
    /// `SCRIPT FLUSH`) is sent once more once they are loaded.
    fn pipeline(&self, writes: &[&Arc<Write>]) {
        let ident = match self.identity("claim") {
            Ok(id) => id,
            Err(e) => {
                let text = e.to_string();
                for w in writes {
                    w.answer(Err(text.clone()));
                }
                return;
            }
        };
        let claim = redis::Script::new(texts::CLAIM);
        let swap = redis::Script::new(texts::SWAP);
        let mut pending: Vec<&Arc<Write>> = writes.to_vec();
        for pass in 0..2 {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for w in &pending {
                match &w.op {
                    Op::Claim { key, text, .. } => {
                        pipe.cmd("EVALSHA")
                            .arg(claim.get_hash())
                            .arg(3)
                            .arg(self.k(key))
                            .arg(&self.open_key)
                            .arg(&self.id_key)
                            .arg(text)
                            .arg(key)
                            .arg(&*ident);
                    }
                    Op::Swap {
                        key,
                        state,
                        result,
                        text,
                        old,
                    } => {
                        let index = result
                            .as_ref()
                            .map(|r| format!("{}r:{r}", self.prefix))
                            .unwrap_or_default();
                        pipe.cmd("EVALSHA")
                            .arg(swap.get_hash())
                            .arg(4)
                            .arg(self.k(key))
                            .arg(&self.open_key)
                            .arg(index)
                            .arg(&self.id_key)
                            .arg(old)
                            .arg(text)
                            .arg(key)
                            .arg(*state)
                            .arg(&*ident);
                    }
                    Op::Nothing => {}
                }
            }
            let what = if pending.iter().any(|w| matches!(w.op, Op::Claim { .. })) {
                "claim"
            } else {
                "swap"
            };
            let packed = pipe.get_packed_pipeline();
            let n = pending.len();
            let replies = match self.with_conn(what, false, |c| {
                c.send_packed_command(&packed)
                    .map_err(|e| Lost { e, sent: false })?;
                Ok((0..n)
                    .map(|_| c.recv_response())
                    .collect::<redis::RedisResult<Vec<Value>>>()?)
            }) {
                Ok(r) if r.len() == pending.len() => r,
                Ok(_) => {
                    for w in &pending {
                        w.answer(Err(format!(
                            "RedisJournal.{what}() failed: the pipeline's replies do not match its commands"
                        )));
                    }
                    return;
                }
                Err(e) => {
                    let text = e.to_string();
                    for w in &pending {
                        w.answer(Err(text.clone()));
                    }
                    return;
                }
            };
            let mut again = Vec::new();
            for (w, reply) in pending.iter().zip(replies) {
                match reply {
                    Value::ServerError(e) if e.code() == "NOSCRIPT" && pass == 0 => again.push(*w),
                    Value::ServerError(e) if e.code() == texts::NOT_THIS_JOURNAL => {
                        let found = e.details().unwrap_or("");
                        w.answer(Err(self.not_this_journal(found).to_string()));
                    }
                    Value::ServerError(e) => w.answer(Err(format!(
                        "RedisJournal.{what}() failed: ResponseError: {}",
                        e.details()
                            .map_or_else(|| e.code().to_owned(), |d| format!("{} {d}", e.code()))
                    ))),
                    // A claim: nil when made, the stored text when not; a swap: 1 or 0.
                    Value::Nil => w.answer(Ok(1)),
                    Value::Int(n) => w.answer(Ok(usize::from(n == 1))),
                    _ => w.answer(Ok(0)),
                }
            }
            if again.is_empty() {
                return;
            }
            let loaded = self.with_conn(what, true, |c| {
                for script in [texts::CLAIM, texts::SWAP] {
                    redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(script)
                        .query::<String>(c)?;
                }
                Ok(())
            });
            if let Err(e) = loaded {
                for w in &again {
                    w.answer(Err(e.to_string()));
                }
                return;
            }
            pending = again;
        }
    }
}

impl Durable for RedisStore {
    fn group(&self) -> &Group {
        self.group.get_or_make(Group::default)
    }

    fn later(&self) -> &Later {
        &self.here().later
    }

    /// The stored text and entry of `key`.
    fn read(&self, key: &str) -> Result<Option<(String, Entry)>> {
        self.identity("get")?;
        let text: Option<String> = self.with_conn("get", true, |c| {
            Ok(redis::cmd("GET").arg(self.k(key)).query(c)?)
        })?;
        text.map(|t| Self::entry(&t).map(|e| (t, e))).transpose()
    }

    /// Runs `op` in the next group commit; its count once Redis answered.
    fn write(&self, op: Op) -> Result<usize> {
        durable::write(self, op)
    }

    fn commit(&self, writes: &[&Arc<Write>]) {
        self.pipeline(writes);
    }

    fn wake(&self) {
        let hooked = &self.here().hooked;
        let hold = |me| HOLDING.hold(&self.place, me);
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

impl JournalStore for RedisStore {
    fn get(&self, key: &str) -> Result<Option<Entry>> {
        durable::get_then(self, key, || {})
    }

    /// The claim reaches Redis even when this process holds the key's result: the
    /// identity is checked with every claim (a FLUSHALL under a live process is caught).
    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        let text = entry.to_json();
        let n = self.write(Op::Claim {
            key: entry.key.clone(),
            state: entry.state.as_str(),
            result: entry.result.clone(),
            text: text.clone(),
        })?;
        if n == 1 {
            self.group.get_or_make(Group::default).claimed(entry, text);
            return Ok(None);
        }
        let later = &self.here().later;
        let mine = later.get(&entry.key); // before the read, as `get`
        match self.read(&entry.key)? {
            // A result of this process still on its way to Redis is the key's news.
            Some((_, stored)) => Ok(later.news_given(Some(stored), mine)),
            None => Err(Error::journal(format!(
                "RedisJournal.claim(): the entry of key {:?} vanished while it was claimed; nothing was sent",
                entry.key
            ))),
        }
    }

    /// The claim queued for the next group commit, no thread waiting for it, when other
    /// calls are about (a lone call's claim leads its own commit: no task is woken).
    fn claim_queued(
        &self,
        entry: &Entry,
        gathered: bool,
    ) -> Option<BoxFuture<'static, Result<Option<Entry>>>> {
        durable::claim_queued(&self.me, entry, gathered, || true)
    }

    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        durable::swap(self, "RedisJournal", old, new)
    }

    fn find(&self, result: &str) -> Result<Option<Entry>> {
        if let Some(got) = durable::find_waiting(self, result, |k| self.get(k))? {
            return Ok(Some(got));
        }
        self.identity("find")?;
        let key: Option<String> = self.with_conn("find", true, |c| {
            Ok(redis::cmd("GET")
                .arg(format!("{}r:{result}", self.prefix))
                .query(c)?)
        })?;
        // The index outlives a result swapped away (an undo): the key's entry now is the
        // answer only while it still holds that result.
        match key {
            Some(k) => Ok(self
                .get(&k)?
                .filter(|e| e.result.as_deref() == Some(result))),
            None => Ok(None),
        }
    }

    fn holders(&self) -> &dyn HolderCheck {
        &LeaseOnly
    }

    /// A call's result is kept for the next commit (in memory).
    fn swap_at_once(&self, old: &Entry, new: &Entry) -> bool {
        durable::swap_at_once(self, old, new)
    }

    /// Every entry that is `pending` or `unknown`, by key (a key whose result waits here to
    /// be written is done, not listed).
    fn candidates(&self) -> Result<Vec<Entry>> {
        self.check_still_here("candidates")?;
        let mut keys: Vec<String> = self.with_conn("candidates", true, |c| {
            Ok(redis::cmd("SMEMBERS").arg(&self.open_key).query(c)?)
        })?;
        keys.sort();
        Ok(self
            .read_many("candidates", &keys)?
            .into_iter()
            .filter(|e| matches!(e.state, State::Pending | State::Unknown))
            .collect())
    }

    fn flush(&self) -> Result<()> {
        durable::flush(self)
    }

    /// Makes this journal in its Redis: stores an identity under `prefix + "journal"` if
    /// none is there (`SET NX`: safe to run from many processes at once). True when it
    /// made the journal, false when the journal was there.
    fn create(&self) -> Result<bool> {
        let new = format!("fxpay-journal:{}", uuid::Uuid::new_v4());
        let (made, stored): (Option<String>, Option<String>) =
            self.with_conn("create", true, |c| {
                let made = redis::cmd("SET")
                    .arg(&self.id_key)
                    .arg(&new)
                    .arg("NX")
                    .query(c)?;
                let stored = redis::cmd("GET").arg(&self.id_key).query(c)?;
                Ok((made, stored))
            })?;
        let Some(stored) = stored else {
            return Err(Error::journal(format!(
                "RedisJournal.create(): the identity key {} vanished as it was made",
                texts::repr(&self.id_key)
            )));
        };
        let stored = Arc::new(stored);
        let before = self
            .id
            .compare_and_swap(&None::<Arc<String>>, Some(stored.clone()));
        match &*before {
            Some(mine) if **mine != *stored => Err(self.not_this_journal(&stored)),
            _ => Ok(made.is_some()),
        }
    }

    /// The entries of `keys` that exist (a payout's progress, a lease check), after
    /// checking that this is still the journal this process opened.
    fn entries(&self, keys: Option<&[String]>) -> Result<Vec<Entry>> {
        let Some(keys) = keys else {
            return Err(Error::journal("RedisJournal cannot list its entries"));
        };
        self.check_still_here("entries")?;
        self.read_many("entries", keys)
    }

    /// What this process's side of the journal holds, for tests and support:
    /// `writes_waiting` (claims queued for the next commit), `results_waiting` (results
    /// waiting or being written), `connected` (1 if this process has a connection),
    /// `identity` (the journal's, read on first use).
    fn diagnostic(&self, name: &str, _value: Option<i64>) -> Result<String> {
        let here = self.here();
        Ok(match name {
            "writes_waiting" => self.group.get_or_make(Group::default).waiting().to_string(),
            "results_waiting" => here.later.entries().len().to_string(),
            "connected" => u8::from(lock(&here.conn).is_some()).to_string(),
            "identity" => (*self.identity("get")?).clone(),
            _ => {
                return Err(Error::InvalidRequest(format!(
                    "RedisJournal: {name:?} cannot be read here"
                )))
            }
        })
    }

    /// Run by the thread about to fork: takes what the child inherits (the results waiting,
    /// to read). No thread of the parent's is in the child, and the child makes its own
    /// connection and queues: nothing the parent holds is touched there.
    fn before_fork(&self) {
        self.shared.before_fork(self.here().later.for_child());
    }

    fn after_fork_in_parent(&self) {
        self.shared.after_fork_in_parent();
    }
}

/// `fxpay.RedisJournal`'s storage: the journal under `prefix` in the Redis at `url`
/// (`redis://`, `unix://`), no connection made yet. `timeout` bounds connecting and each
/// command; `delay`, how long a result may wait for a claim's commit. `result_waits` is
/// called once per process when its first result waits, `not_recorded(key, result)` for a
/// result that found its key changed otherwise, `warn(message)` once per kind of warning
/// about the server. A URL it cannot use is a `Configuration` error.
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // see `Hooks`
pub fn redis_store(
    url: &str,
    prefix: &str,
    require_persistence: bool,
    timeout: Duration,
    delay: Duration,
    result_waits: Box<dyn Fn() + Send + Sync>,
    not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
    warn: Box<dyn Fn(&str) + Send + Sync>,
) -> Result<Arc<dyn JournalStore>> {
    let store = RedisStore::open(
        url,
        prefix,
        require_persistence,
        timeout,
        delay,
        result_waits,
        not_recorded,
        warn,
    )?;
    Ok(store)
}

/// The claim and swap scripts (Lua) every Redis journal runs, Python's over a client given
/// too.
pub fn redis_scripts() -> (&'static str, &'static str) {
    (texts::CLAIM, texts::SWAP)
}

#[cfg(test)]
mod tests;

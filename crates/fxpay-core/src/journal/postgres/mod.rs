//! `fxpay.PostgresJournal`'s storage (a journal made from a connection string), below the
//! `JournalStore` port: a keyed call on a PostgreSQL journal never climbs into Python (issue
//! 55's decision, issue 56's cost).
//!
//! - `connection`: a connection made and checked the journal's way, driven by its caller;
//! - `statements`: the SQL, on the table as PostgreSQL resolved it;
//! - `texts`: the journal's refusals;
//! - the journal's `group_commit` (the claims of concurrent calls, and the results waiting,
//!   in one message of several statements: one transaction, one commit, one WAL flush) and
//!   `later` (a call's result rides the next commit), shared with the other durable stores.
//!
//! The table and its rows are `fxpay.postgres_journal`'s: fxpay versions, Django's journal
//! and processes of either share a journal.
//!
//! Per process: up to four connections and the results waiting, shared by every store of the
//! same place (connection string and table) in the process, and a queue of claims per store;
//! a forked child makes its own on first use and never touches its parent's.
mod connection;
mod statements;
mod texts;

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
use connection::{Conn, Failed, Values};
use futures_util::future::BoxFuture;
use statements::{Statements, IDENTITY_KEY};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio_postgres::types::ToSql;

/// What a PostgreSQL journal tells its owner (the Python `PostgresJournal`), rarely: once
/// per process when its first result waits (the exit writes it, `flush_all`), and a result
/// that found its key changed otherwise (logged, with the id, for `resolve`).
// The callbacks' types are spelled out: an alias would be one more public item.
#[allow(clippy::type_complexity)]
struct Hooks {
    result_waits: Box<dyn Fn() + Send + Sync>,
    not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
}

/// Connections a process opens at most (as many calls run at once; each call uses one).
const MAX_CONNECTIONS: usize = 4;
/// A connection unused this long is asked a `SELECT 1` before its next statement.
const IDLE: Duration = Duration::from_secs(1);
/// How many keys one read names.
const CHUNK: usize = 1000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The values behind these locks are replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connections of a process: the free ones, and how many there are in all.
#[derive(Default)]
struct Pool {
    state: Mutex<(Vec<Conn>, usize)>,
    freed: Condvar,
}

/// One process's side of a place.
struct Here {
    pool: Pool,
    later: Later,
    /// Whether `Hooks::result_waits` was called in this process.
    hooked: AtomicBool,
}

static PLACES: Places<Here> = Places::new();
pub(super) static HOLDING: Holding<PostgresStore> = Holding::new();

/// A journal's storage in a PostgreSQL table, shared by every process and machine that
/// reaches it. A pending key's holder is gone only once its lease lapses.
pub(crate) struct PostgresStore {
    place: String,
    config: tokio_postgres::Config,
    /// The table as given (`name` or `schema.name`), and its parts.
    table: String,
    parts: Vec<String>,
    timeout: Duration,
    delay: Duration,
    hooks: Hooks,
    /// The journal this process opened (read on first use, or made by `create`): its
    /// statements and identity. Every claim runs only where that identity row still is.
    /// Read and set without a lock (a lock another thread held at a fork would stay held
    /// in the child).
    opened: ArcSwapOption<Statements>,
    shared: Arc<Place<Here>>,
    /// This store's claims waiting for their commit, per process.
    group: PerProcess<Group>,
    me: Weak<PostgresStore>,
}

impl PostgresStore {
    /// The journal in `table` of the PostgreSQL that `conninfo` (a libpq connection string
    /// or URL, without TLS) names; no connection is made yet. A conninfo or table it cannot
    /// use is a `Configuration` error (which never repeats the conninfo: it may hold a
    /// password).
    fn open(
        conninfo: &str,
        table: &str,
        timeout: Duration,
        delay: Duration,
        hooks: Hooks,
    ) -> Result<Arc<PostgresStore>> {
        let parts = statements::table_parts(table)?;
        let config: tokio_postgres::Config = conninfo.parse().map_err(|_| {
            Error::Configuration(
                "conninfo is not a libpq connection string or URL (host=... dbname=..., postgresql://...)".into(),
            )
        })?;
        if !matches!(
            config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable | tokio_postgres::config::SslMode::Prefer
        ) {
            return Err(Error::Configuration(
                "PostgresJournal's store in fxpay's core connects without TLS: a conninfo with sslmode=require \
                 is used through psycopg"
                    .into(),
            ));
        }
        let place = format!("postgres:{conninfo}:{table}");
        let shared = PLACES.of(&place);
        Ok(Arc::new_cyclic(|me| PostgresStore {
            place,
            config,
            table: table.to_owned(),
            parts,
            timeout,
            delay,
            hooks,
            opened: ArcSwapOption::empty(),
            shared,
            group: PerProcess::empty(),
            me: me.clone(),
        }))
    }

    fn here(&self) -> &Here {
        self.shared.here(|inherited| Here {
            pool: Pool::default(),
            later: Later::with_inherited(inherited),
            hooked: AtomicBool::new(false),
        })
    }

    fn failed(&self, what: &str, f: Failed) -> Error {
        match f {
            Failed::Refused(text) => Error::journal(text),
            Failed::Pg(e) => Error::journal(texts::failed(what, &self.table, &self.server(), &e)),
            Failed::TimedOut(d) => Error::journal(format!(
                "PostgresJournal.{what}() failed: the server did not answer within {:.1} s (its statement timeout \
                 did not end the statement either)",
                d.as_secs_f64()
            )),
        }
    }

    /// Where the server is, as the errors say it (`host:port`, each host).
    fn server(&self) -> String {
        let ports = self.config.get_ports();
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                match h {
                    tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
                    #[cfg(unix)]
                    tokio_postgres::config::Host::Unix(dir) => {
                        format!("{}/.s.PGSQL.{port}", dir.display())
                    }
                }
            })
            .collect();
        hosts.join(", ")
    }

    // -- the pool ------------------------------------------------------------------------

    /// A connection for one call: a free one (asked a `SELECT 1` first if it sat unused for
    /// [`IDLE`], and made anew if the server closed it meanwhile: a write never goes out on
    /// a connection known to be dead), else a new one while there are fewer than
    /// [`MAX_CONNECTIONS`], else the first one given back (within `timeout`).
    fn checkout(&self, what: &str) -> Result<Conn> {
        let pool = &self.here().pool;
        let deadline = Instant::now() + self.timeout;
        let mut st = lock(&pool.state);
        loop {
            if let Some(mut c) = st.0.pop() {
                drop(st);
                let alive = !c.closed_by_server()
                    && (c.used.elapsed() <= IDLE || c.run("SELECT 1", self.timeout).is_ok());
                if alive {
                    return Ok(c);
                }
                drop(c); // dead: its place is taken by a new one
                return self.fresh(what);
            }
            if st.1 < MAX_CONNECTIONS {
                st.1 += 1;
                drop(st);
                return self.fresh(what);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::journal(format!(
                    "PostgresJournal.{what}() failed: its {MAX_CONNECTIONS} connections were busy for {} s",
                    self.timeout.as_secs_f64()
                )));
            }
            st = pool
                .freed
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// A new connection in a place of the pool already counted (given up if it fails).
    fn fresh(&self, what: &str) -> Result<Conn> {
        connection::connect(&self.config, self.timeout).map_err(|f| {
            self.discard(None);
            self.failed(what, f)
        })
    }

    fn checkin(&self, c: Conn) {
        let pool = &self.here().pool;
        lock(&pool.state).0.push(c);
        pool.freed.notify_one();
    }

    /// Drops `c` (a connection that failed) and frees its place.
    fn discard(&self, c: Option<Conn>) {
        drop(c);
        let pool = &self.here().pool;
        let mut st = lock(&pool.state);
        st.1 = st.1.saturating_sub(1);
        drop(st);
        pool.freed.notify_one();
    }

    /// Runs `f` on a connection of this process. A connection that failed is dropped (the
    /// next call makes a new one); one the server answered with an error is kept. A read
    /// whose connection failed is run once more on a new one; a write never is (it may have
    /// reached the server: the caller fails closed, and the core undoes a claim that
    /// landed).
    fn with_conn<T>(
        &self,
        what: &str,
        read: bool,
        mut f: impl FnMut(&mut Conn) -> std::result::Result<T, Failed>,
    ) -> Result<T> {
        let mut tries = if read { 2 } else { 1 };
        loop {
            tries -= 1;
            let mut c = self.checkout(what)?;
            match f(&mut c) {
                Ok(v) => {
                    self.checkin(c);
                    return Ok(v);
                }
                Err(e) if e.answered() => {
                    self.checkin(c);
                    return Err(self.failed(what, e));
                }
                Err(e) => {
                    self.discard(Some(c));
                    if tries == 0 {
                        return Err(self.failed(what, e));
                    }
                }
            }
        }
    }

    /// The rows of one query, sent as text (the rare ones).
    fn query(&self, what: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        self.with_conn(what, true, |c| c.query(sql, self.timeout))
    }

    /// The rows of a prepared statement run with `values`.
    fn rows(
        &self,
        what: &str,
        sql: &str,
        values: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Vec<Option<String>>>> {
        self.with_conn(what, true, |c| c.rows(sql, values, self.timeout))
    }

    /// The stored identity row's text (`st`'s table).
    fn stored_identity(&self, what: &str, st: &Statements) -> Result<Option<String>> {
        Ok(first(self.rows(what, &st.get, &[&IDENTITY_KEY])?))
    }

    // -- the journal this process opened --------------------------------------------------

    /// The journal this process opened: read on first use. A missing table, a table with no
    /// identity row, or one whose identity names another table (a copy) is refused: opening
    /// never creates a journal.
    fn opened(&self, what: &str) -> Result<Arc<Statements>> {
        if let Some(st) = self.opened.load_full() {
            return Ok(st);
        }
        let rows = self.query(what, &statements::resolve(&self.parts)?)?;
        let Some(row) = rows.first() else {
            return Err(Error::journal(texts::no_table(&self.table)));
        };
        let at = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
        let (schema, name) = (at(0), at(1));
        let probe = Statements::new(&schema, &name, String::new());
        let Some(ident) = self.stored_identity(what, &probe)? else {
            return Err(Error::journal(texts::no_identity_row(&probe.name)));
        };
        let made_in = statements::identity_table(&ident);
        if made_in.as_deref() != Some(probe.name.as_str()) {
            return Err(Error::journal(texts::made_elsewhere(
                &probe.name,
                made_in.as_deref(),
            )));
        }
        // The first identity read stands: another thread may have read it first.
        let fresh = Arc::new(Statements::new(&schema, &name, ident));
        let before = self
            .opened
            .compare_and_swap(&None::<Arc<Statements>>, Some(fresh.clone()));
        Ok((*before).clone().unwrap_or(fresh))
    }

    fn refusal(st: &Statements, stored: Option<&str>) -> Error {
        Error::journal(match stored {
            None => texts::gone(&st.name),
            Some(_) => texts::another(&st.name),
        })
    }

    /// For the readings people act on (`unknown()`, a payout's progress): the journal this
    /// process opened is still the one stored, so an emptied table never reads as a
    /// journal with nothing open.
    fn still_here(&self, what: &str) -> Result<Arc<Statements>> {
        let st = self.opened(what)?;
        match self.stored_identity(what, &st)? {
            Some(s) if s == st.ident => Ok(st),
            other => Err(Self::refusal(&st, other.as_deref())),
        }
    }

    fn entry(text: &str) -> Result<Entry> {
        Entry::from_json(text).map_err(Error::journal)
    }

    /// The entries of `keys` that exist, each as this process reads it (1,000 a query).
    fn read_many(&self, what: &str, st: &Statements, keys: &[String]) -> Result<Vec<Entry>> {
        let later = &self.here().later;
        let mut out = Vec::new();
        for part in keys.chunks(CHUNK) {
            // This process's results, looked up before the read: one that lands in between
            // is in what was read (after it, it would be in neither, and read pending).
            let mine: Vec<Option<Entry>> = part.iter().map(|k| later.get(k)).collect();
            let mut found = pairs(self.rows(what, &st.get_many, &[&part])?);
            for (k, mine) in part.iter().zip(mine) {
                if let Some(t) = found.remove(k) {
                    out.extend(later.news_given(Some(Self::entry(&t)?), mine));
                }
            }
        }
        Ok(out)
    }

    // -- the group commit ----------------------------------------------------------------

    /// Sends `writes` as one message of statements (one transaction, one commit, one WAL
    /// flush), in key order (two processes' commits never wait for each other in a circle);
    /// each gets its row count, or every one the error that kept the transaction from
    /// committing.
    fn transaction(&self, mut writes: Vec<&Arc<Write>>) {
        let st = match self.opened("claim") {
            Ok(st) => st,
            Err(e) => {
                let text = e.to_string();
                for w in writes {
                    w.answer(Err(text.clone()));
                }
                return;
            }
        };
        writes.sort_by(|a, b| key_of(&a.op).cmp(key_of(&b.op)));
        let mut sent: Vec<&Arc<Write>> = Vec::with_capacity(writes.len());
        let mut statements: Vec<(&str, Values<'_>)> = Vec::with_capacity(writes.len());
        for w in writes {
            match &w.op {
                Op::Claim {
                    key,
                    state,
                    result,
                    text,
                } => statements.push((
                    &st.claim,
                    vec![
                        Some(key),
                        Some(state),
                        result.as_deref(),
                        Some(text),
                        Some(IDENTITY_KEY),
                        Some(&st.ident),
                    ],
                )),
                Op::Swap {
                    key,
                    state,
                    result,
                    text,
                    old,
                } => statements.push((
                    &st.swap,
                    vec![
                        Some(state),
                        result.as_deref(),
                        Some(text),
                        Some(key),
                        Some(old),
                    ],
                )),
                Op::Nothing => continue,
            }
            sent.push(w);
        }
        if sent.is_empty() {
            return;
        }
        let what = if sent.iter().any(|w| matches!(w.op, Op::Claim { .. })) {
            "claim"
        } else {
            "swap"
        };
        match self.with_conn(what, false, |c| c.write_all(&statements, self.timeout)) {
            Ok(counts) if counts.len() == sent.len() => {
                for (w, n) in sent.iter().zip(counts) {
                    w.answer(Ok(usize::from(n == 1)));
                }
            }
            Ok(_) => {
                for w in sent {
                    w.answer(Err(format!(
                        "PostgresJournal.{what}() failed: the server's answers do not match the statements"
                    )));
                }
            }
            Err(e) => {
                let text = e.to_string();
                for w in sent {
                    w.answer(Err(text.clone()));
                }
            }
        }
    }

    /// `create`'s statements, in one transaction on `c`: whether the identity was there,
    /// and the statements on the table (its identity included).
    fn make(&self, c: &mut Conn) -> Result<(bool, Statements)> {
        let t = self.timeout;
        let fail = |f: Failed| self.failed("create", f);
        let one = |c: &mut Conn, sql: &str| -> Result<Option<String>> {
            let rows = c.query(sql, t).map_err(fail)?;
            Ok(rows
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next().flatten()))
        };
        c.run("BEGIN", t).map_err(fail)?;
        let lock_key = statements::literal(&format!("fxpay_journal:{}", self.table))?;
        c.run(
            &format!("SELECT pg_advisory_xact_lock(hashtext({lock_key}))"),
            t,
        )
        .map_err(fail)?;
        let name = self.parts[self.parts.len() - 1].clone();
        let schema = if self.parts.len() == 2 {
            self.parts[0].clone()
        } else {
            let quoted = statements::literal(&statements::ident(&name))?;
            let found = one(
                c,
                &format!(
                    "SELECT coalesce((SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE c.oid = to_regclass({quoted})), current_schema())"
                ),
            )?;
            found.ok_or_else(|| {
                Error::journal(
                    "PostgresJournal.create(): no schema to make the table in (the search path names none that \
                     exists): give the table schema-qualified, PostgresJournal(table='schema.name')",
                )
            })?
        };
        let probe = Statements::new(&schema, &name, String::new());
        let qualified = statements::literal(&format!(
            "{}.{}",
            statements::ident(&schema),
            statements::ident(&name)
        ))?;
        let exists = one(
            c,
            &format!("SELECT 1 FROM pg_class WHERE oid = to_regclass({qualified})"),
        )?
        .is_some();
        let identity = |c: &mut Conn| -> Result<Option<String>> {
            Ok(first(
                c.rows(&probe.get, &[&IDENTITY_KEY], t).map_err(fail)?,
            ))
        };
        let had = exists && identity(c)?.is_some();
        for statement in statements::ddl(&schema, &name)? {
            c.run(&statement, t).map_err(fail)?;
        }
        let ident = identity(c)?.unwrap_or_default();
        c.run("COMMIT", t).map_err(fail)?;
        Ok((had, Statements::new(&schema, &name, ident)))
    }
}

/// The first value of the first row.
fn first(rows: Vec<Vec<Option<String>>>) -> Option<String> {
    rows.into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
}

/// Rows of (key, text), as a map.
fn pairs(rows: Vec<Vec<Option<String>>>) -> HashMap<String, String> {
    rows.into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            Some((r.next()??, r.next()??))
        })
        .collect()
}

/// The key a write is on.
fn key_of(op: &Op) -> &str {
    match op {
        Op::Claim { key, .. } | Op::Swap { key, .. } => key,
        Op::Nothing => "",
    }
}

impl Durable for PostgresStore {
    fn group(&self) -> &Group {
        self.group.get_or_make(Group::default)
    }

    fn later(&self) -> &Later {
        &self.here().later
    }

    /// The stored text and entry of `key`.
    fn read(&self, key: &str) -> Result<Option<(String, Entry)>> {
        let st = self.opened("get")?;
        first(self.rows("get", &st.get, &[&key])?)
            .map(|t| Self::entry(&t).map(|e| (t, e)))
            .transpose()
    }

    /// Runs `op` in the next group commit; its count once PostgreSQL committed.
    fn write(&self, op: Op) -> Result<usize> {
        durable::write(self, op)
    }

    fn commit(&self, writes: &[&Arc<Write>]) {
        self.transaction(writes.to_vec());
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

impl JournalStore for PostgresStore {
    fn get(&self, key: &str) -> Result<Option<Entry>> {
        durable::get_then(self, key, || {})
    }

    /// The claim reaches the table even when this process holds the key's result: the
    /// identity is checked with every claim (a TRUNCATE under a live process is caught).
    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        let text = entry.to_json();
        for _ in 0..16 {
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
            // Whatever is stored is another call's, even if equal to `entry`.
            let later = &self.here().later;
            let mine = later.get(&entry.key); // before the read, as `get`
            let st = self.opened("claim")?;
            let both = [entry.key.as_str(), IDENTITY_KEY];
            let found = pairs(self.rows("claim", &st.get_many, &[&&both[..]])?);
            match found.get(IDENTITY_KEY) {
                Some(s) if *s == st.ident => {}
                other => return Err(Self::refusal(&st, other.map(String::as_str))),
            }
            if let Some(t) = found.get(&entry.key) {
                // A result of this process still on its way to the table is the key's news.
                return Ok(later.news_given(Some(Self::entry(t)?), mine));
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
        durable::claim_queued(&self.me, entry, gathered, || true)
    }

    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        durable::swap(self, "PostgresJournal", old, new)
    }

    fn find(&self, result: &str) -> Result<Option<Entry>> {
        if let Some(got) = durable::find_waiting(self, result, |k| self.get(k))? {
            return Ok(Some(got));
        }
        let st = self.opened("find")?;
        first(self.rows("find", &st.find, &[&result])?)
            .map(|t| Self::entry(&t))
            .transpose()
    }

    fn holders(&self) -> &dyn HolderCheck {
        &LeaseOnly
    }

    /// A call's result is kept for the next commit (in memory).
    fn swap_at_once(&self, old: &Entry, new: &Entry) -> bool {
        durable::swap_at_once(self, old, new)
    }

    /// Every entry that is `pending` or `unknown`, oldest first (a key whose result waits
    /// here to be written is done, not listed).
    fn candidates(&self) -> Result<Vec<Entry>> {
        let st = self.still_here("candidates")?;
        let later = &self.here().later;
        // Looked up before the read, as `get`.
        let mut mine: HashMap<String, Entry> = later
            .entries()
            .into_iter()
            .map(|e| (e.key.clone(), e))
            .collect();
        let mut out = Vec::new();
        for row in self.rows("candidates", &st.candidates, &[])? {
            let mut r = row.into_iter();
            let (Some(Some(key)), Some(Some(text))) = (r.next(), r.next()) else {
                continue;
            };
            let news = later.news_given(Some(Self::entry(&text)?), mine.remove(&key));
            out.extend(news.filter(|e| matches!(e.state, State::Pending | State::Unknown)));
        }
        Ok(out)
    }

    fn flush(&self) -> Result<()> {
        durable::flush(self)
    }

    /// Writes the results waiting, then closes this process's free connections (made anew
    /// on next use).
    fn close(&self) -> Result<()> {
        let flushed = self.flush();
        let pool = &self.here().pool;
        let free: Vec<Conn> = {
            let mut st = lock(&pool.state);
            let free = std::mem::take(&mut st.0);
            st.1 = st.1.saturating_sub(free.len());
            free
        };
        pool.freed.notify_all();
        for c in free {
            c.close();
        }
        flushed
    }

    /// Makes the journal: its table, indexes and identity row, where they are missing, in
    /// one transaction under an advisory lock (processes that run it together do not trip
    /// over each other). An unqualified name that the search path already resolves to a
    /// table is that table. True when it made the identity, false when the journal was
    /// there.
    fn create(&self) -> Result<bool> {
        let mut c = self.checkout("create")?;
        let made = self.make(&mut c);
        let (had, st) = match made {
            Ok(v) => {
                self.checkin(c);
                v
            }
            Err(e) => {
                self.discard(Some(c)); // and with it the transaction
                return Err(e);
            }
        };
        let st = Arc::new(st);
        let before = self
            .opened
            .compare_and_swap(&None::<Arc<Statements>>, Some(st.clone()));
        match &*before {
            Some(mine) if mine.ident != st.ident => Err(Self::refusal(mine, Some(&st.ident))),
            _ => Ok(!had),
        }
    }

    /// The entries of `keys` that exist (a payout's progress, a lease check), after
    /// checking that this is still the journal this process opened.
    fn entries(&self, keys: Option<&[String]>) -> Result<Vec<Entry>> {
        let Some(keys) = keys else {
            return Err(Error::journal("PostgresJournal cannot list its entries"));
        };
        let st = self.still_here("entries")?;
        self.read_many("entries", &st, keys)
    }

    /// What this process's side of the journal holds, for tests and support:
    /// `writes_waiting` (claims queued for the next commit), `results_waiting` (results
    /// waiting or being written), `connections` (this process's), `identity` (the
    /// journal's, read on first use), `backend` (the server process of a connection of
    /// this process, as `pg_backend_pid()`), `idle` (set with a value: milliseconds a
    /// connection may sit unused before it is checked; read: [`IDLE`]'s).
    fn diagnostic(&self, name: &str, _value: Option<i64>) -> Result<String> {
        let here = self.here();
        Ok(match name {
            "writes_waiting" => self.group.get_or_make(Group::default).waiting().to_string(),
            "results_waiting" => here.later.entries().len().to_string(),
            "connections" => lock(&here.pool.state).1.to_string(),
            "identity" => self.opened("get")?.ident.clone(),
            "backend" => first(self.query("get", "SELECT pg_backend_pid()")?).unwrap_or_default(),
            "synchronous_commit" => {
                first(self.query("get", "SHOW synchronous_commit")?).unwrap_or_default()
            }
            _ => {
                return Err(Error::InvalidRequest(format!(
                    "PostgresJournal: {name:?} cannot be read here"
                )))
            }
        })
    }

    /// Run by the thread about to fork: takes what the child inherits (the results waiting,
    /// to read). No thread of the parent's is in the child, and the child makes its own
    /// connections and queues: nothing the parent holds is touched there.
    fn before_fork(&self) {
        self.shared.before_fork(self.here().later.for_child());
    }

    fn after_fork_in_parent(&self) {
        self.shared.after_fork_in_parent();
    }
}

/// `fxpay.PostgresJournal`'s storage: the journal in `table` of the PostgreSQL that
/// `conninfo` names (a libpq connection string or URL, without TLS), no connection made yet.
/// `timeout` bounds connecting and each statement; `delay`, how long a result may wait for
/// a claim's commit. `result_waits` is called once per process when its first result waits,
/// `not_recorded(key, result)` for a result that found its key changed otherwise.
#[allow(clippy::type_complexity)] // see `Hooks`
pub fn postgres_store(
    conninfo: &str,
    table: &str,
    timeout: Duration,
    delay: Duration,
    result_waits: Box<dyn Fn() + Send + Sync>,
    not_recorded: Box<dyn Fn(&str, Option<&str>) + Send + Sync>,
) -> Result<Arc<dyn JournalStore>> {
    let store = PostgresStore::open(
        conninfo,
        table,
        timeout,
        delay,
        Hooks {
            result_waits,
            not_recorded,
        },
    )?;
    Ok(store)
}

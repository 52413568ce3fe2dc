//! A connection made the journal's way, and driven by its caller: each connection has an
//! event loop of its own with no thread (a current-thread tokio runtime), which the thread
//! running a statement polls until the answer is in. No thread hop per statement, and a
//! forked child never touches it (the store keeps it per process).
//!
//! Made with the journal's timeout on connecting (`connect_timeout`) and on a peer that
//! vanished (`tcp_user_timeout`), unless the conninfo sets them; each statement is bounded
//! by the server (`statement_timeout`) and by the caller (`timeout` and a second more: a
//! server that stalls). Checked before its first statement: a read-only server (a replica in
//! recovery, `transaction_read_only`) is refused; `synchronous_commit = off` is set `on` (a
//! claim reaches the server's WAL before its request is sent), and
//! `standard_conforming_strings` `on` (the literals of `statements`).
use super::texts;
use futures_util::future::join_all;
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage, Statement};

/// One statement's values (text, or NULL).
pub(crate) type Values<'a> = Vec<Option<&'a str>>;

/// Why a statement or a connection failed.
pub(crate) enum Failed {
    /// The server must not be used: the whole text of the refusal.
    Refused(String),
    /// PostgreSQL or the network failed.
    Pg(tokio_postgres::Error),
    /// No answer within the deadline (the connection is dropped).
    TimedOut(Duration),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Failed::Pg(e)
    }
}

impl Failed {
    /// Whether the connection is still good (the server answered this statement with an
    /// error).
    pub(crate) fn answered(&self) -> bool {
        matches!(self, Failed::Pg(e) if e.as_db_error().is_some_and(|d| {
            matches!(d.parsed_severity(), Some(tokio_postgres::error::Severity::Error))
        }) && !e.is_closed())
    }
}

/// One connection of a process.
pub(crate) struct Conn {
    rt: Runtime,
    client: Client,
    /// The task that drives the connection (it ends when the server closes it).
    task: tokio::task::JoinHandle<()>,
    /// The statements prepared on it, by their text (the server plans each once).
    prepared: HashMap<String, Statement>,
    /// When it last answered.
    pub used: Instant,
}

/// Polls `f` on `rt` in this thread. On a worker of fxpay's runtime (never the case for a
/// store's call, which runs on the blocking pool or the caller's thread), the worker hands
/// its tasks over first.
fn block<F: Future>(rt: &Runtime, f: F) -> F::Output {
    tokio::task::block_in_place(|| rt.block_on(f))
}

/// A connection to `config`, checked. `timeout`: the journal's.
pub(crate) fn connect(config: &Config, timeout: Duration) -> Result<Conn, Failed> {
    let mut config = config.clone();
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(
            timeout.as_secs_f64().ceil().max(2.0) as u64
        ));
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(timeout);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Failed::Refused(format!(
                "PostgresJournal could not start its connection's event loop: {e}"
            ))
        })?;
    let deadline = timeout + Duration::from_secs(1);
    let (client, connection) = block(&rt, async {
        tokio::time::timeout(deadline, config.connect(NoTls)).await
    })
    .map_err(|_| Failed::TimedOut(deadline))??;
    let task = rt.spawn(async move {
        let _ = connection.await;
    });
    let mut c = Conn {
        rt,
        client,
        task,
        prepared: HashMap::new(),
        used: Instant::now(),
    };
    vet(&mut c, timeout)?;
    Ok(c)
}

/// The checks and settings of a new connection.
fn vet(c: &mut Conn, timeout: Duration) -> Result<(), Failed> {
    let millis = timeout.as_millis().clamp(1, 2_000_000_000);
    let rows = c.query(
        &format!(
            "SELECT pg_is_in_recovery()::text, current_setting('transaction_read_only'), \
             current_setting('synchronous_commit'), current_setting('standard_conforming_strings'), \
             set_config('statement_timeout', '{millis}', false)"
        ),
        timeout,
    )?;
    let row = rows.first().cloned().unwrap_or_default();
    let at = |i: usize| row.get(i).and_then(|v| v.as_deref()).unwrap_or("");
    let (recovery, read_only, sync, standard) = (at(0), at(1), at(2), at(3));
    if recovery == "true" || read_only == "on" {
        let why = if recovery == "true" {
            "a replica in recovery"
        } else {
            "transaction_read_only is on"
        };
        return Err(Failed::Refused(texts::read_only(why)));
    }
    let mut set = Vec::new();
    if sync == "off" {
        set.push("SET synchronous_commit = on");
    }
    if standard != "on" {
        set.push("SET standard_conforming_strings = on");
    }
    if !set.is_empty() {
        c.run(&set.join("; "), timeout)?;
    }
    Ok(())
}

impl Conn {
    /// Runs `sql` (one or more statements: more are one transaction): the command tags'
    /// row counts, in order.
    pub(crate) fn run(&mut self, sql: &str, timeout: Duration) -> Result<Vec<u64>, Failed> {
        Ok(self
            .messages(sql, timeout)?
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::CommandComplete(n) => Some(n),
                _ => None,
            })
            .collect())
    }

    /// Runs one query: its rows, each value as text (NULL as None).
    pub(crate) fn query(
        &mut self,
        sql: &str,
        timeout: Duration,
    ) -> Result<Vec<Vec<Option<String>>>, Failed> {
        Ok(self
            .messages(sql, timeout)?
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
                }
                _ => None,
            })
            .collect())
    }

    /// The prepared statements of `sqls`, prepared on first use.
    fn prepare(&mut self, sqls: &[&str], deadline: Duration) -> Result<Vec<Statement>, Failed> {
        for sql in sqls {
            if !self.prepared.contains_key(*sql) {
                let client = &self.client;
                let st = block(&self.rt, async {
                    tokio::time::timeout(deadline, client.prepare(sql)).await
                })
                .map_err(|_| Failed::TimedOut(deadline))??;
                self.prepared.insert((*sql).to_owned(), st);
            }
        }
        Ok(sqls
            .iter()
            .filter_map(|s| self.prepared.get(*s).cloned())
            .collect())
    }

    /// Runs the prepared `sql` with `values`: its rows, each value as text (NULL as None).
    pub(crate) fn rows(
        &mut self,
        sql: &str,
        values: &[&(dyn ToSql + Sync)],
        timeout: Duration,
    ) -> Result<Vec<Vec<Option<String>>>, Failed> {
        let deadline = timeout + Duration::from_secs(1);
        let st = self.prepare(&[sql], deadline)?.remove(0);
        let client = &self.client;
        let rows = block(&self.rt, async {
            tokio::time::timeout(deadline, client.query(&st, values)).await
        })
        .map_err(|_| Failed::TimedOut(deadline))??;
        self.used = Instant::now();
        Ok(rows
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.get::<_, Option<String>>(i))
                    .collect()
            })
            .collect())
    }

    /// Runs the prepared `writes` as one transaction, sent at once (one round trip, one
    /// commit): their row counts, in order. One write alone runs in autocommit. Any
    /// failure fails them all (the transaction is rolled back).
    pub(crate) fn write_all(
        &mut self,
        writes: &[(&str, Values<'_>)],
        timeout: Duration,
    ) -> Result<Vec<u64>, Failed> {
        let deadline = timeout + Duration::from_secs(1);
        let sqls: Vec<&str> = writes.iter().map(|(sql, _)| *sql).collect();
        let statements = self.prepare(&sqls, deadline)?;
        let client = &self.client;
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = writes
            .iter()
            .map(|(_, v)| v.iter().map(|x| x as &(dyn ToSql + Sync)).collect())
            .collect();
        let counts = block(&self.rt, async {
            let run = async {
                if writes.len() == 1 {
                    return client
                        .execute(&statements[0], &params[0])
                        .await
                        .map(|n| vec![n]);
                }
                // Polled in order: BEGIN, the writes, COMMIT go out in one flight.
                let begin = client.batch_execute("BEGIN");
                let each = join_all(
                    statements
                        .iter()
                        .zip(&params)
                        .map(|(st, p)| client.execute(st, p)),
                );
                let commit = client.batch_execute("COMMIT");
                let (b, counts, c) = futures_util::future::join3(begin, each, commit).await;
                b?;
                // A failed write aborts the transaction, and COMMIT then rolls it back.
                let counts = counts.into_iter().collect::<Result<Vec<u64>, _>>()?;
                c?;
                Ok(counts)
            };
            tokio::time::timeout(deadline, run).await
        })
        .map_err(|_| Failed::TimedOut(deadline))??;
        self.used = Instant::now();
        Ok(counts)
    }

    fn messages(
        &mut self,
        sql: &str,
        timeout: Duration,
    ) -> Result<Vec<SimpleQueryMessage>, Failed> {
        let deadline = timeout + Duration::from_secs(1);
        let client = &self.client;
        let out = block(&self.rt, async {
            tokio::time::timeout(deadline, client.simple_query(sql)).await
        })
        .map_err(|_| Failed::TimedOut(deadline))??;
        self.used = Instant::now();
        Ok(out)
    }

    /// Whether the server closed it: anything it sent while the connection sat unused is
    /// read first (a connection in autocommit with nothing running is sent nothing by a
    /// live server, so what it sent is its goodbye: the error it sends as it shuts down or
    /// ends the session, then the end of the stream). The event loop is polled without
    /// waiting, twice: once for the socket's news, once for the connection to read it.
    pub(crate) fn closed_by_server(&self) -> bool {
        if self.client.is_closed() {
            return true;
        }
        block(&self.rt, async {
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
        });
        self.client.is_closed()
    }

    /// Says goodbye to the server (briefly: a server gone is not waited for).
    pub(crate) fn close(self) {
        let Conn {
            rt, client, task, ..
        } = self;
        drop(client); // the task sends `Terminate` and ends
        let _ = block(&rt, async {
            tokio::time::timeout(Duration::from_millis(200), task).await
        });
    }
}

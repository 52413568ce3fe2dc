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
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

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

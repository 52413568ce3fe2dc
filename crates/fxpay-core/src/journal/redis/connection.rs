//! A connection made the journal's way: with the journal's timeout on connect, read and
//! write, and checked before its first command. A replica is refused (its writes are lost at
//! its next resync); with `require_persistence`, a Redis without `appendonly yes` is refused
//! (it forgets every key when it restarts). As every new connection is checked, a Redis
//! restarted with other settings is caught at once. The scripts are loaded on it.
use super::texts;
use redis::{Client, Connection, RedisError, Value};
use std::time::Duration;

/// Why no connection was made.
pub(super) enum Failed {
    /// The server must not be used: the whole text of the refusal.
    Refused(String),
    /// Redis or the network failed.
    Redis(RedisError),
}

impl From<RedisError> for Failed {
    fn from(e: RedisError) -> Self {
        Failed::Redis(e)
    }
}

/// How a connection is made.
pub(super) struct Settings<'a> {
    pub client: &'a Client,
    pub timeout: Duration,
    pub require_persistence: bool,
    /// Logs a warning, once per journal for each `what`.
    pub warn: &'a dyn Fn(&'static str, String),
}

/// How many times a connection interrupted by a signal is made again.
const INTERRUPTED_TRIES: usize = 3;

/// A connection, checked, with the scripts loaded. A signal delivered to the thread that
/// waits in the connect or in a check's read (`EINTR`: the process's own `SIGCHLD`, a
/// profiler's timer) fails it before any command changed anything: it is made again.
pub(super) fn connect(s: &Settings<'_>) -> Result<Connection, Failed> {
    let mut tries = 1;
    loop {
        match connect_once(s) {
            Err(Failed::Redis(e)) if interrupted(&e) && tries < INTERRUPTED_TRIES => tries += 1,
            made => return made,
        }
    }
}

/// Whether `e` is a system call interrupted by a signal. redis keeps the `io::Error`
/// behind an `Arc` it does not hand out as the error's source, so its text says which.
fn interrupted(e: &RedisError) -> bool {
    let eintr = std::io::Error::from_raw_os_error(libc::EINTR).to_string();
    e.is_io_error() && e.to_string().contains(&eintr)
}

fn connect_once(s: &Settings<'_>) -> Result<Connection, Failed> {
    let mut c = s.client.get_connection_with_timeout(s.timeout)?;
    c.set_read_timeout(Some(s.timeout))?;
    c.set_write_timeout(Some(s.timeout))?;
    vet(&mut c, s)?;
    for script in [texts::CLAIM, texts::SWAP] {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script)
            .query::<String>(&mut c)?;
    }
    Ok(c)
}

/// Whether `e` is the server's answer to one command (the connection is still good).
pub(super) fn is_reply(e: &RedisError) -> bool {
    matches!(e.kind(), redis::ErrorKind::Server(_))
}

/// `v` as text (a bulk or simple string).
pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

fn vet(c: &mut Connection, s: &Settings<'_>) -> Result<(), Failed> {
    match redis::cmd("ROLE").query::<Value>(c) {
        Ok(Value::Array(items)) => {
            let role = items.first().and_then(text).unwrap_or_default();
            if !role.is_empty() && role != "master" {
                return Err(Failed::Refused(texts::replica(&role)));
            }
        }
        Ok(_) => {}
        Err(e) if is_reply(&e) => (s.warn)("role", texts::role_unread(&shown(&e))),
        Err(e) => return Err(e.into()),
    }
    if !s.require_persistence {
        return Ok(());
    }
    let reply = match redis::cmd("CONFIG")
        .arg("GET")
        .arg("append*")
        .query::<Value>(c)
    {
        Ok(v) => v,
        Err(e) if is_reply(&e) => {
            (s.warn)("config", texts::config_unread(&shown(&e)));
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let pairs: Vec<(String, String)> = match reply {
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| (text(k).unwrap_or_default(), text(v).unwrap_or_default()))
            .collect(),
        Value::Array(items) => items
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| {
                (
                    text(&p[0]).unwrap_or_default(),
                    text(&p[1]).unwrap_or_default(),
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let setting = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let appendonly = setting("appendonly");
    if appendonly != "yes" {
        return Err(Failed::Refused(texts::forgets(&appendonly)));
    }
    let appendfsync = setting("appendfsync");
    if appendfsync != "always" {
        (s.warn)("fsync", texts::fsync_late(&appendfsync));
    }
    Ok(())
}

/// A server's error reply as redis-py shows it (its code and text).
pub(super) fn shown(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => e.to_string(),
    }
}

/// The kind of failure, named as redis-py names its exceptions (the texts stay Python's).
pub(super) fn kind(e: &RedisError) -> &'static str {
    if e.is_timeout() {
        "TimeoutError"
    } else if is_reply(e) {
        "ResponseError"
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        "ConnectionError"
    } else {
        "RedisError"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    /// Only a system call interrupted by a signal is made again, not a refused or timed-out
    /// connection.
    #[test]
    fn only_an_interrupted_system_call_counts_as_interrupted() {
        let os = |code| RedisError::from(Error::from_raw_os_error(code));
        assert!(interrupted(&os(libc::EINTR)));
        for code in [libc::ECONNREFUSED, libc::ETIMEDOUT, libc::ENOENT] {
            assert!(!interrupted(&os(code)), "{code}");
        }
        assert!(!interrupted(&RedisError::from(Error::from(
            ErrorKind::ConnectionRefused
        ))));
    }
}

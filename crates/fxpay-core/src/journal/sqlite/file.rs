//! The journal's file: a new one made complete (the one place that knows the schema and the
//! application id), that its path still names the file the journal opened first (device and
//! inode), with content, and a connection to it made the journal's way (WAL,
//! `synchronous=FULL`, the table checked, never created by a connection: `fxpay.SqliteJournal`
//! makes a new journal complete under a temporary name, with [`create`], and links it into
//! place before anything opens it).
use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::time::{Duration, Instant};

/// The SQLite `application_id` of an fxpay journal file ("fxpJ").
pub(super) const APPLICATION_ID: i64 = 0x6678_704A;

/// The page size of a new journal file. A commit checksums every page it changes into the
/// WAL (about 4 a keyed call): at SQLite's default 4,096 bytes `walChecksumBytes` counted
/// 11,300 instructions a keyed call, at 2,048 it counts 7,100; more pages split, so a call
/// saves about 2,200 in all (bench/README.md). An entry (0.5-2 KB) still fits in its page
/// (SQLite keeps up to 2,013 bytes of a row there before it spills to an overflow page). A
/// file made earlier keeps its page size: SQLite cannot change it in WAL mode.
pub(super) const PAGE_SIZE: u32 = 2048;

/// The table and its indexes, as a new journal has them. The indexes hold only what they
/// are read for: `find` reads keys by result (a claim has none yet), `candidates` the keys
/// still open. A keyed call's commit then changes 4 pages, not 6 (the claim no longer enters
/// the result index, the result no longer enters the state index): about 6k instructions a
/// keyed call (bench/README.md).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fxpay_journal (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    result TEXT,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS fxpay_journal_result ON fxpay_journal (result) WHERE result IS NOT NULL;
CREATE INDEX IF NOT EXISTS fxpay_journal_open ON fxpay_journal (state) WHERE state IN ('pending', 'unknown');
";

/// What a journal file lacks (an index dropped by hand, say), added when it is opened. A
/// journal made before the indexes were partial keeps its full index on `state`
/// (`fxpay_journal_state`) and on `result`, and no second one is added: a file shared with
/// processes of that version stays as they make it.
fn missing_schema(conn: &Connection) -> rusqlite::Result<()> {
    let has_state_index: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'fxpay_journal_state'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if has_state_index {
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS fxpay_journal_result ON fxpay_journal (result) WHERE result IS NOT NULL;",
        )
    } else {
        conn.execute_batch(SCHEMA)
    }
}

/// A path as Python's `repr` shows it (the journal's messages name it so).
pub(super) fn shown(path: &str) -> String {
    let mut s = String::with_capacity(path.len() + 2);
    s.push('\'');
    for c in path.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\'' => s.push_str("\\'"),
            c => s.push(c),
        }
    }
    s.push('\'');
    s
}

fn what_to_do(path: &str) -> String {
    format!(
        "If {p} is a journal that was emptied or damaged (a restore gone wrong, a bad copy, a full disk), \
         restore it from a backup: a journal started afresh would send every key it held again. \
         If it is not a journal, give SqliteJournal another path.",
        p = shown(path)
    )
}

fn gone(path: &str) -> Error {
    Error::journal(format!(
        "SqliteJournal's file {} was removed while the journal was in use; nothing was sent. \
         A new file there would be an empty journal that sends every key again: restore the journal \
         (from the file this process still has open, or a backup) before any keyed call.",
        shown(path)
    ))
}

fn replaced(path: &str) -> Error {
    Error::journal(format!(
        "SqliteJournal's file {} was replaced by another file while the journal was in use; \
         nothing was sent. Two files would split the journal, and each would send the other's keys again: \
         put the journal back, or restart every process on the new file once it holds every key.",
        shown(path)
    ))
}

/// A file's (device, inode).
#[cfg(unix)]
pub(super) fn identity(st: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (st.dev(), st.ino())
}

/// A file's identity where there is no inode: its creation time only.
#[cfg(not(unix))]
pub(super) fn identity(st: &std::fs::Metadata) -> (u64, u64) {
    let made = st
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    (0, made)
}

/// Before a claim: `path` still names the file with identity `ident`, with content.
pub(super) fn check(path: &str, ident: (u64, u64)) -> Result<()> {
    let st = match std::fs::metadata(path) {
        Ok(st) => st,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(gone(path)),
        Err(e) => {
            return Err(Error::journal(format!(
                "SqliteJournal cannot open {}: {e}",
                shown(path)
            )))
        }
    };
    if identity(&st) != ident {
        return Err(replaced(path));
    }
    if st.len() == 0 {
        return Err(Error::journal(format!(
            "SqliteJournal found {} emptied (0 bytes) while in use; nothing was sent. {}",
            shown(path),
            what_to_do(path)
        )));
    }
    Ok(())
}

/// Makes a new journal in the file at `path`: a new, empty temporary file of
/// `fxpay.SqliteJournal`'s, which links it into place once made (never a journal's own path).
/// The application id, WAL, `synchronous=FULL`, the table and its indexes; then closed, the
/// last connection: the WAL checkpointed into the file and removed. Opened as Python's
/// `sqlite3.connect` opens a file (created if missing, a 5 s busy timeout), and an error is
/// named as `sqlite3` names it (`OperationalError: disk I/O error`): the journal made its new
/// files with `sqlite3` before, and its message is the same.
pub(super) fn create(path: &str) -> Result<()> {
    let made = || -> rusqlite::Result<()> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_EXRESCODE;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        // Before anything is written: the first write fixes the page size.
        conn.execute_batch(&format!("PRAGMA page_size = {PAGE_SIZE}"))?;
        conn.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))?;
        let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous=FULL")?;
        conn.execute_batch(SCHEMA)?;
        conn.close().map_err(|(_, e)| e)
    };
    made().map_err(|e| Error::journal(as_sqlite3_says(path, &e)))
}

/// `e` as Python's `sqlite3` reports it: its exception's name (by the primary result code,
/// as `_pysqlite_seterror` picks it), then SQLite's message.
fn as_sqlite3_says(path: &str, e: &rusqlite::Error) -> String {
    use rusqlite::ffi;
    let Some(code) = e.sqlite_error_code().map(|_| match e {
        rusqlite::Error::SqliteFailure(f, _) => f.extended_code & 0xff,
        _ => ffi::SQLITE_ERROR,
    }) else {
        return format!("DatabaseError: {e}");
    };
    let name = match code {
        ffi::SQLITE_INTERNAL | ffi::SQLITE_NOTFOUND => "InternalError",
        ffi::SQLITE_NOMEM => "MemoryError",
        ffi::SQLITE_ERROR
        | ffi::SQLITE_PERM
        | ffi::SQLITE_ABORT
        | ffi::SQLITE_BUSY
        | ffi::SQLITE_LOCKED
        | ffi::SQLITE_READONLY
        | ffi::SQLITE_INTERRUPT
        | ffi::SQLITE_IOERR
        | ffi::SQLITE_FULL
        | ffi::SQLITE_CANTOPEN
        | ffi::SQLITE_PROTOCOL
        | ffi::SQLITE_EMPTY
        | ffi::SQLITE_SCHEMA => "OperationalError",
        ffi::SQLITE_TOOBIG => "DataError",
        ffi::SQLITE_CONSTRAINT | ffi::SQLITE_MISMATCH => "IntegrityError",
        ffi::SQLITE_MISUSE | ffi::SQLITE_RANGE => "InterfaceError",
        _ => "DatabaseError",
    };
    let text = e.to_string();
    // rusqlite adds the path to a file it cannot open; `sqlite3` does not.
    let text = text.strip_suffix(&format!(": {path}")).unwrap_or(&text);
    format!("{name}: {text}")
}

/// Whether an SQLite error is a lock another connection holds (tried again until the
/// journal's timeout).
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// An SQLite error as the journal reports it.
pub(super) fn failed(what: &str, e: &rusqlite::Error) -> Error {
    let text = e.to_string();
    let full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
    Error::journal(if full && !text.contains("full") {
        format!("SqliteJournal.{what}() failed: the disk is full: {text}")
    } else {
        format!("SqliteJournal.{what}() failed: {text}")
    })
}

fn cannot_open(path: &str, e: &rusqlite::Error) -> Error {
    Error::journal(format!("SqliteJournal cannot open {}: {e}", shown(path)))
}

/// A connection to the journal at `path` (identity `ident`), made the journal's way.
pub(super) fn connect(path: &str, ident: (u64, u64), timeout: Duration) -> Result<Connection> {
    check(path, ident)?;
    // Never created here: a missing file is an error (`check` saw it a moment ago).
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_EXRESCODE;
    let deadline = Instant::now() + timeout.max(Duration::from_secs(1));
    let conn = loop {
        match open(path, flags, timeout) {
            Ok(c) => break c,
            Err(Fail::Sqlite(e)) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(Fail::Sqlite(e))
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) =>
            {
                let size = std::fs::metadata(path).map_or(0, |m| m.len());
                return Err(Error::journal(format!(
                    "SqliteJournal found {} holding {size} bytes that are not an SQLite database, \
                     so not an fxpay journal; it was left as it is. {}",
                    shown(path),
                    what_to_do(path)
                )));
            }
            Err(Fail::Sqlite(e)) => return Err(cannot_open(path, &e)),
            Err(Fail::Journal(e)) => return Err(e),
        }
    };
    // The file SQLite opened is still the one checked (not replaced in between).
    check(path, ident)?;
    Ok(conn)
}

enum Fail {
    Sqlite(rusqlite::Error),
    Journal(Error),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sqlite(e)
    }
}

fn open(path: &str, flags: OpenFlags, timeout: Duration) -> std::result::Result<Connection, Fail> {
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(timeout)?;
    let app_id: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    if app_id != 0 && app_id != APPLICATION_ID {
        return Err(Fail::Journal(Error::journal(format!(
            "SqliteJournal found {} to be another program's SQLite database (application_id {app_id:#x}), \
             not an fxpay journal; it was left as it is. {}",
            shown(path),
            what_to_do(path)
        ))));
    }
    let has_table: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'fxpay_journal'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0;
    if !has_table {
        return Err(Fail::Journal(Error::journal(format!(
            "SqliteJournal found {} to be an SQLite database without an fxpay journal table, \
             so not a journal; it was left as it is. {}",
            shown(path),
            what_to_do(path)
        ))));
    }
    let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    conn.execute_batch("PRAGMA synchronous=FULL")?;
    missing_schema(&conn)?;
    if app_id == 0 {
        conn.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))?;
    }
    Ok(conn)
}

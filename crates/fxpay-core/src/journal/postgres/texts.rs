//! What a PostgreSQL journal says when it refuses: `fxpay.postgres_journal`'s texts.
use crate::journal::redis::texts::repr;
use tokio_postgres::error::SqlState;

/// How a journal is made, and what not to do where one was lost.
pub(crate) fn advice() -> &'static str {
    "A journal is made once, by hand or in a deployment's migration step: PostgresJournal(conninfo).create(), \
     the Django migration (manage.py migrate fxpay_journal), or `python -m fxpay journal create URL`; never at \
     every start-up. If a journal was here and was lost (TRUNCATE, DROP, a restore without it), restore it \
     from a backup first: creating a new one where a journal was lost sends every key it held again. \
     Nothing was sent."
}

pub(crate) fn read_only(why: &str) -> String {
    format!("PostgresJournal: the server is read-only ({why}); the journal needs the primary")
}

pub(crate) fn no_table(table: &str) -> String {
    format!(
        "PostgresJournal found no journal table {}: opening a journal never creates one. {}",
        repr(table),
        advice()
    )
}

pub(crate) fn no_identity_row(name: &str) -> String {
    format!(
        "PostgresJournal found the table {} without a journal's identity row (emptied by TRUNCATE \
         or DELETE, or made by an older fxpay or by hand without it), so it is not taken for a \
         journal. {}",
        repr(name),
        advice()
    )
}

pub(crate) fn made_elsewhere(name: &str, made_in: Option<&str>) -> String {
    let made_in = made_in.map_or_else(|| "None".to_owned(), repr);
    format!(
        "PostgresJournal: the table {} holds the identity of a journal made in {made_in}: a copy, or a \
         table that shadows the journal on the search path, is not the journal. Give \
         PostgresJournal(table={made_in}). Nothing was sent.",
        repr(name)
    )
}

pub(crate) fn gone(name: &str) -> String {
    format!(
        "PostgresJournal's identity row is gone from {} (TRUNCATE, DELETE, or the table dropped \
         and made again): the journal this process opened was lost, and it is not taken for a new one. {}",
        repr(name),
        advice()
    )
}

pub(crate) fn another(name: &str) -> String {
    format!(
        "PostgresJournal: {} now holds another journal than the one this process opened: the journal \
         was lost and made again while this process ran, and its keys are not this journal's. Restart the \
         processes that use it once a person has checked what was lost. Nothing was sent.",
        repr(name)
    )
}

/// What failed, as `PostgresJournal.{what}() failed: ...`, with a hint for the SQLSTATEs met
/// when the journal cannot be used as it is.
pub(crate) fn failed(what: &str, table: &str, server: &str, e: &tokio_postgres::Error) -> String {
    let text = match e.as_db_error() {
        Some(db) => format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text = format!("{text}: {c}");
                cause = c.source();
            }
            format!("{text} (the journal's PostgreSQL at {server})")
        }
    };
    let hint = match e.code() {
        Some(c) if *c == SqlState::UNDEFINED_TABLE => format!(
            " (make the table {} with journal.create(), or the Django migration)",
            repr(table)
        ),
        Some(c) if *c == SqlState::READ_ONLY_SQL_TRANSACTION => {
            " (the server is read-only: the journal needs the primary)".to_owned()
        }
        _ => String::new(),
    };
    format!("PostgresJournal.{what}() failed: {text}{hint}")
}

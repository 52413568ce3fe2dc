//! At a process's exit, and at a payout's end: the results of this process's keyed calls
//! still waiting for their journal's next commit (`later`), written by every durable store
//! that holds some (SQLite's, Redis's, PostgreSQL's).
use super::later;

/// Writes the results waiting in every durable store of this process (the exit's flush; a
/// payout's end). `exiting`: from now on every result is written at once.
pub fn flush_all(exiting: bool) {
    if exiting {
        later::set_exiting();
    }
    super::sqlite::HOLDING.flush_each();
    super::redis::HOLDING.flush_each();
    super::postgres::HOLDING.flush_each();
}

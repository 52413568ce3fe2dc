//! `fxpay._fxpay._postgres_store`: the core's `PostgresStore` for a `fxpay.PostgresJournal`
//! made from a connection string, held as a `_NativeStore` (`journal/native.rs`).
use super::native::{hook, PyNativeStore};
use crate::errors::Fallible;
use pyo3::prelude::*;
use std::time::Duration;

/// The journal in `table` of the PostgreSQL `conninfo` names; no connection is made yet.
/// `result_waits()` and `not_recorded(key, result)` are called back rarely.
#[pyfunction]
pub fn _postgres_store(
    conninfo: &str,
    table: &str,
    timeout: f64,
    delay: f64,
    result_waits: Py<PyAny>,
    not_recorded: Py<PyAny>,
) -> Fallible<PyNativeStore> {
    let waits = hook::<()>(result_waits);
    let lost = hook::<(String, Option<String>)>(not_recorded);
    let store = fxpay_core::postgres_store(
        conninfo,
        table,
        Duration::from_secs_f64(timeout),
        Duration::try_from_secs_f64(delay).unwrap_or(Duration::MAX / 2),
        Box::new(move || waits(())),
        Box::new(move |k: &str, r: Option<&str>| lost((k.to_owned(), r.map(str::to_owned)))),
    )?;
    Ok(PyNativeStore(store))
}

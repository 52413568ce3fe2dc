//! `fxpay._fxpay._redis_store`: the core's `RedisStore` for a `fxpay.RedisJournal` made from
//! a URL, held as a `_NativeStore` (`journal/native.rs`); and the scripts every Redis journal
//! runs (`_redis_scripts`), which Python's own, over a client given, runs too.
use super::native::{hook, PyNativeStore};
use crate::errors::Fallible;
use pyo3::prelude::*;
use std::time::Duration;

/// The journal under `prefix` in the Redis at `url`; no connection is made yet.
/// `result_waits()`, `not_recorded(key, result)` and `warn(message)` are called back rarely.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn _redis_store(
    url: &str,
    prefix: &str,
    require_persistence: bool,
    timeout: f64,
    delay: f64,
    result_waits: Py<PyAny>,
    not_recorded: Py<PyAny>,
    warn: Py<PyAny>,
) -> Fallible<PyNativeStore> {
    let waits = hook::<()>(result_waits);
    let lost = hook::<(String, Option<String>)>(not_recorded);
    let warned = hook::<(String,)>(warn);
    let store = fxpay_core::redis_store(
        url,
        prefix,
        require_persistence,
        Duration::from_secs_f64(timeout),
        Duration::try_from_secs_f64(delay).unwrap_or(Duration::MAX / 2),
        Box::new(move || waits(())),
        Box::new(move |k: &str, r: Option<&str>| lost((k.to_owned(), r.map(str::to_owned)))),
        Box::new(move |m: &str| warned((m.to_owned(),))),
    )?;
    Ok(PyNativeStore(store))
}

/// The claim and swap scripts (Lua), as every Redis journal runs them.
#[pyfunction]
pub fn _redis_scripts() -> (&'static str, &'static str) {
    fxpay_core::redis_scripts()
}

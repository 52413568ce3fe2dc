//! The pyo3 layer: the only place that knows about Python.
mod account;
mod bridge;
mod cassette;
mod client;
mod convert;
mod errors;
mod exit_gate;
mod journal;
mod models;
mod observe;
mod panic_test;
mod payout_outcomes;
mod payout_rows;
mod payout_stream;
mod rate_limit;
mod raw;
mod sandbox;
mod session;
mod store;
mod twin;
mod webhook;

use pyo3::prelude::*;

/// The extension's Rust allocations (requests, responses, futures) use mimalloc: its
/// per-thread heaps suit memory allocated on a runtime thread and freed on Python's.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_arena_eager_commit` (the fifth option of `mi_option_e` in the
/// mimalloc.h that libmimalloc-sys bundles; its Rust bindings do not name it).
#[cfg(feature = "mimalloc")]
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Commits arena memory only as it is used: with mimalloc's default (eager commit), each
/// thread that makes calls kept megabytes more resident (tests/python/client/test_soak.py:
/// +14 MiB after warm-up with 8 threads, +1.4 MiB with this, as with glibc's malloc).
#[cfg(feature = "mimalloc")]
fn tune_allocator() {
    // SAFETY: mi_option_set only records the value, read by later arena allocations.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

/// `gil_used = false`: importing the module on a free-threaded CPython does not turn the GIL
/// back on. What makes that true is written down in docs/interpreters.md.
#[pymodule(gil_used = false)]
#[pyo3(name = "_fxpay")]
fn fxpay_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Importing starts no thread, runtime or socket: they start on first use (and anew in a
    // forked child, which this hook lets fxpay notice).
    #[cfg(feature = "mimalloc")]
    tune_allocator();
    fxpay_core::watch_forks();
    // No thread of fxpay touches Python once the interpreter starts to shut down.
    exit_gate::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<client::Client>()?;
    m.add_class::<session::UserSession>()?;
    m.add_class::<sandbox::CoreSandbox>()?;
    m.add_class::<cassette::CoreCassette>()?;
    models::register(m)?;
    journal::operations::register(m)?;
    panic_test::register(m)?;
    m.add_function(wrap_pyfunction!(webhook::parse_deal_created, m)?)?;
    m.add_class::<rate_limit::RateLimit>()?;
    m.add_class::<raw::RawCapture>()?;
    m.add_class::<payout_stream::PayoutStream>()?;
    m.add_function(wrap_pyfunction!(raw::_raw_arm, m)?)?;
    m.add_function(wrap_pyfunction!(raw::_raw_disarm, m)?)?;
    Ok(())
}

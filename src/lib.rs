//! fxpay: the pure-Rust core. pyo3 lives only in `src/python/` behind the `python` feature.
pub mod api;
pub mod auth;
pub mod config;
pub mod error;
pub mod local_runtime;
pub mod models;
pub mod money;
pub mod runtime;
pub mod sandbox;
pub mod trace;
pub mod transport;
pub mod webhook;

#[cfg(feature = "python")]
mod python;

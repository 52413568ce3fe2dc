//! fxpay: the pure-Rust core. pyo3 lives only in `src/python/` behind the `python` feature.
pub mod api;
pub mod auth;
pub mod cassette;
pub mod cassette_scrub;
pub mod cassette_transport;
pub mod config;
pub mod error;
pub mod fork;
pub mod json_kind;
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

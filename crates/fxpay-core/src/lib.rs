//! fxpay-core: the pure-Rust core of fxpay (client, transport, auth, models, money, webhook,
//! runtime). It knows no pyo3: the binding is the `fxpay-python` crate, the emulator `fxpay-sandbox`.
#![warn(unreachable_pub)]

pub mod auth;
pub mod callback_url;
pub mod cassette;
pub mod client;
pub mod config;
pub mod deadline;
pub mod error;
pub mod gate;
pub mod headers;
pub mod journal;
pub mod json_kind;
pub mod models;
pub mod money;
pub(crate) mod paging;
pub mod rate_limit;
pub mod raw;
pub mod runtime;
pub(crate) mod tls;
pub mod trace;
pub mod transport;
pub mod wakeup;
pub mod webhook;

//! The HTTP side: routes and connections (`server.rs`), request bodies (`body.rs`), the
//! extractors of the API handlers (`extract.rs`), error bodies and the error-code table
//! (`errors.rs`), injected faults (`faults.rs`), the admin API under `/_sandbox/`
//! (`admin.rs`), `/openapi.json` (`openapi.rs`) and the opt-in rate limit (`rate_limit.rs`).
pub mod admin;
pub mod body;
pub mod errors;
pub mod extract;
pub mod faults;
pub mod openapi;
pub mod rate_limit;
pub mod server;

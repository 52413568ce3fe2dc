//! The HTTP side: routes and connections (`server.rs`), request bodies (`body.rs`), the
//! extractors of the API handlers (`extract.rs`), error bodies and the error-code table
//! (`errors.rs`), injected faults (`faults.rs`), the admin API under `/_sandbox/`
//! (`admin.rs`) and `/openapi.json` (`openapi.rs`).
pub mod admin;
pub mod body;
pub mod errors;
pub mod extract;
pub mod faults;
pub mod openapi;
pub mod server;

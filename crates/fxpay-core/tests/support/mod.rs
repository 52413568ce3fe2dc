//! What the integration tests share: a scripted token endpoint on loopback.
#![allow(dead_code)]
pub mod token_server;

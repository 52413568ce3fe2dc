//! What the integration tests share: reading a request off a loopback connection, and a
//! scripted token endpoint.
#![allow(dead_code)]
pub mod http;
pub mod token_server;

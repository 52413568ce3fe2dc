//! Errors of the sandbox's own helpers.

/// Errors of the sandbox's own helpers (`approve`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    #[error("HTTP request to the sandbox failed: {0}")]
    Http(String),
    #[error("the {step} step answered HTTP {status}: {message}")]
    UnexpectedStatus {
        step: &'static str,
        status: u16,
        message: String,
    },
    #[error("login failed: wrong username or password")]
    LoginFailed,
    #[error("the {0} page has no form")]
    MissingForm(&'static str),
    #[error("a redirect without a Location header")]
    MissingLocation,
}

//! One error enum for the whole core. The Python layer maps each variant onto the
//! exception tree defined in `python/fxpay/errors.py`.
use crate::models::field_error::FieldError;

/// Every failure the core can report.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The client was set up wrongly (base URL, redirect URI, proxy, CA bundle...).
    #[error("{0}")]
    Configuration(String),
    /// Refused before any request was sent.
    #[error("{0}")]
    InvalidRequest(String),
    /// The connection failed, or no complete answer arrived.
    /// `unsent`: no byte of the request can have reached the service (the connection was
    /// never opened, or the call failed before its request started), so nothing was done.
    #[error("{message}")]
    Transport {
        message: String,
        timeout: bool,
        unsent: bool,
    },
    /// RFC 6749 section 5.2 errors and `error=` authorization callbacks.
    #[error("{}", oauth_message(.error, .description.as_deref()))]
    OAuth {
        error: String,
        description: Option<String>,
        status: Option<u16>,
        /// The token endpoint's answer's headers (names in lower case), for
        /// `OAuthError.headers` and `.request_id`; empty for a callback's error.
        headers: Vec<(String, String)>,
        /// The token endpoint's answer's body as received, for `OAuthError.body`; None for
        /// an error no answer carried (a callback's).
        body: Option<String>,
    },
    /// The `state` of an authorization callback does not match the one sent.
    #[error("the state returned by the authorization server does not match the one sent")]
    StateMismatch,
    /// The service answered with a non-2xx status.
    #[error("{message}")]
    Api {
        status: u16,
        message: String,
        errors: Vec<FieldError>,
        body: String,
        retry_after: Option<u64>,
        /// The answer's headers (names in lower case), for `ApiError.headers` and
        /// `.request_id`.
        headers: Vec<(String, String)>,
    },
    /// A listing's pages cannot all be fetched: a `next` on another origin, a loop, or a
    /// paging marker that is not a link. The page that said so answered `status`.
    #[error("{message}")]
    Paging {
        status: u16,
        message: String,
        body: String,
        headers: Vec<(String, String)>,
    },
    /// A webhook failed verification (nonce missing or different).
    #[error("{0}")]
    WebhookVerification(String),
    /// A webhook body is not a valid `DealCreated` event.
    #[error("{0}")]
    WebhookPayload(String),
    /// In replay, a request that the client's cassette does not hold.
    #[error("{0}")]
    CassetteMismatch(String),
    /// The idempotency journal refused the call (`kind`), or could not be read or written
    /// (`IdempotencyKind::Journal`). Nothing was sent.
    #[error("{message}")]
    Idempotency {
        kind: IdempotencyKind,
        message: String,
        entry: Option<Box<crate::journal::entry::Entry>>,
        /// What made the outcome unknown (the 5xx, the timeout, the lost connection), for
        /// `__cause__` and the lost answer's request id.
        cause: Option<Box<Error>>,
    },
    /// A bug or an unexpected state inside fxpay (including a caught panic).
    #[error("{0}")]
    Internal(String),
    /// A caller's callback (`on_token`) failed. `raised` carries what it raised, so the
    /// binding can let the same exception out of the call.
    #[error("{message}")]
    Callback {
        message: String,
        raised: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
    },
}

/// Why the journal refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdempotencyKind {
    /// The key was used before for another request.
    KeyReused,
    /// The key's holder is still sending.
    InProgress,
    /// The key's request may have reached the service and its answer was lost.
    OutcomeUnknown,
    /// The journal could not be read or written.
    Journal,
}

fn oauth_message(error: &str, description: Option<&str>) -> String {
    match description {
        Some(d) if !d.is_empty() => format!("{error}: {d}"),
        _ => error.to_string(),
    }
}

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidRequest(msg.into())
    }

    pub fn config(msg: impl Into<String>) -> Self {
        Error::Configuration(msg.into())
    }

    /// The journal could not be read or written.
    pub fn journal(msg: impl Into<String>) -> Self {
        Error::Idempotency {
            kind: IdempotencyKind::Journal,
            message: msg.into(),
            entry: None,
            cause: None,
        }
    }

    /// This error (an idempotency refusal) with `cause`, the error that made it.
    pub(crate) fn with_cause(self, cause: Error) -> Self {
        match self {
            Error::Idempotency {
                kind,
                message,
                entry,
                ..
            } => Error::Idempotency {
                kind,
                message,
                entry,
                cause: Some(Box::new(cause)),
            },
            other => other,
        }
    }

    /// This error, known to have come before any byte of the request was sent.
    pub(crate) fn into_unsent(self) -> Self {
        match self {
            Error::Transport {
                message, timeout, ..
            } => Error::Transport {
                message,
                timeout,
                unsent: true,
            },
            other => other,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

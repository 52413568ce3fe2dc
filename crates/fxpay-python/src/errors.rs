//! Core `Error` -> the Python exceptions of `fxpay.errors`, raised lazily (no GIL needed to
//! build one, so errors can leave async tasks as they are).
use fxpay_core::{Error, FieldError, IdempotencyKind};
use pyo3::prelude::*;

pyo3::import_exception!(fxpay.errors, FxPayError);
pyo3::import_exception!(fxpay.errors, ConfigurationError);
pyo3::import_exception!(fxpay.errors, InvalidRequestError);
pyo3::import_exception!(fxpay.errors, TransportError);
pyo3::import_exception!(fxpay.errors, TimeoutError);
pyo3::import_exception!(fxpay.errors, OAuthError);
pyo3::import_exception!(fxpay.errors, InvalidClientError);
pyo3::import_exception!(fxpay.errors, StateMismatchError);
pyo3::import_exception!(fxpay.errors, ApiError);
pyo3::import_exception!(fxpay.errors, BadRequestError);
pyo3::import_exception!(fxpay.errors, AuthenticationError);
pyo3::import_exception!(fxpay.errors, PermissionDeniedError);
pyo3::import_exception!(fxpay.errors, NotFoundError);
pyo3::import_exception!(fxpay.errors, RateLimitError);
pyo3::import_exception!(fxpay.errors, ServerError);
pyo3::import_exception!(fxpay.errors, PaginationError);
pyo3::import_exception!(fxpay.errors, WebhookVerificationError);
pyo3::import_exception!(fxpay.errors, WebhookPayloadError);
pyo3::import_exception!(fxpay.errors, CassetteMismatchError);
pyo3::import_exception!(fxpay.errors, KeyReusedError);
pyo3::import_exception!(fxpay.errors, InProgressError);
pyo3::import_exception!(fxpay.errors, OutcomeUnknownError);
pyo3::import_exception!(fxpay.errors, JournalError);

/// A `FieldError` on its way to Python, as an entry of `ApiError.errors`. It becomes a
/// `fxpay.FieldError` where that class is declared (`IntoPyObject` in `models/mod.rs`), so this
/// file needs no model.
pub struct PyFieldError(pub FieldError);

/// A journal entry on its way to Python, as `IdempotencyError.entry` (it becomes a
/// `fxpay.JournalEntry` in `journal.rs`).
pub struct PyJournalEntry(pub fxpay_core::Entry);

/// An error on its way out of the binding, as cryptography's `CryptographyError` is: the
/// core's, or a Python exception already made. `?` turns either into it, and pyo3 raises it
/// through `From<Failure> for PyErr`, whose one mapping to the classes of `fxpay.errors` is
/// [`to_pyerr`]. A method that can fail either way returns [`Fallible`].
pub enum Failure {
    Core(Error),
    Py(PyErr),
}

/// The result of a binding function that fails with a core error or a Python exception.
pub type Fallible<T> = Result<T, Failure>;

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Py(e)
    }
}

impl From<std::convert::Infallible> for Failure {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl From<pyo3::CastError<'_, '_>> for Failure {
    fn from(e: pyo3::CastError<'_, '_>) -> Self {
        Failure::Py(e.into())
    }
}

impl From<pythonize::PythonizeError> for Failure {
    fn from(e: pythonize::PythonizeError) -> Self {
        Failure::Py(e.into())
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Core(e) => to_pyerr(e),
            Failure::Py(e) => e,
        }
    }
}

/// Converts a core error into the matching Python exception.
pub fn to_pyerr(e: Error) -> PyErr {
    match e {
        Error::Configuration(m) => ConfigurationError::new_err((m,)),
        Error::InvalidRequest(m) => InvalidRequestError::new_err((m,)),
        Error::Transport {
            message,
            timeout: true,
            ..
        } => TimeoutError::new_err((message,)),
        Error::Transport { message, .. } => TransportError::new_err((message,)),
        e @ Error::OAuth { .. } => {
            let message = e.to_string();
            let Error::OAuth {
                error,
                description,
                status,
                headers,
                body,
            } = e
            else {
                return FxPayError::new_err((message,));
            };
            // Wrong credentials are also an `AuthenticationError`, whatever status said so.
            let invalid_client = error == "invalid_client";
            let args = (message, error, description, status, headers, body);
            if invalid_client {
                InvalidClientError::new_err(args)
            } else {
                OAuthError::new_err(args)
            }
        }
        e @ Error::StateMismatch => StateMismatchError::new_err((e.to_string(),)),
        Error::Api {
            status,
            message,
            errors,
            body,
            retry_after,
            headers,
        } => {
            let errors: Vec<PyFieldError> = errors.into_iter().map(PyFieldError).collect();
            let args = (message, status, errors, body, retry_after, headers);
            match status {
                400 | 422 => BadRequestError::new_err(args),
                401 => AuthenticationError::new_err(args),
                403 => PermissionDeniedError::new_err(args),
                404 => NotFoundError::new_err(args),
                429 => RateLimitError::new_err(args),
                500..=599 => ServerError::new_err(args),
                _ => ApiError::new_err(args),
            }
        }
        Error::Paging {
            status,
            message,
            body,
            headers,
        } => {
            let errors: Vec<PyFieldError> = Vec::new();
            PaginationError::new_err((message, status, errors, body, None::<u64>, headers))
        }
        Error::WebhookVerification(m) => WebhookVerificationError::new_err((m,)),
        Error::WebhookPayload(m) => WebhookPayloadError::new_err((m,)),
        Error::CassetteMismatch(m) => CassetteMismatchError::new_err((m,)),
        Error::Idempotency {
            kind,
            message,
            entry,
            cause,
        } => {
            // The lost answer's request id (a 5xx's), what support asks for.
            let request_id = cause.as_deref().and_then(answer_request_id);
            let args = (message, entry.map(|e| PyJournalEntry(*e)), request_id);
            let err = match kind {
                IdempotencyKind::KeyReused => KeyReusedError::new_err(args),
                IdempotencyKind::InProgress => InProgressError::new_err(args),
                IdempotencyKind::OutcomeUnknown => OutcomeUnknownError::new_err(args),
                IdempotencyKind::Journal => JournalError::new_err(args),
            };
            match cause {
                // `__cause__`: the 5xx, the timeout or the lost connection behind it.
                Some(c) => crate::exit_gate::attach(|py| {
                    err.set_cause(py, Some(to_pyerr(*c)));
                    err.clone_ref(py)
                })
                .unwrap_or(err),
                None => err,
            }
        }
        Error::Internal(m) => FxPayError::new_err((m,)),
        Error::Callback { message, raised } => {
            match raised.as_deref().and_then(|r| r.downcast_ref::<PyErr>()) {
                // The callback's own exception, as it raised it.
                Some(e) => Python::attach(|py| e.clone_ref(py)),
                None => FxPayError::new_err((message,)),
            }
        }
    }
}

/// Runs a synchronous piece of the binding, turning a panic into an `FxPayError`.
pub fn guard<T>(f: impl FnOnce() -> Result<T, Error>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(panic_message(payload)))
        .map_err(to_pyerr)
}

/// A panic payload as text.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> Error {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    Error::Internal(format!(
        "internal error in fxpay (a Rust panic was caught): {text}"
    ))
}

/// The `ConfigurationError` of a call on a closed `Client` or `UserSession` (`what`).
pub fn closed_error(what: &str) -> PyErr {
    to_pyerr(Error::config(format!("this {what} is closed")))
}

/// The request id an error's answer carried (`x-request-id`, else `request-id`).
fn answer_request_id(e: &Error) -> Option<String> {
    let headers = match e {
        Error::Api { headers, .. } | Error::OAuth { headers, .. } => headers,
        _ => return None,
    };
    ["x-request-id", "request-id"].iter().find_map(|name| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    })
}

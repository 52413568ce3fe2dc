//! `fxpay._fxpay.CoreUserSession`: a user's account-information session.
use super::bridge::run;
use super::models::{token, Out};
use super::trace::observer;
use crate::auth::user_session::OnToken;
use crate::auth::UserSession;
use crate::error::Error;
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct CoreUserSession {
    inner: Arc<UserSession>,
}

impl CoreUserSession {
    pub fn new(s: UserSession) -> Self {
        CoreUserSession { inner: Arc::new(s) }
    }
}

/// Wraps a Python callable as the core's `on_token` hook. An exception it raises is reported
/// as an `FxPayError`; the new token is kept either way.
pub fn on_token_callback(cb: Py<PyAny>) -> OnToken {
    Arc::new(move |t| {
        Python::attach(|py| {
            let py_token = token(py, t)?;
            cb.bind(py).call1((py_token,))?;
            Ok::<_, PyErr>(())
        })
        .map_err(|e| {
            Python::attach(|py| {
                let shown = e
                    .value(py)
                    .repr()
                    .map(|r| r.to_string())
                    .unwrap_or_default();
                Error::Internal(format!(
                    "on_token raised {shown}; the new token is kept in the session"
                ))
            })
        })
    })
}

#[pymethods]
impl CoreUserSession {
    #[getter]
    fn token<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        token(py, &self.inner.current())
    }

    fn list_virtual_accounts(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        let (s, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            let (accounts, _raw) = crate::api::list_virtual_accounts(&s, obs.as_deref()).await?;
            Ok(Out::Accounts(accounts))
        })
    }
}

//! `fxpay._fxpay.CoreUserSession`: a user's account-information session.
use super::bridge::run;
use super::models::{token, Out};
use super::trace::observer;
use fxpay_core::auth::user_session::OnToken;
use fxpay_core::auth::UserSession;
use fxpay_core::error::Error;
use fxpay_core::models::Token;
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

/// Wraps a Python callable as the core's `on_token` hook. An exception it raises leaves the
/// call as it was raised; the session keeps the new token and offers it again before its
/// next use.
///
/// A blocking call driven on the caller's own thread runs the callable right there; anywhere
/// else (awaitable calls) it runs on the shared runtime's blocking pool, so a slow callable
/// (a database write) never holds up a runtime worker and the calls it serves.
pub fn on_token_callback(cb: Py<PyAny>) -> OnToken {
    let cb = Arc::new(cb);
    Arc::new(move |t| {
        let (cb, t) = (cb.clone(), t.clone());
        if fxpay_core::local_runtime::driving() {
            return Box::pin(std::future::ready(call_on_token(&cb, &t)));
        }
        Box::pin(async move {
            fxpay_core::runtime::runtime()
                .spawn_blocking(move || call_on_token(&cb, &t))
                .await
                .map_err(|e| Error::Internal(format!("on_token did not finish: {e}")))?
        })
    })
}

fn call_on_token(cb: &Py<PyAny>, t: &Token) -> Result<(), Error> {
    Python::attach(|py| {
        let py_token = token(py, t)?;
        cb.bind(py).call1((py_token,))?;
        Ok::<_, PyErr>(())
    })
    .map_err(|e| {
        let shown = Python::attach(|py| {
            e.value(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default()
        });
        Error::Callback {
            message: format!("on_token raised {shown}"),
            raised: Some(Arc::new(e)),
        }
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
            let (accounts, _raw) =
                fxpay_core::api::list_virtual_accounts(&s, obs.as_deref()).await?;
            Ok(Out::Accounts(accounts))
        })
    }
}

//! `fxpay.UserSession`: a user's account-information session.
use super::bridge::ready;
use super::errors::closed_error;
use super::models::out::Out;
use super::models::token;
use super::twin::{self, Obs, Start};
use fxpay_core::{Error, OnToken, Token, UserSession as Core};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A user's account-information session (scope ``gca-aisp``), made by
/// :meth:`Client.user_session`.
///
/// Close it with :meth:`close` (or use it as a context manager, ``with`` or ``async with``)
/// when the user's work is done: later calls raise :class:`fxpay.ConfigurationError`. Closing
/// a session leaves its client open; closing the client ends its sessions too.
#[pyclass(module = "fxpay._fxpay", frozen, weakref)]
pub struct UserSession {
    inner: Arc<Core>,
    closed: AtomicBool,
    /// The client's flag.
    client_closed: Arc<AtomicBool>,
}

impl UserSession {
    pub fn new(s: Core, client_closed: Arc<AtomicBool>) -> Self {
        UserSession {
            inner: Arc::new(s),
            closed: AtomicBool::new(false),
            client_closed,
        }
    }

    fn check_open(&self) -> PyResult<Arc<Core>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed_error("UserSession"));
        }
        if self.client_closed.load(Ordering::Acquire) {
            return Err(closed_error("Client"));
        }
        Ok(self.inner.clone())
    }

    /// The deadline of one call of this session, if it has one.
    fn deadline(&self) -> Option<Duration> {
        self.inner.transport().config().deadline
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
        if crate::bridge::blocking::here() {
            return Box::pin(std::future::ready(call_on_token(&cb, &t)));
        }
        Box::pin(async move {
            fxpay_core::runtime()
                .spawn_blocking(move || call_on_token(&cb, &t))
                .await
                .map_err(|e| Error::Internal(format!("on_token did not finish: {e}")))?
        })
    })
}

fn call_on_token(cb: &Py<PyAny>, t: &Token) -> Result<(), Error> {
    // Through the exit gate: this runs on a runtime thread for a session refreshed by an
    // awaitable call. Once the interpreter is shutting down the callback is not called.
    let called = crate::exit_gate::attach(|py| {
        let r = token(py, t).and_then(|py_token| cb.bind(py).call1((py_token,)).map(|_| ()));
        r.map_err(|e| {
            let shown = e
                .value(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default();
            (e, shown)
        })
    });
    match called {
        Some(Ok(())) => Ok(()),
        Some(Err((e, shown))) => Err(Error::Callback {
            message: format!("on_token raised {shown}"),
            raised: Some(Arc::new(e)),
        }),
        None => Err(Error::Internal(
            "on_token cannot be called: the interpreter is shutting down".into(),
        )),
    }
}

/// What each network method and its ``_async`` twin share: the arguments converted (with the
/// GIL, so a wrong type raises at the call) and how to start the call once its tracing
/// observer is known (`twin.rs`).
impl UserSession {
    /// The call of :meth:`list_virtual_accounts` and :meth:`list_virtual_accounts_async`.
    fn list_virtual_accounts_call(&self) -> PyResult<impl Start> {
        let s = self.check_open()?;
        Ok(move |obs: Obs| async move {
            let (accounts, _raw) = fxpay_core::list_virtual_accounts(&s, obs.as_deref()).await?;
            Ok(Out::Accounts(accounts))
        })
    }
}

#[pymethods]
impl UserSession {
    /// The user's virtual accounts.
    fn list_virtual_accounts(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        twin::blocking(py, self.deadline(), self.list_virtual_accounts_call()?)
    }

    /// :meth:`list_virtual_accounts`, awaitable.
    fn list_virtual_accounts_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "list_virtual_accounts_async",
            self.list_virtual_accounts_call()?,
        )
    }

    /// The current token.
    #[getter]
    fn token<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        token(py, &self.inner.current())
    }

    /// Whether the session has ended: closed, or its client closed.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.client_closed.load(Ordering::Acquire)
    }

    /// ``with_raw_response.list_virtual_accounts()``: returns a ``fxpay.RawResponse``.
    #[getter]
    fn with_raw_response<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("fxpay._raw")?
            .getattr("WithRawResponse")?
            .call1((slf,))
    }

    /// Ends the session; a call already under way completes. Closing twice is harmless.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// :meth:`close`, as an awaitable.
    fn aclose(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.close();
        ready(py, py.None())
    }

    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().check_open()?;
        let _ = py;
        Ok(slf)
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.close();
    }

    fn __aenter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        slf.get().check_open()?;
        ready(py, slf.into_any())
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __aexit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.aclose(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let t = token(py, &self.inner.current())?.repr()?;
        let closed = if self.closed() { ", closed" } else { "" };
        Ok(format!("UserSession(token={t}{closed})"))
    }
}

//! `fxpay.Client`: the client as Python sees it. Each network method has a blocking form
//! (GIL released while it waits) and an `_async` twin returning a coroutine; both take the
//! same arguments, converted here (a wrong type is a `TypeError` naming the parameter) and
//! checked once, by the core.
//!
//! The endpoints live in `client/` by subject (one file of the binding per subject, next to
//! the core's), each a `*_call` function that converts the arguments and says how to start
//! the call, and two one-line methods over it (`twin.rs`), in the subject's own
//! `#[pymethods]` block (pyo3's `multiple-pymethods`). This file holds the client itself:
//! its state, the helpers the subjects share, its options, `repr`, `close` and the context
//! managers.
mod beneficiaries;
mod construction;
mod deals;
mod oauth;
mod payouts;
mod quotes;

use super::bridge::guard;
use super::bridge::ready;
use super::convert::{int, opt_text, seconds};
use super::errors::{closed_error, Failure, Fallible};
use fxpay_core::{
    lost_answer_named_by_sender, Cassette, Client as Core, Error, JournalStore, TokenStore,
};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::IntoPyObjectExt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A client of the payments and account-information service.
///
/// Every network method has an awaitable ``*_async`` twin with the same arguments, result
/// and exceptions. Blocking calls release the GIL while they wait; one client is safe to
/// share between threads and asyncio tasks.
///
/// ``base_url`` is the service address without ``/v1``; it must be ``https://`` except on
/// loopback hosts. Payments calls fetch a client-credentials token on first use, reuse it
/// and renew it before it expires; many concurrent first calls cause one token request.
#[pyclass(module = "fxpay._fxpay", frozen, subclass, weakref)]
pub struct Client {
    /// Set by `__init__` (so a subclass may give `__init__` a signature of its own).
    open: OnceLock<Open>,
    /// Shared with the client's sessions: closing the client ends them.
    closed: Arc<AtomicBool>,
    /// A client made by `with_options`: the flag of the client it came from (closing that
    /// one closes this one too; closing this one closes nothing shared).
    parent_closed: Option<Arc<AtomicBool>>,
}

struct Open {
    core: Core,
    store: Option<Arc<dyn TokenStore>>,
    cassette: Option<Arc<Cassette>>,
    journal: Option<Arc<dyn JournalStore>>,
}

/// A creating call's idempotency key and the journal it is kept in (None without a key).
type KeyAndJournal = Option<(Arc<dyn JournalStore>, String)>;

/// A creating call, journaled or direct: with a key, through the journal (`journaled`, the
/// core's keyed call: a repeat of the key is answered from it), else sent as it is
/// (`direct`); `args` go to the one it makes.
async fn journaled_or_direct<'a, A, T, J, D>(
    key_and_journal: &'a KeyAndJournal,
    args: A,
    journaled: impl FnOnce(&'a Arc<dyn JournalStore>, &'a str, A) -> J,
    direct: impl FnOnce(A) -> D,
) -> Result<T, Error>
where
    J: Future<Output = Result<(T, bool), Error>>,
    D: Future<Output = Result<T, Error>>,
{
    match key_and_journal {
        // An outcome made unknown by this call's own lost answer names the request it sent.
        Some((j, key)) => Ok(journaled(j, key, args)
            .await
            .map_err(lost_answer_named_by_sender)?
            .0),
        None => direct(args).await,
    }
}

impl Client {
    /// The journal and key of a creating call given `idempotency_key` (None without one);
    /// a key on a client without a journal is a `ConfigurationError`.
    fn key_and_journal(&self, key: Option<&Bound<'_, PyAny>>) -> Fallible<KeyAndJournal> {
        let Some(key) = opt_text(key, "idempotency_key")? else {
            return Ok(None);
        };
        match &self.initialised()?.journal {
            Some(j) => Ok(Some((j.clone(), key))),
            None => Err(Failure::from(Error::config(
                "idempotency_key needs a journal: Client(..., journal=fxpay.SqliteJournal(path))",
            ))),
        }
    }

    /// The core client, or `ConfigurationError` when closed (or never initialised).
    fn core(&self) -> PyResult<&Core> {
        let open = self.initialised()?;
        if self.is_closed() {
            return Err(closed_error("Client"));
        }
        Ok(&open.core)
    }
}

/// A default argument as the Python object a caller would pass (so that an explicit `None`
/// is a wrong type, not the default).
fn default<T>(value: T) -> Py<PyAny>
where
    T: for<'py> IntoPyObject<'py>,
{
    Python::attach(|py| match value.into_bound_py_any(py) {
        Ok(v) => v.unbind(),
        Err(_) => py.None(),
    })
}

#[pymethods]
impl Client {
    /// The service address, without ``/v1``.
    #[getter]
    fn base_url(&self) -> PyResult<String> {
        Ok(self.initialised()?.core.config().base_url.clone())
    }

    #[getter]
    fn client_id(&self) -> PyResult<String> {
        Ok(self.initialised()?.core.config().client_id.clone())
    }

    /// Whether :meth:`close` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// ``with_raw_response.<method>(...)``: the call, returning a ``fxpay.RawResponse``.
    #[getter]
    fn with_raw_response<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import(intern!(slf.py(), "fxpay._raw"))?
            .getattr(intern!(slf.py(), "WithRawResponse"))?
            .call1((slf,))
    }

    /// A client with other per-call options that shares this one's connection pools, token
    /// cache, token store, journal and cassette. Options left ``None`` are this client's;
    /// this client is unchanged. Closing this client closes the derived one too; closing
    /// the derived one alone closes nothing shared.
    #[pyo3(signature = (*, timeout = None, max_retries = None, deadline = None))]
    fn with_options(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
        max_retries: Option<&Bound<'_, PyAny>>,
        deadline: Option<&Bound<'_, PyAny>>,
    ) -> Fallible<Client> {
        let open = self.initialised()?;
        let mut cfg = open.core.config().clone();
        if let Some(t) = timeout.filter(|t| !t.is_none()) {
            cfg = cfg.with_timeout(seconds(t, "timeout")?)?;
        }
        if let Some(n) = max_retries.filter(|n| !n.is_none()) {
            cfg = cfg.with_max_retries(int(n, "max_retries", Error::Configuration)?)?;
        }
        if let Some(d) = deadline.filter(|d| !d.is_none()) {
            cfg = cfg.with_deadline(seconds(d, "deadline")?)?;
        }
        let core = py.detach(|| open.core.with_config(cfg));
        let derived = Client {
            open: OnceLock::new(),
            closed: Arc::new(AtomicBool::new(self.is_closed())),
            parent_closed: Some(self.closed.clone()),
        };
        let _ = derived.open.set(Open {
            core,
            store: open.store.clone(),
            // Saved when the client it came from closes, not when this one does.
            cassette: None,
            journal: open.journal.clone(),
        });
        Ok(derived)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let name = slf.get_type().name()?;
        match slf.get().open.get() {
            Some(o) => Ok(format!(
                "{name}(client_id={}, base_url={})",
                PyString::new(py, &o.core.config().client_id).repr()?,
                PyString::new(py, &o.core.config().base_url).repr()?
            )),
            None => Ok(format!("{name}(<not initialised>)")),
        }
    }

    // -- lifecycle ----------------------------------------------------------------------

    /// Releases the client and ends its sessions; its pooled connections close once no call
    /// uses them. A recording cassette is written now.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        match self.open.get().and_then(|o| o.cassette.clone()) {
            Some(cassette) => py.detach(|| guard(|| cassette.save())),
            None => Ok(()),
        }
    }

    /// :meth:`close`, as an awaitable.
    fn aclose(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.close(py)?;
        ready(py, py.None())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.close(py)
    }

    fn __aenter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
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
}

impl Client {
    /// The deadline of one call of this client, if it has one.
    fn deadline(&self) -> Option<Duration> {
        self.open.get().and_then(|o| o.core.config().deadline)
    }

    /// Closed itself, or the client it was derived from (`with_options`) is.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
            || self
                .parent_closed
                .as_ref()
                .is_some_and(|p| p.load(Ordering::Acquire))
    }

    /// The initialised state, closed or not.
    fn initialised(&self) -> Fallible<&Open> {
        self.open.get().ok_or_else(|| {
            Failure::from(Error::config(
                "this Client was not initialised (Client.__init__ was not called)",
            ))
        })
    }
}

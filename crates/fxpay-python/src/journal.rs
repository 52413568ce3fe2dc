//! The idempotency journal as Python sees it: `fxpay.JournalEntry`, a Python journal
//! (`fxpay.SqliteJournal`, `RedisJournal`, `MemoryJournal` or a user's own) adapted to the
//! core's `Store`, and the hand operations the Python journals share (resolve, unknown,
//! complete a spot deal), which are the core's.
use super::convert::{instant_to_py, opt_text, text, type_name};
use super::errors::{Fallible, PyJournalEntry};
use super::models::DealCreated;
use fxpay_core::{
    complete_spot, issued_spot, resolve_entry, settle_spot, unknown_entries, Entry, Error,
    EventStatus, HolderCheck, LeaseOnly, LocalProcesses, Result, Store,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use std::sync::Arc;

/// One key's record in an idempotency journal (read-only).
///
/// ``state`` is ``"pending"``, ``"done"``, ``"unknown"`` or ``"released"``; ``result`` the
/// created id (quote, beneficiary or deal id, or a spot deal's process id); ``deal_id`` a
/// spot deal's, once its ``DealCreated`` arrived. Journals keep an entry as the text of
/// :meth:`to_json` and read it back with :meth:`from_json`.
#[pyclass(module = "fxpay._fxpay", name = "JournalEntry", frozen, eq)]
#[derive(PartialEq)]
pub struct JournalEntry(pub Entry);

impl<'py> IntoPyObject<'py> for PyJournalEntry {
    type Target = JournalEntry;
    type Output = Bound<'py, JournalEntry>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Bound::new(py, JournalEntry(self.0))
    }
}

fn ms_to_py(py: Python<'_>, ms: u64) -> PyResult<Bound<'_, PyAny>> {
    // Milliseconds as seconds: exact enough for a timestamp (not money).
    Ok(instant_to_py(py, ms as f64 / 1000.0)?)
}

#[pymethods]
impl JournalEntry {
    #[getter]
    fn key(&self) -> &str {
        &self.0.key
    }
    #[getter]
    fn operation(&self) -> &str {
        &self.0.operation
    }
    #[getter]
    fn state(&self) -> &'static str {
        self.0.state.as_str()
    }
    #[getter]
    fn result(&self) -> Option<&str> {
        self.0.result.as_deref()
    }
    #[getter]
    fn deal_id(&self) -> Option<&str> {
        self.0.deal_id.as_deref()
    }
    #[getter]
    fn error(&self) -> Option<&str> {
        self.0.error.as_deref()
    }
    /// The request the key's call sent, as a mapping (its wire body: camelCase, amounts as
    /// exact ``Decimal``), or None when the journal kept none.
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(text) = self.0.request.as_deref() else {
            return Ok(None);
        };
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("parse_float", py.import("decimal")?.getattr("Decimal")?)?;
        Ok(Some(py.import("json")?.call_method(
            "loads",
            (text,),
            Some(&kwargs),
        )?))
    }
    /// A deal's (or spot deal's) pay reference (its first beneficiary's ``payReference``):
    /// what to look it up by in the provider's records. None for other operations.
    #[getter]
    fn pay_reference(&self) -> Option<String> {
        let text = self.0.request.as_deref()?;
        let body: serde_json::Value = serde_json::from_str(text).ok()?;
        body["beneficiaries"][0]["payReference"]
            .as_str()
            .map(str::to_string)
    }
    /// SHA-256 of the operation and its request: a repeat of the key must match it.
    #[getter]
    fn fingerprint(&self) -> &str {
        &self.0.fingerprint
    }
    /// Who claimed the key (``host/pid/token``).
    #[getter]
    fn holder(&self) -> &str {
        &self.0.holder
    }
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        ms_to_py(py, self.0.created_at)
    }
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        ms_to_py(py, self.0.updated_at)
    }
    /// Until when a pending entry's holder is taken to be alive without renewing.
    #[getter]
    fn lease_until<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        ms_to_py(py, self.0.lease_until)
    }

    /// The entry as JSON text: what a journal stores (it holds a spot deal's callback
    /// nonce: keep a journal as private as the client's credentials).
    fn to_json(&self) -> String {
        self.0.to_json()
    }

    /// An entry from the text :meth:`to_json` gave.
    #[staticmethod]
    fn from_json(text: &Bound<'_, PyAny>) -> Fallible<Self> {
        let t = self::text(text, "text")?;
        let entry = Entry::from_json(&t).map_err(Error::journal)?;
        Ok(JournalEntry(entry))
    }

    /// Pickles without the spot deal's callback nonce (the one secret an entry holds): a
    /// pickled entry, or an ``IdempotencyError`` carrying it, lands in task queues and result
    /// backends. Key, state, operation, result and error survive.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let from_json = slf.get_type().getattr("from_json")?;
        let public = Entry {
            nonce: None,
            ..slf.get().0.clone()
        };
        let args = PyTuple::new(py, [public.to_json()])?;
        PyTuple::new(py, [from_json.into_any(), args.into_any()])
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let e = &self.0;
        let opt = |v: &Option<String>| -> PyResult<String> {
            Ok(match v {
                Some(s) => PyString::new(py, s).repr()?.to_string(),
                None => "None".into(),
            })
        };
        Ok(format!(
            "JournalEntry(key={}, operation='{}', state='{}', result={}, deal_id={}, error={})",
            PyString::new(py, &e.key).repr()?,
            e.operation,
            e.state.as_str(),
            opt(&e.result)?,
            opt(&e.deal_id)?,
            opt(&e.error)?,
        ))
    }
}

/// A Python journal seen from the core: its `get`, `claim`, `swap` and `find` methods,
/// called with the GIL from the blocking pool. A journal whose `single_host` attribute is
/// true also has its holders' processes checked (a dead local holder is gone at once).
pub struct PyJournal {
    obj: Py<PyAny>,
    holders: Box<dyn HolderCheck>,
}

impl PyJournal {
    /// `obj` if it has the journal methods; anything else is a `TypeError` naming `name`.
    pub fn from_py(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Arc<dyn Store>> {
        for m in ["get", "claim", "swap", "find"] {
            if !obj.hasattr(m)? {
                return Err(PyTypeError::new_err(format!(
                    "{name} must be a fxpay.Journal (get, claim, swap, find), not {}",
                    type_name(obj)
                )));
            }
        }
        let single = match obj.getattr("single_host") {
            Ok(v) => v.is_truthy()?,
            Err(_) => false,
        };
        let holders: Box<dyn HolderCheck> = if single {
            Box::new(LocalProcesses)
        } else {
            Box::new(LeaseOnly)
        };
        Ok(Arc::new(PyJournal {
            obj: obj.clone().unbind(),
            holders,
        }))
    }

    fn call<T>(
        &self,
        method: &str,
        args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>>,
        out: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
    ) -> Result<T> {
        let r = crate::exit_gate::attach(|py| {
            let got = self.obj.bind(py).call_method1(method, args(py)?)?;
            out(&got)
        });
        match r {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(Error::journal(format!(
                "the journal's {method}() failed: {}",
                crate::exit_gate::attach(|py| shown(py, &e)).unwrap_or_default()
            ))),
            None => Err(Error::journal(
                "the journal cannot be used: the interpreter is shutting down",
            )),
        }
    }
}

fn shown(py: Python<'_>, e: &PyErr) -> String {
    let name = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    format!("{name}: {}", e.value(py))
}

/// `obj` as an entry, or None; anything else is a `TypeError`.
fn opt_entry(obj: &Bound<'_, PyAny>) -> PyResult<Option<Entry>> {
    if obj.is_none() {
        return Ok(None);
    }
    match obj.cast::<JournalEntry>() {
        Ok(e) => Ok(Some(e.get().0.clone())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "returned {}, not a JournalEntry or None",
            type_name(obj)
        ))),
    }
}

impl Store for PyJournal {
    fn get(&self, key: &str) -> Result<Option<Entry>> {
        self.call("get", |py| PyTuple::new(py, [key]), opt_entry)
    }

    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        let e = JournalEntry(entry.clone());
        self.call("claim", |py| PyTuple::new(py, [Py::new(py, e)?]), opt_entry)
    }

    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        let (o, n) = (JournalEntry(old.clone()), JournalEntry(new.clone()));
        self.call(
            "swap",
            |py| PyTuple::new(py, [Py::new(py, o)?, Py::new(py, n)?]),
            |v| v.is_truthy(),
        )
    }

    fn find(&self, result: &str) -> Result<Option<Entry>> {
        self.call("find", |py| PyTuple::new(py, [result]), opt_entry)
    }

    fn holders(&self) -> &dyn HolderCheck {
        &*self.holders
    }
}

/// Settles an unknown key (`fxpay.Journal.resolve`'s work, for the journals of
/// `fxpay.journals`).
#[pyfunction]
#[pyo3(signature = (journal, key, result))]
pub fn _journal_resolve(
    journal: &Bound<'_, PyAny>,
    key: &Bound<'_, PyAny>,
    result: Option<&Bound<'_, PyAny>>,
) -> Fallible<JournalEntry> {
    let store = PyJournal::from_py(journal, "journal")?;
    let key = text(key, "key")?;
    let result = opt_text(result, "result")?;
    Ok(JournalEntry(resolve_entry(&*store, &key, result)?))
}

/// Of a journal's pending and unknown entries, the unknown ones (a pending entry whose
/// holder is gone becomes unknown).
#[pyfunction]
pub fn _journal_unknown<'py>(
    journal: &Bound<'py, PyAny>,
    candidates: &Bound<'py, PyAny>,
) -> Fallible<Bound<'py, PyList>> {
    let py = journal.py();
    let store = PyJournal::from_py(journal, "journal")?;
    let mut list = Vec::new();
    for item in candidates.try_iter()? {
        if let Some(e) = opt_entry(&item?)? {
            list.push(e);
        }
    }
    let out = unknown_entries(&*store, list)?;
    Ok(PyList::new(py, out.into_iter().map(JournalEntry))?)
}

/// Records a spot deal's `dealId` on its entry; the entry, or None if the journal holds no
/// spot deal with that process id.
#[pyfunction]
pub fn _journal_complete_spot(
    journal: &Bound<'_, PyAny>,
    process_id: &Bound<'_, PyAny>,
    deal_id: &Bound<'_, PyAny>,
) -> Fallible<Option<JournalEntry>> {
    let store = PyJournal::from_py(journal, "journal")?;
    let process_id = text(process_id, "process_id")?;
    let deal_id = text(deal_id, "deal_id")?;
    let entry = complete_spot(&*store, &process_id, &deal_id)?;
    Ok(entry.map(JournalEntry))
}

/// Verifies a ``DealCreated`` notification against the callback nonces the journal issued
/// to keyed spot deals, and parses it: the event and the key of its spot deal. A nonce the
/// journal never issued (or none, or two) is a ``WebhookVerificationError``; a body that is
/// not an event, a ``WebhookPayloadError``.
#[pyfunction]
#[pyo3(signature = (journal, body, headers))]
pub fn _journal_verify_deal_created<'py>(
    py: Python<'py>,
    journal: &Bound<'py, PyAny>,
    body: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
) -> Fallible<(Bound<'py, DealCreated>, String)> {
    let store = PyJournal::from_py(journal, "journal")?;
    let mut nonces = crate::webhook::nonce_headers(Some(headers))?;
    let nonce = match (nonces.pop(), nonces.is_empty()) {
        (Some(n), true) => n,
        (None, _) => {
            return Err(
                Error::WebhookVerification("the callback-nonce header is missing".into()).into(),
            )
        }
        (Some(_), false) => {
            return Err(Error::WebhookVerification(
                "the callback-nonce header appears more than once".into(),
            )
            .into())
        }
    };
    let Some(entry) = issued_spot(&*store, &nonce)? else {
        return Err(Error::WebhookVerification(
            "the callback-nonce was not issued by this journal to any spot deal".into(),
        )
        .into());
    };
    let nonce_obj = PyString::new(py, &nonce);
    let event =
        crate::webhook::parse_deal_created(py, body, Some(headers), Some(nonce_obj.as_any()))?;
    Ok((event, entry.key))
}

/// Settles the spot deal under ``key`` by its verified ``DealCreated`` ``event``, forward
/// only: ``pending``/``unknown`` become ``done`` (its process id and deal id) on success and
/// ``released`` on failure. ``(entry, contradiction)``: the entry as it now stands (None when
/// the journal holds no spot deal under ``key``), and why it was left as it was when the
/// notification contradicts it (a ``fail`` for a ``done`` key, another deal), else None.
#[pyfunction]
pub fn _journal_settle_spot(
    journal: &Bound<'_, PyAny>,
    key: &Bound<'_, PyAny>,
    event: &Bound<'_, PyAny>,
) -> Fallible<(Option<JournalEntry>, Option<String>)> {
    let store = PyJournal::from_py(journal, "journal")?;
    let key = text(key, "key")?;
    let ev = crate::models::extract::<DealCreated>(event, "event")?;
    let failure = ev
        .errors
        .iter()
        .map(|e| format!("{}: {}", e.error_code, e.message))
        .collect::<Vec<_>>()
        .join("; ");
    let ok = ev.status == EventStatus::Success;
    let settled = settle_spot(
        &*store,
        &key,
        ok,
        &ev.process_id,
        ev.deal_id.as_deref(),
        &failure,
    )?;
    Ok(match settled {
        Some(s) => (Some(JournalEntry(s.entry)), s.contradiction),
        None => (None, None),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<JournalEntry>()?;
    m.add_function(wrap_pyfunction!(_journal_verify_deal_created, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_settle_spot, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_resolve, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_unknown, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_complete_spot, m)?)?;
    Ok(())
}

//! `fxpay.JournalEntry`: one key's record in a journal, as Python reads it (read-only; its
//! JSON text is what journals keep).
use crate::convert::{instant_to_py, text};
use crate::errors::{Fallible, PyJournalEntry};
use fxpay_core::{Entry, Error};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

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

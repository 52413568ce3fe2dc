//! The hand operations the Python journals share (resolve, unknown, complete, verify and
//! settle a spot deal), which are the core's, as `fxpay._fxpay._journal_*` functions.
use super::entry::JournalEntry;
use super::{opt_entry, PyJournal};
use crate::convert::{opt_text, text};
use crate::errors::Fallible;
use crate::models::DealCreated;
use fxpay_core::{
    complete_spot, issued_spot, resolve_entry, settle_spot, unknown_entries, Error, EventStatus,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

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

/// Adds `fxpay.JournalEntry` and these functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<JournalEntry>()?;
    m.add_class::<super::memory::PyMemoryStore>()?;
    m.add_class::<super::native::PyNativeStore>()?;
    m.add_function(wrap_pyfunction!(super::native::_native_flush_all, m)?)?;
    m.add_function(wrap_pyfunction!(super::sqlite::_sqlite_store, m)?)?;
    m.add_function(wrap_pyfunction!(super::sqlite::_sqlite_create, m)?)?;
    m.add_function(wrap_pyfunction!(super::redis::_redis_store, m)?)?;
    m.add_function(wrap_pyfunction!(super::redis::_redis_scripts, m)?)?;
    m.add_function(wrap_pyfunction!(super::postgres::_postgres_store, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_verify_deal_created, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_settle_spot, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_resolve, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_unknown, m)?)?;
    m.add_function(wrap_pyfunction!(_journal_complete_spot, m)?)?;
    Ok(())
}

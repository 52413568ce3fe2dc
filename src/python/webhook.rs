//! `fxpay.parse_deal_created`: the webhook checks of `crate::webhook` on Python values.
use super::bridge::guard;
use super::convert::value_to_py;
use super::models::field_error;
use crate::error::Error;
use crate::models::DealCreated;
use crate::webhook::{self, NONCE_HEADER};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

/// Bodies at least this large are parsed with the GIL released.
const DETACH_AT: usize = 64 * 1024;

static DEAL_CREATED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn deal_created_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    DEAL_CREATED
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("fxpay.models")?.getattr("DealCreated")?.unbind())
        })
        .map(|c| c.bind(py))
}

/// Verifies (when `nonce` is given) and parses a `DealCreated` notification.
#[pyfunction]
#[pyo3(signature = (body, headers = None, *, nonce = None))]
pub fn parse_deal_created<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: Option<&Bound<'py, PyAny>>,
    nonce: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = body_bytes(body)?;
    guard(|| webhook::check_size(bytes.len()))?;
    if let Some(expected) = nonce {
        let received = nonce_headers(headers)?;
        guard(|| {
            webhook::verify_nonce(expected, received.iter().map(|v| (NONCE_HEADER, v.as_str())))
        })?;
    }
    let event = if bytes.len() >= DETACH_AT {
        py.detach(|| guard(|| webhook::parse_body(bytes)))?
    } else {
        guard(|| webhook::parse_body(bytes))?
    };
    to_py(py, &event)
}

/// The body as UTF-8 bytes: `bytes` as they are, `str` encoded (refused unencoded when it
/// has more characters than the limit has bytes).
fn body_bytes<'a>(body: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    if let Ok(b) = body.cast::<PyBytes>() {
        return Ok(b.as_bytes());
    }
    if let Ok(s) = body.cast::<PyString>() {
        guard(|| webhook::check_size(s.len().unwrap_or(usize::MAX)))?;
        return match s.to_str() {
            Ok(text) => Ok(text.as_bytes()),
            Err(_) => guard(|| {
                Err(Error::WebhookPayload(
                    "the body is not valid UTF-8 (the str holds lone surrogates)".into(),
                ))
            }),
        };
    }
    Err(PyTypeError::new_err(format!(
        "body must be bytes or str, not {}",
        body.get_type().name()?
    )))
}

/// The values of every `callback-nonce` header, the name compared in any case. Any
/// mapping works (dict, Starlette `Headers`, Django `HttpHeaders`): its `items()` are read.
fn nonce_headers(headers: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let mut found = Vec::new();
    let Some(headers) = headers.filter(|h| !h.is_none()) else {
        return Ok(found);
    };
    let mut consider = |name: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>| -> PyResult<()> {
        let name = name
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err("header names must be str"))?;
        if name.to_str()?.eq_ignore_ascii_case(NONCE_HEADER) {
            let value = value
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("header values must be str"))?;
            found.push(value.to_str()?.to_owned());
        }
        Ok(())
    };
    if let Ok(dict) = headers.cast::<PyDict>() {
        for (name, value) in dict.iter() {
            consider(&name, &value)?;
        }
    } else {
        for item in headers.call_method0("items")?.try_iter()? {
            let (name, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            consider(&name, &value)?;
        }
    }
    Ok(found)
}

fn to_py<'py>(py: Python<'py>, ev: &DealCreated) -> PyResult<Bound<'py, PyAny>> {
    let errors = ev
        .errors
        .iter()
        .map(|e| field_error(py, e))
        .collect::<PyResult<Vec<_>>>()?;
    deal_created_class(py)?.call1((
        ev.status.as_str(),
        ev.process_id.as_str(),
        ev.deal_id.as_deref(),
        PyTuple::new(py, errors)?,
        value_to_py(py, &ev.raw)?,
    ))
}

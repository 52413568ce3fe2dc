//! `fxpay.parse_deal_created`: the webhook checks of `fxpay_core::webhook` on Python values.
use super::bridge::guard;
use super::convert::opt_text;
use fxpay_core::error::Error;
use fxpay_core::models::{DealCreated, FieldError};
use fxpay_core::webhook::{self, NONCE_HEADER};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyType};

/// Bodies at least this large are parsed with the GIL released.
const DETACH_AT: usize = 64 * 1024;

/// `fxpay.models.DealCreated` and `fxpay.models.FieldError`, looked up once.
struct Classes {
    deal_created: Py<PyType>,
    field_error: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let models = py.import("fxpay.models")?;
        Ok::<_, PyErr>(Classes {
            deal_created: models
                .getattr("DealCreated")?
                .cast_into::<PyType>()?
                .unbind(),
            field_error: models
                .getattr("FieldError")?
                .cast_into::<PyType>()?
                .unbind(),
        })
    })
}

/// Verifies and parses a ``DealCreated`` notification.
///
/// ``body`` is the request body exactly as received (``bytes``, or ``str`` that is encoded to
/// UTF-8). ``headers`` is any mapping of the request headers (``dict``, Starlette's
/// ``request.headers``, Django's ``request.headers``); only its ``items()`` are read.
///
/// With ``nonce`` (the ``callback_nonce`` of the :class:`~fxpay.SpotDeal`), exactly one
/// ``callback-nonce`` header, name in any case, must carry that value; it is compared in
/// constant time, and neither value ever appears in an error message. Failure raises
/// :class:`fxpay.WebhookVerificationError`.
///
/// The body must be at most 1 MiB of UTF-8 JSON forming a ``DealCreated`` event (spec 6.2):
/// ``eventType`` ``"DealCreated"``, ``status`` ``"success"`` or ``"fail"``, an ``eventBody``
/// with a UUID ``processId``, and either a UUID ``dealId`` (success) or a non-empty
/// ``errors`` list of ``{errorCode, fieldName, message}`` strings (fail). Duplicate keys in
/// those objects are refused; unknown extra fields are allowed and kept in ``raw``. Anything
/// else raises :class:`fxpay.WebhookPayloadError` naming the field.
#[pyfunction]
#[pyo3(signature = (body, headers = None, *, nonce = None))]
pub fn parse_deal_created<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    headers: Option<&Bound<'py, PyAny>>,
    nonce: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let nonce = opt_text(nonce, "nonce")?;
    let bytes = body_bytes(body)?;
    guard(|| webhook::check_size(bytes.len()))?;
    if let Some(expected) = nonce {
        let received = nonce_headers(headers)?;
        guard(|| {
            webhook::verify_nonce(
                &expected,
                received.iter().map(|v| (NONCE_HEADER, v.as_str())),
            )
        })?;
    }
    let event = if bytes.len() >= DETACH_AT {
        py.detach(|| guard(|| webhook::parse_body(bytes)))?
    } else {
        guard(|| webhook::parse_body(bytes))?
    };
    to_py(py, &event, body)
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
/// Names and values must be `str` (else `TypeError`). A value that is not text (a lone
/// surrogate) is kept as a value that matches no nonce, so the check fails as for any other
/// wrong value.
fn nonce_headers(headers: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let mut found = Vec::new();
    let Some(headers) = headers.filter(|h| !h.is_none()) else {
        return Ok(found);
    };
    let mut consider = |name: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>| -> PyResult<()> {
        let name = header_text(name)
            .ok_or_else(|| PyTypeError::new_err("headers: header names must be str"))?;
        if name.is_some_and(|n| n.eq_ignore_ascii_case(NONCE_HEADER)) {
            let value = header_text(value)
                .ok_or_else(|| PyTypeError::new_err("headers: header values must be str"))?;
            // Not text: no nonce equals it ("\0" is never a valid nonce).
            found.push(value.unwrap_or_else(|| "\0".to_owned()));
        }
        Ok(())
    };
    if let Ok(dict) = headers.cast::<PyDict>() {
        for (name, value) in dict.iter() {
            consider(&name, &value)?;
        }
    } else {
        let items = headers
            .call_method0("items")
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "headers must be a mapping of header names to values, not {}",
                    type_name(headers)
                ))
            })?
            .try_iter()?;
        for item in items {
            let pair: (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract().map_err(|_| {
                PyTypeError::new_err("headers: items() must give (name, value) pairs")
            })?;
            consider(&pair.0, &pair.1)?;
        }
    }
    Ok(found)
}

/// A header name or value as text: `Some(Some(text))` for a `str`, `Some(None)` for a `str`
/// that is not text (a lone surrogate), `None` for any other type.
fn header_text(v: &Bound<'_, PyAny>) -> Option<Option<String>> {
    v.cast::<PyString>()
        .ok()
        .map(|s| s.to_str().ok().map(str::to_owned))
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "another type".into())
}

/// An instance of one of the two frozen dataclasses, built the way `pickle` rebuilds one:
/// `cls.__new__(cls)`, then its `__dict__` filled with every field. Neither class has an
/// `__init__` check or a `__post_init__` to skip, and the Python tests compare the result
/// with an instance built by the constructor.
fn instance<'py>(
    cls: &Bound<'py, PyType>,
    fields: &[(&Bound<'py, PyString>, Bound<'py, PyAny>)],
) -> PyResult<Bound<'py, PyAny>> {
    let py = cls.py();
    let obj = cls.call_method1(intern!(py, "__new__"), (cls,))?;
    let dict = obj
        .getattr(intern!(py, "__dict__"))?
        .cast_into::<PyDict>()?;
    for (name, value) in fields {
        dict.set_item(name, value)?;
    }
    Ok(obj)
}

fn field_error<'py>(
    py: Python<'py>,
    cls: &Bound<'py, PyType>,
    e: &FieldError,
) -> PyResult<Bound<'py, PyAny>> {
    let none = || py.None().into_bound(py);
    let (layer, component, number) = match e.parts() {
        Some((l, c, n)) => (
            PyString::new(py, l).into_any(),
            PyString::new(py, c).into_any(),
            n.into_pyobject(py)?.into_any(),
        ),
        None => (none(), none(), none()),
    };
    let field_name = match &e.field_name {
        Some(f) => PyString::new(py, f).into_any(),
        None => none(),
    };
    instance(
        cls,
        &[
            (
                intern!(py, "error_code"),
                PyString::new(py, &e.error_code).into_any(),
            ),
            (intern!(py, "field_name"), field_name),
            (
                intern!(py, "message"),
                PyString::new(py, &e.message).into_any(),
            ),
            (intern!(py, "layer"), layer),
            (intern!(py, "component"), component),
            (intern!(py, "number"), number),
        ],
    )
}

/// The Python `DealCreated`. Its `raw` is not built here: the instance keeps the checked
/// body (the very `bytes` or `str` object passed in) as `_body`, and `DealCreated` decodes
/// it on first access of `.raw`, which most receivers never make.
fn to_py<'py>(
    py: Python<'py>,
    ev: &DealCreated,
    body: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let classes = classes(py)?;
    let fe_class = classes.field_error.bind(py);
    let errors = ev
        .errors
        .iter()
        .map(|e| field_error(py, fe_class, e))
        .collect::<PyResult<Vec<_>>>()?;
    let deal_id = match &ev.deal_id {
        Some(d) => PyString::new(py, d).into_any(),
        None => py.None().into_bound(py),
    };
    let status = match ev.status {
        fxpay_core::models::EventStatus::Success => intern!(py, "success"),
        fxpay_core::models::EventStatus::Fail => intern!(py, "fail"),
    };
    instance(
        classes.deal_created.bind(py),
        &[
            (intern!(py, "status"), status.clone().into_any()),
            (
                intern!(py, "process_id"),
                PyString::new(py, &ev.process_id).into_any(),
            ),
            (intern!(py, "deal_id"), deal_id),
            (intern!(py, "errors"), PyList::new(py, errors)?.into_any()),
            (intern!(py, "_body"), body.clone()),
        ],
    )
}

//! `fxpay.parse_deal_created`: the webhook checks of fxpay-core (`fxpay_core::parse_deal_created`, in steps) on Python values.
use super::convert::{opt_text, type_name};
use super::errors::{guard, Fallible};
use super::models::{deal_created_into_py, DealCreated};
use fxpay_core::{check_webhook_size, parse_webhook_body, verify_nonce, Error, NONCE_HEADER};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

/// Bodies at least this large are parsed with the GIL released.
const DETACH_AT: usize = 64 * 1024;

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
) -> Fallible<Bound<'py, DealCreated>> {
    let nonce = opt_text(nonce, "nonce")?;
    let bytes = body_bytes(body)?;
    check_webhook_size(bytes.len())?;
    if let Some(expected) = nonce {
        let received = nonce_headers(headers)?;
        let received = received.iter().map(|v| (NONCE_HEADER, v.as_str()));
        verify_nonce(&expected, received)?;
    } else {
        check_headers_type(headers)?;
    }
    // The parse of a body from the network is guarded: a panic in it is an FxPayError.
    let event = if bytes.len() >= DETACH_AT {
        py.detach(|| guard(|| parse_webhook_body(bytes)))?
    } else {
        guard(|| parse_webhook_body(bytes))?
    };
    // `raw` is not built here: the event keeps the checked body (the very `bytes` or `str`
    // object passed in) and decodes it on first access of `.raw`, which most receivers
    // never make.
    Ok(deal_created_into_py(py, event, body.clone().unbind())?.into_bound(py))
}

/// The body as UTF-8 bytes: `bytes` as they are, `str` encoded (refused unencoded when it
/// has more characters than the limit has bytes).
fn body_bytes<'a>(body: &'a Bound<'_, PyAny>) -> Fallible<&'a [u8]> {
    if let Ok(b) = body.cast::<PyBytes>() {
        return Ok(b.as_bytes());
    }
    if let Ok(s) = body.cast::<PyString>() {
        check_webhook_size(s.len().unwrap_or(usize::MAX))?;
        return match s.to_str() {
            Ok(text) => Ok(text.as_bytes()),
            Err(_) => Err(Error::WebhookPayload(
                "the body is not valid UTF-8 (the str holds lone surrogates)".into(),
            )
            .into()),
        };
    }
    Err(PyTypeError::new_err(format!(
        "body must be bytes or str, not {}",
        body.get_type().name()?
    ))
    .into())
}

/// The values of every `callback-nonce` header, the name compared in any case. Any
/// mapping works (dict, Starlette `Headers`, Django `HttpHeaders`): its `items()` are read.
/// Names and values must be `str` (else `TypeError`). A value that is not text (a lone
/// surrogate) is kept as a value that matches no nonce, so the check fails as for any other
/// wrong value.
pub(crate) fn nonce_headers(headers: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
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

/// Without a nonce the headers are not read, but a `headers` that is no mapping is still
/// the caller's mistake: a `TypeError` naming it, as `nonce_headers` raises (a dict, or
/// anything with `items()`, passes; the items themselves are not walked).
fn check_headers_type(headers: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match headers.filter(|h| !h.is_none()) {
        Some(h) if !h.is_instance_of::<PyDict>() && !h.hasattr("items")? => {
            Err(PyTypeError::new_err(format!(
                "headers must be a mapping of header names to values, not {}",
                type_name(h)
            )))
        }
        _ => Ok(()),
    }
}

/// A header name or value as text: `Some(Some(text))` for a `str`, `Some(None)` for a `str`
/// that is not text (a lone surrogate), `None` for any other type.
fn header_text(v: &Bound<'_, PyAny>) -> Option<Option<String>> {
    v.cast::<PyString>()
        .ok()
        .map(|s| s.to_str().ok().map(str::to_owned))
}

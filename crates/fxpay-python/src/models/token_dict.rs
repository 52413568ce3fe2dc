//! `Token.from_dict`: a token saved with `Token.to_dict()` read back (without `expires_at`,
//! its `expires_in` counted from now).
use crate::convert::{instant_to_py, seconds, text_of, type_name};
use crate::errors::{Failure, Fallible};
use fxpay_core as core;
use fxpay_core::Error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping, PyString};

/// The keyword arguments of `Token(...)` for the token `d` holds (a mapping such as
/// `Token.to_dict()` gives).
pub(super) fn token_kwargs<'py>(d: &Bound<'py, PyAny>) -> Fallible<Bound<'py, PyDict>> {
    let py = d.py();
    let d = d.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "d must be a mapping such as Token.to_dict() gives, not {}",
            type_name(d)
        ))
    })?;
    let get = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match d.contains(key)? {
            true => Ok(Some(d.get_item(key)?)),
            false => Ok(None),
        }
    };
    let Some(access_token) = get("access_token")? else {
        return Err(Failure::from(Error::invalid(
            "d has no access_token: it is not a saved Token",
        )));
    };
    let expires_in = match get("expires_in")? {
        // A float count of seconds is taken whole, as servers that send one mean.
        Some(v) if v.is_instance_of::<pyo3::types::PyFloat>() => {
            let f = seconds(&v, "expires_in")?;
            if !f.is_finite() {
                return Err(Failure::from(Error::invalid(format!(
                    "d does not hold a valid token expiry: expires_in is {f}"
                ))));
            }
            (f.trunc() as i128).into_pyobject(py)?.into_any()
        }
        Some(v) => v,
        None => 0i64.into_pyobject(py)?.into_any(),
    };
    let expires_at = match get("expires_at")? {
        Some(v) if v.is_instance_of::<pyo3::types::PyBool>() => {
            return Err(PyTypeError::new_err(
                "expires_at must be unix seconds, ISO 8601 text or a datetime, not bool",
            )
            .into())
        }
        Some(v)
            if v.is_instance_of::<pyo3::types::PyInt>()
                || v.is_instance_of::<pyo3::types::PyFloat>() =>
        {
            // Unix seconds by the one rule for seconds (an int too large for a float is
            // infinite, refused here).
            let at = seconds(&v, "expires_at")?;
            if !at.is_finite() {
                return Err(Failure::from(Error::invalid(format!(
                    "d does not hold a valid token expiry: expires_at is {at}"
                ))));
            }
            instant_to_py(py, at)?
        }
        Some(v) if v.is_instance_of::<PyString>() => {
            let text = text_of(v.cast::<PyString>()?, "expires_at")?;
            let when = py
                .import("datetime")?
                .getattr("datetime")?
                .call_method1("fromisoformat", (text,))
                .map_err(|e| {
                    Failure::from(Error::invalid(format!(
                        "d does not hold a valid token expiry: {}",
                        e.value(py)
                    )))
                })?;
            when
        }
        Some(v) if !v.is_none() => v,
        _ => {
            let n = crate::convert::int(&expires_in, "expires_in", Error::InvalidRequest)?;
            let at = core::unix_now() + n as f64;
            instant_to_py(py, at)?
        }
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("access_token", access_token)?;
    kwargs.set_item(
        "token_type",
        get("token_type")?.unwrap_or_else(|| PyString::new(py, "Bearer").into_any()),
    )?;
    kwargs.set_item("expires_in", expires_in)?;
    kwargs.set_item("expires_at", expires_at)?;
    kwargs.set_item("refresh_token", get("refresh_token")?)?;
    kwargs.set_item("scope", get("scope")?)?;
    Ok(kwargs)
}

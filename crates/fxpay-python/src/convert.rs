//! Values between Python and the core: JSON values with exact Decimals, and amounts.
use super::bridge::guard;
use fxpay_core::error::Error;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};
use rust_decimal::Decimal;
use serde_json::Value;

static DECIMAL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn decimal_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    DECIMAL
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("decimal")?.getattr("Decimal")?.unbind())
        })
        .map(|c| c.bind(py))
}

/// A `str` argument as Rust text. Anything but a `str` is a `TypeError` naming `name`; a
/// `str` holding a lone surrogate, which is not Unicode text and cannot be sent, is an
/// `InvalidRequestError` naming it.
pub fn text(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    let s = obj.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!("{name} must be a str, not {}", type_name(obj)))
    })?;
    text_of(s, name)
}

/// An optional `str` argument: `None` (or no argument) is `None`, else as [`text`].
pub fn opt_text(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<String>> {
    match obj {
        Some(o) if !o.is_none() => text(o, name).map(Some),
        _ => Ok(None),
    }
}

/// The text of a `str`; a lone surrogate is an `InvalidRequestError` naming `what`.
pub fn text_of(s: &Bound<'_, PyString>, what: &str) -> PyResult<String> {
    match s.to_str() {
        Ok(t) => Ok(t.to_owned()),
        Err(_) => Err(super::errors::to_pyerr(Error::invalid(format!(
            "{what} holds a lone surrogate: it is not valid Unicode text"
        )))),
    }
}

/// An `int` argument (not a `bool`) as `i64`. Anything else is a `TypeError` naming `name`;
/// an int outside the `i64` range is the error `out_of_range` makes of a message naming it
/// (the same kind of error the core gives for a value outside the parameter's own range).
pub fn int(obj: &Bound<'_, PyAny>, name: &str, out_of_range: fn(String) -> Error) -> PyResult<i64> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, not {}",
            type_name(obj)
        )));
    }
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Err(super::errors::to_pyerr(
            out_of_range(format!("{name} is out of range")),
        )),
        Err(e) => Err(e),
    }
}

/// The name of `obj`'s type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "another type".into())
}

/// A JSON value as Python objects; non-integer numbers become `Decimal` exactly as written.
pub fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number_to_py(py, n)?,
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for item in a {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => object_to_py(py, o)?.into_any(),
    })
}

pub fn object_to_py<'py>(
    py: Python<'py>,
    o: &serde_json::Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, item) in o {
        dict.set_item(k, value_to_py(py, item)?)?;
    }
    Ok(dict)
}

/// Python refuses `int(text)` beyond 4300 digits (its default `int_max_str_digits`).
const MAX_INT_DIGITS: usize = 4000;

fn number_to_py<'py>(py: Python<'py>, n: &serde_json::Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    let text = n.as_str();
    if text.len() <= MAX_INT_DIGITS && text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        // A whole number too large for i64: Python's int takes any size (up to its limit on
        // converting text; longer ones stay exact as a Decimal, which has no such limit).
        return py.get_type::<PyInt>().call1((text,));
    }
    decimal_class(py)?.call1((text,))
}

/// A Rust Decimal as a Python Decimal with the same digits.
pub fn decimal_to_py<'py>(py: Python<'py>, d: &Decimal) -> PyResult<Bound<'py, PyAny>> {
    decimal_class(py)?.call1((d.to_string(),))
}

/// The text of an amount given as `Decimal`, `int`, `str` or `float` (its shortest repr).
pub fn amount_text(field: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if value.is_instance_of::<PyBool>() {
        return Err(super::errors::to_pyerr(Error::invalid(format!(
            "{field} must be a number, not a bool"
        ))));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(value.repr()?.to_string());
    }
    if value.is_instance_of::<PyInt>() {
        // Python refuses str() of ints over 4300 digits; anything over 96 bits is too large
        // for an exact Decimal anyway, so such an int is refused without being written out.
        let bits: u64 = value.call_method0("bit_length")?.extract()?;
        if bits > 96 {
            return Err(super::errors::to_pyerr(Error::invalid(format!(
                "{field} cannot be held exactly: an amount is below 7.9e28 \
                 (it is refused, never rounded), got an int of {bits} bits"
            ))));
        }
        return Ok(value.str()?.to_string());
    }
    if value.is_instance_of::<PyString>() || value.is_instance(decimal_class(value.py())?)? {
        return Ok(value.str()?.to_string());
    }
    Err(super::errors::to_pyerr(Error::invalid(format!(
        "{field} must be a Decimal, int, str or float, got {}",
        value.get_type().name()?
    ))))
}

/// Parses an amount: positive, finite, exact. Returns it as a `Decimal`.
#[pyfunction]
pub fn parse_amount<'py>(
    py: Python<'py>,
    field: &str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let text = amount_text(field, value)?;
    let d = guard(|| fxpay_core::money::parse_amount(field, &text))?;
    decimal_to_py(py, &d)
}

//! Values between Python and the core: JSON values with exact Decimals, and amounts.
use super::bridge::guard;
use crate::error::Error;
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

fn number_to_py<'py>(py: Python<'py>, n: &serde_json::Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    let text = n.as_str();
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        // A whole number too large for i64: Python's int takes any size.
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
    if value.is_instance_of::<PyString>()
        || value.is_instance_of::<PyInt>()
        || value.is_instance(decimal_class(value.py())?)?
    {
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
    let d = guard(|| crate::money::parse_amount(field, &text))?;
    decimal_to_py(py, &d)
}

//! Values between Python and the core, one rule per kind (see `mod.rs` for the list): text,
//! counts, amounts, seconds, paths, instants and JSON values.
use crate::errors::{Failure, Fallible};
use fxpay_core::Error;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use pyo3::{intern, PyTypeInfo};
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
pub fn text(obj: &Bound<'_, PyAny>, name: &str) -> Fallible<String> {
    let s = obj.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!("{name} must be a str, not {}", type_name(obj)))
    })?;
    text_of(s, name)
}

/// An optional `str` argument: `None` (or no argument) is `None`, else as [`text`].
pub fn opt_text(obj: Option<&Bound<'_, PyAny>>, name: &str) -> Fallible<Option<String>> {
    match obj {
        Some(o) if !o.is_none() => text(o, name).map(Some),
        _ => Ok(None),
    }
}

/// The text of a `str`; a lone surrogate is an `InvalidRequestError` naming `what`.
pub fn text_of(s: &Bound<'_, PyString>, what: &str) -> Fallible<String> {
    match s.to_str() {
        Ok(t) => Ok(t.to_owned()),
        Err(_) => Err(Failure::from(Error::invalid(format!(
            "{what} holds a lone surrogate: it is not valid Unicode text"
        )))),
    }
}

/// An `int` argument (not a `bool`) as `i64`. Anything else is a `TypeError` naming `name`;
/// an int outside the `i64` range is the error `out_of_range` makes of a message naming it
/// (the same kind of error the core gives for a value outside the parameter's own range).
pub fn int(obj: &Bound<'_, PyAny>, name: &str, out_of_range: fn(String) -> Error) -> Fallible<i64> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(
            PyTypeError::new_err(format!("{name} must be an int, not {}", type_name(obj))).into(),
        );
    }
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
            Err(out_of_range(format!("{name} is out of range")).into())
        }
        Err(e) => Err(e.into()),
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

/// A Python value as JSON, numbers exact: `None`, `bool`, `int`, `float` (its shortest
/// repr), `Decimal`, `str`, lists and tuples, and mappings with `str` keys. Another type is
/// a `TypeError` naming `name` (with the path inside it); a value JSON cannot hold (NaN, a
/// lone surrogate) an `InvalidRequestError`.
pub fn py_to_value(obj: &Bound<'_, PyAny>, name: &str, top: bool) -> Fallible<Value> {
    let number = |text: String| -> Fallible<Value> {
        let n = serde_json::from_str::<serde_json::Number>(&text)
            .map_err(|_| Error::invalid(format!("{name} is not a JSON number: {text}")))?;
        Ok(Value::Number(n))
    };
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        return number(obj.str()?.to_string());
    }
    if obj.is_instance_of::<PyFloat>() {
        return number(obj.repr()?.to_string());
    }
    if obj.is_instance(decimal_class(obj.py())?)? {
        return number(obj.str()?.to_string());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(text_of(s, name)?));
    }
    if let Ok(m) = obj.cast::<pyo3::types::PyMapping>() {
        let mut out = serde_json::Map::new();
        for item in m.items()?.iter() {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            let key = match k.cast::<PyString>() {
                Ok(k) => text_of(k, name)?,
                Err(_) => {
                    return Err(PyTypeError::new_err(format!(
                        "{name} must have str keys, not {}",
                        type_name(&k)
                    ))
                    .into())
                }
            };
            let value = py_to_value(&v, &format!("{name}[{key:?}]"), false)?;
            out.insert(key, value);
        }
        return Ok(Value::Object(out));
    }
    if !top && (obj.is_instance_of::<PyList>() || obj.is_instance_of::<pyo3::types::PyTuple>()) {
        let items = obj
            .try_iter()?
            .enumerate()
            .map(|(i, item)| py_to_value(&item?, &format!("{name}[{i}]"), false))
            .collect::<Fallible<Vec<_>>>()?;
        return Ok(Value::Array(items));
    }
    let what = if top { "a mapping" } else { "a JSON value" };
    Err(PyTypeError::new_err(format!("{name} must be {what}, not {}", type_name(obj))).into())
}

/// A model's wire form as Python objects: like [`value_to_py`], but every number is a
/// `Decimal` (the numbers of a model with money are its amounts, rates and counts).
pub fn wire_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Number(n) => decimal_class(py)?.call1((n.as_str(),))?,
        Value::Array(a) => {
            let list = PyList::empty(py);
            for item in a {
                list.append(wire_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let dict = PyDict::new(py);
            for (k, item) in o {
                dict.set_item(k, wire_to_py(py, item)?)?;
            }
            dict.into_any()
        }
        other => value_to_py(py, other)?,
    })
}

/// Python refuses `int(text)` beyond 4300 digits (its default `int_max_str_digits`).
const MAX_INT_DIGITS: usize = 4000;

fn number_to_py<'py>(py: Python<'py>, n: &serde_json::Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    number_text_to_py(py, n.as_str())
}

/// A JSON number's text as Python: a whole number as `int`, any other as `Decimal`, exactly.
pub fn number_text_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    if text.len() <= MAX_INT_DIGITS && text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        // A whole number too large for i64: Python's int takes any size (up to its limit on
        // converting text; longer ones stay exact as a Decimal, which has no such limit).
        return py.get_type::<PyInt>().call1((text,));
    }
    decimal_class(py)?.call1((text,))
}

/// A Rust Decimal as a Python Decimal with the same digits.
pub fn decimal_to_py<'py>(py: Python<'py>, d: &Decimal) -> PyResult<Bound<'py, PyAny>> {
    let mut text = super::decimal_text::DecimalText::default();
    decimal_class(py)?.call1((PyString::new(py, text.write(d)),))
}

/// The text of an amount given as `Decimal`, `int`, `str` or `float` (its shortest repr).
///
/// The one rule for the type of an amount, wherever it is given (a `Client` method's
/// argument, a model's field): anything else, a `bool` included, is a `TypeError` naming
/// `field`. Its value is checked later, by the core (an `InvalidRequestError`).
///
/// A subclass of one of these is read as that type reads its value (`float.__repr__`,
/// `int.__repr__`, the `str`'s own text, `Decimal.__str__`), never through the subclass's
/// own `repr` or `str`, which may say anything: numpy 2's `repr(np.float64(1.5))` is
/// `"np.float64(1.5)"`, and its `str` is `"1.5"`.
pub fn amount_text(field: &str, value: &Bound<'_, PyAny>) -> Fallible<String> {
    let py = value.py();
    if value.is_instance_of::<PyBool>() {
        return Err(amount_type_error(field, value));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return text_of(text, field);
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(as_base::<PyFloat>(value, intern!(py, "__repr__"))?);
    }
    if value.is_instance_of::<PyInt>() {
        // Python refuses str() of ints over 4300 digits; anything over 96 bits is too large
        // for an exact Decimal anyway, so such an int is refused without being written out.
        let bits: u64 = PyInt::type_object(py)
            .call_method1(intern!(py, "bit_length"), (value,))?
            .extract()?;
        if bits > 96 {
            return Err(Failure::from(Error::invalid(format!(
                "{field} cannot be held exactly: an amount is below 7.9e28 \
                 (it is refused, never rounded), got an int of {bits} bits"
            ))));
        }
        return Ok(as_base::<PyInt>(value, intern!(py, "__repr__"))?);
    }
    let decimal = decimal_class(py)?;
    if value.is_instance(decimal)? {
        if value.get_type().is(decimal) {
            return Ok(value.str()?.to_string());
        }
        return Ok(decimal
            .call_method1(intern!(py, "__str__"), (value,))?
            .extract()?);
    }
    Err(amount_type_error(field, value))
}

/// `value`'s text as the built-in type `T` writes it: the value's own `repr` when it is
/// exactly a `T`, else `T`'s `method` called on it (a subclass's override is not asked).
fn as_base<T: PyTypeInfo>(
    value: &Bound<'_, PyAny>,
    method: &Bound<'_, PyString>,
) -> PyResult<String> {
    if value.is_exact_instance_of::<T>() {
        return Ok(value.repr()?.to_string());
    }
    T::type_object(value.py())
        .call_method1(method, (value,))?
        .extract()
}

fn amount_type_error(field: &str, value: &Bound<'_, PyAny>) -> Failure {
    PyTypeError::new_err(format!(
        "{field} must be a Decimal, int, str or float, not {}",
        type_name(value)
    ))
    .into()
}

/// A number given as `Decimal`, `int`, `str` or `float` (its shortest repr), kept exactly
/// (of any sign; NaN, infinities and values a `Decimal` of the core cannot hold are an
/// `InvalidRequestError` naming `field`).
pub fn decimal_from_py(field: &str, value: &Bound<'_, PyAny>) -> Fallible<Decimal> {
    let text = amount_text(field, value)?;
    Ok(fxpay_core::parse_exact(field, &text)?)
}

static DATETIME: PyOnceLock<(Py<PyAny>, Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// `datetime.datetime`, its `fromtimestamp` and `timezone.utc`, looked up once.
fn datetime(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>, Py<PyAny>)> {
    DATETIME.get_or_try_init(py, || {
        let dt = py.import("datetime")?;
        let cls = dt.getattr("datetime")?;
        Ok::<_, PyErr>((
            cls.getattr("fromtimestamp")?.unbind(),
            dt.getattr("timezone")?.getattr("utc")?.unbind(),
            cls.unbind(),
        ))
    })
}

/// Unix seconds as an aware (UTC) `datetime`.
pub fn instant_to_py(py: Python<'_>, seconds: f64) -> Fallible<Bound<'_, PyAny>> {
    let (fromts, utc, _) = datetime(py)?;
    let instant = fromts
        .bind(py)
        .call1((seconds, utc.bind(py)))
        .map_err(|e| {
            Error::invalid(format!(
                "{seconds} is not an instant a datetime can hold: {e}"
            ))
        })?;
    Ok(instant)
}

/// A `datetime` as unix seconds (a naive one is taken as UTC). Anything else is a
/// `TypeError` naming `name`.
pub fn instant_from_py(obj: &Bound<'_, PyAny>, name: &str) -> Fallible<f64> {
    let py = obj.py();
    let (_, utc, cls) = datetime(py)?;
    if !obj.is_instance(cls.bind(py))? {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a datetime, not {}",
            type_name(obj)
        ))
        .into());
    }
    let aware = if obj.getattr("tzinfo")?.is_none() {
        obj.call_method(
            "replace",
            (),
            Some(&[("tzinfo", utc.bind(py))].into_py_dict(py)?),
        )?
    } else {
        obj.clone()
    };
    let seconds = aware
        .call_method0("timestamp")
        .and_then(|t| t.extract())
        .map_err(|e| Error::invalid(format!("{name} is out of range: {e}")))?;
    Ok(seconds)
}

// -- seconds and paths ----------------------------------------------------------------------

/// A number of seconds: an `int` or a `float` (not a `bool`); a `TypeError` naming `name`
/// else. Its range is the core's to check (an int too large for a float is infinite, which
/// the core refuses).
pub fn seconds(obj: &Bound<'_, PyAny>, name: &str) -> Fallible<f64> {
    if obj.is_instance_of::<PyBool>()
        || !(obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>())
    {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a number of seconds, not {}",
            type_name(obj)
        ))
        .into());
    }
    Ok(obj.extract::<f64>().unwrap_or(f64::INFINITY))
}

/// A path given as `str` or `os.PathLike` (or None) as text.
pub fn path(obj: Option<&Bound<'_, PyAny>>, name: &str) -> Fallible<Option<String>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let py = obj.py();
    let os = py.import("os")?;
    let fspath = os.call_method1("fspath", (obj,)).map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be a str or an os.PathLike, not {}",
            type_name(obj)
        ))
    })?;
    let decoded = if fspath.is_instance_of::<PyBytes>() {
        os.call_method1("fsdecode", (fspath,))?
    } else {
        fspath
    };
    text(&decoded, name).map(Some)
}

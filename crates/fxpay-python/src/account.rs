//! `fxpay.VirtualAccount`: a read-only mapping over the JSON object the service sent (the
//! spec shows no fields, so there is no field list to generate a class from).
use super::convert::{object_to_py, py_to_value, value_to_py};
use super::models::class::show::escape;
use fxpay_core::VirtualAccount as Account;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use serde_json::Value;
use std::hash::{Hash, Hasher};

/// A virtual account: a read-only mapping over the JSON object the service sent
/// (``va["currency"]``, ``va.get(...)``, ``va.raw``). Numbers are exact: ``Decimal`` unless
/// whole.
#[pyclass(frozen, eq, hash, mapping, module = "fxpay._fxpay")]
pub struct VirtualAccount {
    data: Account,
}

impl PartialEq for VirtualAccount {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data
    }
}

impl Hash for VirtualAccount {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_object(&self.data, state)
    }
}

/// By value as `==` compares: object keys in any order, numbers by their text.
fn hash_value<H: Hasher>(v: &Value, state: &mut H) {
    match v {
        Value::Null => 0u8.hash(state),
        Value::Bool(b) => b.hash(state),
        Value::Number(n) => n.as_str().hash(state),
        Value::String(s) => s.hash(state),
        Value::Array(a) => {
            a.len().hash(state);
            a.iter().for_each(|item| hash_value(item, state));
        }
        Value::Object(o) => hash_object(o, state),
    }
}

fn hash_object<H: Hasher>(o: &Account, state: &mut H) {
    let mut keys: Vec<&String> = o.keys().collect();
    keys.sort();
    o.len().hash(state);
    for k in keys {
        k.hash(state);
        if let Some(v) = o.get(k) {
            hash_value(v, state);
        }
    }
}

impl VirtualAccount {
    fn new_from(data: Account) -> Self {
        VirtualAccount { data }
    }

    /// The account as a new Python dict: nothing a caller does to it reaches the account.
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        object_to_py(py, &self.data)
    }

    /// One value, made anew; `None` for a key that is not there (or not a `str`).
    fn value<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ok(k) = key.cast::<PyString>() else {
            return Ok(None);
        };
        let Ok(k) = k.to_str() else {
            return Ok(None);
        };
        self.data.get(k).map(|v| value_to_py(py, v)).transpose()
    }
}

#[pymethods]
impl VirtualAccount {
    #[new]
    fn __new__(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        match py_to_value(data, "data", true)? {
            Value::Object(o) => Ok(Self::new_from(o)),
            _ => Err(pyo3::exceptions::PyTypeError::new_err(
                "data must be a mapping (the account's JSON object)",
            )),
        }
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.value(py, key)?
            .ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> bool {
        key.cast::<PyString>()
            .ok()
            .and_then(|k| k.to_str().ok().map(|k| self.data.contains_key(k)))
            .unwrap_or(false)
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.dict(py)?.try_iter()?.into_any())
    }

    #[pyo3(signature = (key, default = None, /))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.value(py, key)? {
            Some(v) => Ok(v),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.call_method0("keys")
    }

    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.call_method0("values")
    }

    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.call_method0("items")
    }

    /// The whole JSON object, as a new dict (nested values new too) on each access.
    #[getter]
    fn raw<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    /// The JSON object as the service sent it (a new dict).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let dict = self.dict(py)?;
        let mut shown = Vec::new();
        for k in ["id", "currency", "accountName", "status"] {
            if let Some(v) = dict.get_item(k)? {
                shown.push(format!("{k}={}", v.repr()?));
            }
        }
        Ok(format!("VirtualAccount({})", shown.join(", ")))
    }

    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let mut rows = String::new();
        for (k, v) in self.dict(py)?.iter() {
            rows.push_str(&format!(
                "<tr><th style='text-align:left'>{}</th><td>{}</td></tr>",
                escape(&k.str()?.to_string()),
                escape(&v.str()?.to_string())
            ));
        }
        Ok(format!(
            "<table><caption>VirtualAccount</caption>{rows}</table>"
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let args = PyTuple::new(py, [slf.get().dict(py)?])?;
        PyTuple::new(py, [slf.as_any().get_type().into_any(), args.into_any()])
    }
}

/// Core accounts as Python objects.
pub fn accounts_into_py(py: Python<'_>, list: Vec<Account>) -> PyResult<Vec<Py<VirtualAccount>>> {
    list.into_iter()
        .map(|a| Py::new(py, VirtualAccount::new_from(a)))
        .collect()
}

/// Adds the class, registered as a `collections.abc.Mapping`. The ABCs are taken from
/// `_collections_abc`, which `collections.abc` re-exports and every CPython has loaded at
/// start-up: importing the `collections` package instead would add a millisecond to
/// `import fxpay`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<VirtualAccount>()?;
    py.import("_collections_abc")
        .or_else(|_| py.import("collections.abc"))?
        .getattr("Mapping")?
        .call_method1("register", (py.get_type::<VirtualAccount>(),))?;
    Ok(())
}

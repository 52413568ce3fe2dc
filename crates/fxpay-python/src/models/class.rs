//! The machinery behind every model class of `fxpay._fxpay`, generated from the core's one
//! definition of each model (`fxpay_core::Model`: its fields in order, which may
//! be left out, which are secret). Nothing here names a field.
//!
//! A model class wraps its core struct. Building one from a core result only moves the
//! struct in; the Python value of each field is made on its first access and kept. Its
//! attributes are data descriptors ([`Field`]) put on the class at import, one per field
//! of the core struct; `__match_args__` and `__signature__` come from the same list.
//!
//! Values cross like this:
//! - money and rates (`rust_decimal::Decimal`) as `decimal.Decimal`, by their exact text,
//!   never through a float;
//! - instants (`f64` unix seconds, the only float a model holds) as aware `datetime`s;
//! - nested models as their classes ([`Nested`], given by `models/mod.rs`);
//! - everything else (text, counts, enums) with pythonize, both ways.
//!
//! `to_dict()` is the core struct's serde wire form: with pythonize for models without
//! money, and as exact JSON (every number a `Decimal`) for models with money, because
//! pythonize gives a number either as a float or as serde_json's private struct.
//!
//! This file holds the traits, the caches and each field's value; `class/` the rest, by job:
//! `construction.rs` (`Model(...)`, `replace`), `show.rs` (`repr`, `to_dict`, `raw`,
//! pickling), `attributes.rs` (the descriptors and class attributes put on at import) and
//! `pymodel.rs` (the `pymodel!` macro that declares a class).
pub mod attributes;
pub mod construction;
pub mod pymodel;
pub mod show;

use crate::convert::{
    decimal_from_py, decimal_to_py, instant_from_py, instant_to_py, int, json_text_to_py, opt_text,
    py_to_value, text, type_name, value_to_py, wire_to_py,
};
use crate::errors::{Failure, Fallible};
use fxpay_core::{Absent, Build, Error, FieldType, Model, Visit};
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use pyo3::PyClass;
use rust_decimal::Decimal;
use serde_json::Value;
use std::any::{Any, TypeId};
use std::sync::OnceLock;

/// How the nested models of a model (a quote's freebies, a deal's beneficiaries) cross:
/// given by the file that declares the classes.
pub trait Nested {
    /// The Python value of `v` when it is (an option or list of) a nested model.
    fn to_py<'py>(py: Python<'py>, v: &dyn Any) -> Option<PyResult<Bound<'py, PyAny>>>;
    /// The core value of type `ty` from `obj`, when `ty` is (an option or list of) a nested
    /// model; a wrong type is a `TypeError` naming `name`.
    fn from_py(obj: &Bound<'_, PyAny>, name: &str, ty: TypeId) -> Option<PyResult<Box<dyn Any>>>;
    /// The Python types of a field of type `ty` ([`field_py_types`]), when `ty` is (an
    /// option or list of) a nested model or an enum.
    fn py_types(ty: TypeId) -> Option<PyTypes>;
}

/// A model class: a frozen pyclass around one core model.
pub trait ModelClass: PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync {
    type Core: Model;
    /// The nested-model conversions.
    type Nested: Nested;
    /// Whether the model holds money: its `to_dict()` then keeps every number exact.
    const MONEY: bool;
    fn core(&self) -> &Self::Core;
    fn slots(&self) -> &Slots;
    fn wrap(core: Self::Core, raw: Raw) -> Self;
}

/// Where a model read from the service keeps the JSON it came from, until `raw` is used.
pub enum Raw {
    /// Built by hand: `raw` is an empty dict.
    None,
    /// The answer's JSON text.
    Text(String),
    /// The answer as parsed.
    Value(Value),
    /// The very `bytes` or `str` object a webhook body came in.
    Body(Py<PyAny>),
}

/// The per-instance caches of a model class.
pub struct Slots {
    /// Each field's Python value, once made.
    values: Box<[PyOnceLock<Py<PyAny>>]>,
    /// The JSON `__setstate__` gave back (an unpickled model's `raw`), or an empty object
    /// once a hand-built model's `raw` is read; set once and never changed after: each `raw`
    /// is a new dict made from it. Unset, `raw` is made from `source`.
    json: OnceLock<Value>,
    source: Raw,
}

impl Slots {
    pub fn new(source: Raw, fields: usize) -> Self {
        Slots {
            values: (0..fields).map(|_| PyOnceLock::new()).collect(),
            json: OnceLock::new(),
            source,
        }
    }
}

/// A model as a new Python object.
pub fn into_py<M: ModelClass>(py: Python<'_>, core: M::Core, raw: Raw) -> PyResult<Py<M>>
where
    PyClassInitializer<M>: From<M>,
{
    Py::new(py, M::wrap(core, raw))
}

// -- values of fields ---------------------------------------------------------------------

/// The Python value of one field.
pub fn field_to_py<'py, N: Nested, T: FieldType>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let any = v as &dyn Any;
    if let Some(d) = any.downcast_ref::<Decimal>() {
        return decimal_to_py(py, d);
    }
    if let Some(d) = any.downcast_ref::<Option<Decimal>>() {
        return match d {
            Some(d) => decimal_to_py(py, d),
            None => Ok(py.None().into_bound(py)),
        };
    }
    if let Some(t) = any.downcast_ref::<f64>() {
        return Ok(instant_to_py(py, *t)?);
    }
    if let Some(r) = N::to_py(py, any) {
        return r;
    }
    Ok(pythonize::pythonize(py, v)?)
}

/// One field from a Python value; `name` is `Model.field` for messages.
pub fn field_from_py<N: Nested, T: FieldType>(obj: &Bound<'_, PyAny>, name: &str) -> Fallible<T> {
    let ty = TypeId::of::<T>();
    let boxed: Box<dyn Any> = if ty == TypeId::of::<String>() {
        Box::new(text(obj, name)?)
    } else if ty == TypeId::of::<Option<String>>() {
        Box::new(opt_text(Some(obj), name)?)
    } else if ty == TypeId::of::<Decimal>() {
        Box::new(decimal_from_py(name, obj)?)
    } else if ty == TypeId::of::<Option<Decimal>>() {
        let d: Option<Decimal> = match obj.is_none() {
            true => None,
            false => Some(decimal_from_py(name, obj)?),
        };
        Box::new(d)
    } else if ty == TypeId::of::<u64>() {
        let n = int(obj, name, Error::InvalidRequest)?;
        let n = u64::try_from(n)
            .map_err(|_| Error::invalid(format!("{name} must not be negative, got {n}")))?;
        Box::new(n)
    } else if ty == TypeId::of::<f64>() {
        Box::new(instant_from_py(obj, name)?)
    } else if let Some(r) = N::from_py(obj, name, ty) {
        r?
    } else {
        return pythonize::depythonize::<T>(obj).map_err(|e| {
            match obj.is_instance_of::<PyString>() {
                true => Failure::from(Error::invalid(format!("{name}: {e}"))),
                false => Failure::from(PyTypeError::new_err(format!(
                    "{name} has the wrong type ({}): {e}",
                    type_name(obj)
                ))),
            }
        });
    };
    let made = boxed
        .downcast::<T>()
        .map_err(|_| Error::Internal(format!("{name}: a value of another type was made")))?;
    Ok(*made)
}

/// A field's Python types as the stub writes them (`_fxpay.pyi`, generated by
/// `scripts/gen_stubs.py`): what a constructor and `replace` take, and what the getter gives.
pub type PyTypes = (&'static str, &'static str);

/// The Python types of a field of type `ty`: one line per kind of [`field_to_py`] and
/// [`field_from_py`], the nested models' and enums' from [`Nested::py_types`]. `None` for a
/// type no rule converts (`install` then refuses the class).
pub fn field_py_types<N: Nested>(ty: TypeId) -> Option<PyTypes> {
    let kinds: [(TypeId, PyTypes); 6] = [
        (TypeId::of::<String>(), ("str", "str")),
        (TypeId::of::<Option<String>>(), ("str | None", "str | None")),
        (TypeId::of::<Decimal>(), ("_Amount", "Decimal")),
        (
            TypeId::of::<Option<Decimal>>(),
            ("_Amount | None", "Decimal | None"),
        ),
        (TypeId::of::<u64>(), ("int", "int")),
        (
            TypeId::of::<f64>(),
            ("datetime.datetime", "datetime.datetime"),
        ),
    ];
    match kinds.iter().find(|(t, _)| *t == ty) {
        Some((_, types)) => Some(*types),
        None => N::py_types(ty),
    }
}

/// One field's Python value (the visit passes over the others).
struct One<'py, N> {
    py: Python<'py>,
    want: usize,
    at: usize,
    out: Option<Bound<'py, PyAny>>,
    nested: std::marker::PhantomData<N>,
}

impl<N: Nested> Visit for One<'_, N> {
    type Error = PyErr;
    fn field<T: FieldType>(&mut self, _name: &'static str, value: &T) -> PyResult<()> {
        if self.at == self.want {
            self.out = Some(field_to_py::<N, T>(self.py, value)?);
        }
        self.at += 1;
        Ok(())
    }
}

/// A field's Python value, made on first use and kept (reading one field makes only it).
pub fn field_value<'py, M: ModelClass>(
    slf: &Bound<'py, M>,
    index: usize,
) -> Fallible<Bound<'py, PyAny>> {
    let py = slf.py();
    let m = slf.get();
    let missing = || Error::Internal(format!("{} has no field {index}", M::Core::NAME));
    let cell = m.slots().values.get(index).ok_or_else(missing)?;
    if let Some(v) = cell.get(py) {
        return Ok(v.bind(py).clone());
    }
    // Made outside the cell's lock, then offered to it: `get_or_try_init` would let go of
    // the GIL and take it back around every first read (another thread waiting for the GIL
    // then gets it, and this one waits its turn again). Making a value runs Python code, so
    // another thread may offer the same field meanwhile: the first offer is kept, and every
    // read returns that one object.
    let mut one = One::<M::Nested> {
        py,
        want: index,
        at: 0,
        out: None,
        nested: std::marker::PhantomData,
    };
    m.core().visit(&mut one)?;
    let made = one.out.ok_or_else(missing)?;
    let _ = cell.set(py, made.unbind());
    let kept = cell.get(py).ok_or_else(missing)?;
    Ok(kept.bind(py).clone())
}

/// Every field's Python value, in order.
pub fn values<'py, M: ModelClass>(slf: &Bound<'py, M>) -> Fallible<Bound<'py, PyTuple>> {
    let list = (0..M::Core::FIELDS.len())
        .map(|i| field_value(slf, i))
        .collect::<Fallible<Vec<_>>>()?;
    Ok(PyTuple::new(slf.py(), list)?)
}

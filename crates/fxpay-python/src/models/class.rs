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
use crate::convert::{
    decimal_from_py, decimal_to_py, instant_from_py, instant_to_py, int, opt_text, py_to_value,
    text, type_name, value_to_py, wire_to_py,
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
    /// The JSON `raw` is made from, parsed on first use (or given back by `__setstate__`)
    /// and never changed after: each `raw` is a new dict made from it.
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
    let v = cell.get_or_try_init(py, || {
        let mut one = One::<M::Nested> {
            py,
            want: index,
            at: 0,
            out: None,
            nested: std::marker::PhantomData,
        };
        m.core().visit(&mut one)?;
        Ok::<_, Failure>(one.out.map(Bound::unbind).ok_or_else(missing)?)
    })?;
    Ok(v.bind(py).clone())
}

/// Every field's Python value, in order.
pub fn values<'py, M: ModelClass>(slf: &Bound<'py, M>) -> Fallible<Bound<'py, PyTuple>> {
    let list = (0..M::Core::FIELDS.len())
        .map(|i| field_value(slf, i))
        .collect::<Fallible<Vec<_>>>()?;
    Ok(PyTuple::new(slf.py(), list)?)
}

// -- construction from Python --------------------------------------------------------------

/// Fields from a constructor's positional and keyword arguments.
struct Args<'a, 'py, N> {
    model: &'static str,
    args: &'a Bound<'py, PyTuple>,
    kwargs: Option<&'a Bound<'py, PyDict>>,
    index: usize,
    /// Where the fields that may be left out begin (only trailing ones may be).
    optional_from: usize,
    nested: std::marker::PhantomData<N>,
}

impl<N: Nested> Build for Args<'_, '_, N> {
    type Error = Failure;
    fn field<T: FieldType>(&mut self, name: &'static str) -> Fallible<T> {
        let i = self.index;
        self.index += 1;
        let positional = match i < self.args.len() {
            true => Some(self.args.get_item(i)?),
            false => None,
        };
        let keyword = match self.kwargs {
            Some(kw) => kw.get_item(name)?,
            None => None,
        };
        let what = format!("{}.{name}", self.model);
        match (positional, keyword) {
            (Some(_), Some(_)) => Err(PyTypeError::new_err(format!(
                "{}() got multiple values for argument '{name}'",
                self.model
            ))
            .into()),
            (Some(v), None) | (None, Some(v)) => field_from_py::<N, T>(&v, &what),
            (None, None) => match (i >= self.optional_from).then(T::absent).flatten() {
                Some(v) => Ok(v),
                None => Err(PyTypeError::new_err(format!(
                    "{}() missing required argument '{name}'",
                    self.model
                ))
                .into()),
            },
        }
    }
}

/// Index of the first field of the trailing run that may be left out.
fn optional_from<C: Model>() -> usize {
    let n = C::ABSENT
        .iter()
        .rev()
        .take_while(|a| **a != Absent::Required)
        .count();
    C::FIELDS.len() - n
}

/// A model from constructor arguments: types converted (a `TypeError` names the field),
/// then the core's own checks of a new model (an `InvalidRequestError`).
pub fn new<M: ModelClass>(
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> Fallible<M::Core> {
    let fields = M::Core::FIELDS;
    let model = M::Core::NAME;
    if args.len() > fields.len() {
        return Err(PyTypeError::new_err(format!(
            "{model}() takes at most {} positional arguments ({} given)",
            fields.len(),
            args.len()
        ))
        .into());
    }
    if let Some(kw) = kwargs {
        for key in kw.keys() {
            let known = key
                .cast::<PyString>()
                .ok()
                .and_then(|k| k.to_str().ok().map(|k| fields.contains(&k)))
                .unwrap_or(false);
            if !known {
                return Err(PyTypeError::new_err(format!(
                    "{model}() got an unexpected keyword argument {}",
                    key.repr()?
                ))
                .into());
            }
        }
    }
    let mut b = Args::<M::Nested> {
        model,
        args,
        kwargs,
        index: 0,
        optional_from: optional_from::<M::Core>(),
        nested: std::marker::PhantomData,
    };
    let core = M::Core::build(&mut b)?;
    core.check_new()?;
    Ok(core)
}

/// `replace(**changes)`: a copy with some fields changed, checked as a new model.
pub fn replace<M: ModelClass>(
    slf: &Bound<'_, M>,
    changes: Option<&Bound<'_, PyDict>>,
) -> Fallible<M::Core> {
    let py = slf.py();
    let kwargs = PyDict::new(py);
    for (name, value) in M::Core::FIELDS.iter().zip(values(slf)?.iter()) {
        kwargs.set_item(name, value)?;
    }
    if let Some(ch) = changes {
        for (k, v) in ch.iter() {
            let known = k
                .cast::<PyString>()
                .ok()
                .and_then(|k| k.to_str().ok().map(|k| M::Core::FIELDS.contains(&k)))
                .unwrap_or(false);
            if !known {
                return Err(PyTypeError::new_err(format!(
                    "{}.replace() got an unexpected keyword argument {}",
                    M::Core::NAME,
                    k.repr()?
                ))
                .into());
            }
            kwargs.set_item(k, v)?;
        }
    }
    new::<M>(&PyTuple::empty(py), Some(&kwargs))
}

// -- how a model shows ---------------------------------------------------------------------

/// `Name(field=value, ...)`, secrets left out.
pub fn repr<M: ModelClass>(slf: &Bound<'_, M>) -> PyResult<String> {
    let mut parts = Vec::new();
    for (name, value) in M::Core::FIELDS.iter().zip(values(slf)?.iter()) {
        if !M::Core::SECRET.contains(name) {
            parts.push(format!("{name}={}", value.repr()?));
        }
    }
    Ok(format!("{}({})", M::Core::NAME, parts.join(", ")))
}

/// An HTML table of the fields, secrets left out (for notebooks).
pub fn repr_html<M: ModelClass>(slf: &Bound<'_, M>) -> PyResult<String> {
    let mut rows = String::new();
    for (name, value) in M::Core::FIELDS.iter().zip(values(slf)?.iter()) {
        if !M::Core::SECRET.contains(name) {
            rows.push_str(&format!(
                "<tr><th style='text-align:left'>{}</th><td>{}</td></tr>",
                escape(name),
                escape(&value.str()?.to_string())
            ));
        }
    }
    Ok(format!(
        "<table><caption>{}</caption>{rows}</table>",
        M::Core::NAME
    ))
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
}

/// The wire form: camelCase keys (as the core's serde names them), amounts as `Decimal`.
pub fn to_dict<'py, M: ModelClass>(slf: &Bound<'py, M>) -> Fallible<Bound<'py, PyAny>> {
    let py = slf.py();
    let core = slf.get().core();
    if M::MONEY {
        let v = serde_json::to_value(core)
            .map_err(|e| Error::Internal(format!("cannot encode the model: {e}")))?;
        Ok(wire_to_py(py, &v)?)
    } else {
        Ok(pythonize::pythonize(py, core)?)
    }
}

/// `raw`: the JSON the model was read from (unknown fields included), as a new dict on
/// every access. The model keeps the JSON itself, parsed on first use, out of Python's reach:
/// changing a dict `raw` returned changes neither the model nor the next `raw`.
pub fn raw<'py, M: ModelClass>(slf: &Bound<'py, M>) -> Fallible<Bound<'py, PyAny>> {
    let py = slf.py();
    let slots = slf.get().slots();
    let json = match slots.json.get() {
        Some(v) => v,
        None => {
            let parsed = match &slots.source {
                Raw::None => Value::Object(serde_json::Map::new()),
                Raw::Text(t) => parse_json(t.as_bytes())?,
                Raw::Value(v) => v.clone(),
                Raw::Body(b) => {
                    let b = b.bind(py);
                    match b.cast::<pyo3::types::PyBytes>() {
                        Ok(bytes) => parse_json(bytes.as_bytes())?,
                        Err(_) => parse_json(b.cast::<PyString>()?.to_str()?.as_bytes())?,
                    }
                }
            };
            // Another thread may have set it meanwhile: theirs is the same JSON.
            let _ = slots.json.set(parsed);
            slots
                .json
                .get()
                .ok_or_else(|| Error::Internal("the kept JSON was not kept".into()))?
        }
    };
    Ok(value_to_py(py, json)?)
}

fn parse_json(bytes: &[u8]) -> Fallible<Value> {
    let json = serde_json::from_slice(bytes)
        .map_err(|e| Error::Internal(format!("the kept JSON does not parse: {e}")))?;
    Ok(json)
}

/// `__reduce__`: the class, the fields in order, and `raw` as the state.
pub fn reduce<'py, M: ModelClass>(
    slf: &Bound<'py, M>,
    with_raw: bool,
) -> Fallible<Bound<'py, PyTuple>> {
    let py = slf.py();
    let cls = slf.as_any().get_type().into_any();
    let args = values(slf)?.into_any();
    Ok(match with_raw {
        true => PyTuple::new(py, [cls, args, raw(slf)?])?,
        false => PyTuple::new(py, [cls, args])?,
    })
}

/// `__setstate__` of a model with `raw`: takes the pickled `raw` back, checked as a
/// constructor checks its arguments. The state must be a `dict` of JSON values (`None`,
/// `bool`, `int`, `float`, `Decimal`, `str`, lists and dicts with `str` keys); anything else
/// is a `TypeError`. Only a model that was just made by its class (as unpickling does) and has
/// no `raw` yet takes one: on any other, `raw` is fixed and the call is a `TypeError`.
pub fn set_raw<M: ModelClass>(slf: &Bound<'_, M>, state: &Bound<'_, PyAny>) -> PyResult<()> {
    let name = M::Core::NAME;
    if !state.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!(
            "{name}.__setstate__: the state (raw) must be a dict, not {}",
            type_name(state)
        )));
    }
    let json = py_to_value(state, &format!("{name}.raw"), true)?;
    let slots = slf.get().slots();
    if !matches!(slots.source, Raw::None) || slots.json.set(json).is_err() {
        return Err(PyTypeError::new_err(format!(
            "{name} is immutable: its raw is fixed, __setstate__ is for unpickling only"
        )));
    }
    Ok(())
}

// -- the class attributes ------------------------------------------------------------------

// One field of a model class: a read-only data descriptor. No doc comment on purpose: a
// type doc would be the class's `__doc__` string, which hides the `__doc__` getter below
// (PyType_FromSpec writes it into the type's dict), and `help(Quote)` would show the same
// text for every field.
#[pyclass(frozen, module = "fxpay._fxpay", name = "field")]
pub struct Field {
    index: usize,
    name: &'static str,
    owner: &'static str,
    get: for<'py> fn(&Bound<'py, PyAny>, usize) -> PyResult<Bound<'py, PyAny>>,
}

fn get_field<'py, M: ModelClass>(
    obj: &Bound<'py, PyAny>,
    index: usize,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(field_value(obj.cast::<M>()?, index)?)
}

#[pymethods]
impl Field {
    fn __get__<'py>(
        slf: &Bound<'py, Self>,
        obj: Option<&Bound<'py, PyAny>>,
        owner: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = owner;
        match obj {
            Some(o) if !o.is_none() => (slf.get().get)(o, slf.get().index),
            _ => Ok(slf.clone().into_any()),
        }
    }

    fn __set__(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let _ = (obj, value);
        Err(PyAttributeError::new_err(format!(
            "{} is immutable: make a changed copy with .replace({}=...)",
            self.owner, self.name
        )))
    }

    fn __delete__(&self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let _ = obj;
        Err(PyAttributeError::new_err(format!(
            "{} is immutable",
            self.owner
        )))
    }

    fn __repr__(&self) -> String {
        format!("<field {}.{}>", self.owner, self.name)
    }

    #[getter]
    fn __doc__(&self) -> String {
        format!("The field {} of {}.", self.name, self.owner)
    }
}

/// Adds the class to the module, with a descriptor per field, `__match_args__`, a
/// `__signature__` for `help()` and `inspect`, and `_stub_fields` for `scripts/gen_stubs.py`.
pub fn install<M: ModelClass>(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let cls: Bound<'_, PyType> = py.get_type::<M>();
    let fields = M::Core::FIELDS;
    for (index, name) in fields.iter().enumerate() {
        let field = Field {
            index,
            name,
            owner: M::Core::NAME,
            get: get_field::<M>,
        };
        cls.setattr(*name, Py::new(py, field)?)?;
    }
    cls.setattr("__match_args__", PyTuple::new(py, fields)?)?;
    let signature = LazySignature {
        build: signature::<M>,
        built: PyOnceLock::new(),
    };
    cls.setattr("__signature__", Py::new(py, signature)?)?;
    cls.setattr("_stub_fields", stub_fields::<M>(py)?)?;
    m.add(M::Core::NAME, cls)
}

/// Each field as `(name, type taken, type given, default)`, the default being the stub's
/// text for it (`"None"`, `"()"`) or `None` when the field must be given: what
/// `scripts/gen_stubs.py` writes the class's part of `_fxpay.pyi` from.
fn stub_fields<M: ModelClass>(py: Python<'_>) -> Fallible<Bound<'_, PyTuple>> {
    let from = optional_from::<M::Core>();
    let rows = M::Core::FIELDS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ty = M::Core::TYPES.get(i).map(|t| t());
            let Some((given, read)) = ty.and_then(field_py_types::<M::Nested>) else {
                return Err(Failure::from(Error::Internal(format!(
                    "{}.{name}: no rule converts its type",
                    M::Core::NAME
                ))));
            };
            let default = (i >= from).then(|| match M::Core::ABSENT.get(i) {
                Some(Absent::Empty) => "()",
                _ => "None",
            });
            Ok((*name, given, read, default).into_pyobject(py)?)
        })
        .collect::<Fallible<Vec<_>>>()?;
    Ok(PyTuple::new(py, rows)?)
}

/// The class's `inspect.Signature`: its fields, in order, the optional ones with their
/// defaults.
fn signature<M: ModelClass>(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let inspect = py.import("inspect")?;
    let parameter = inspect.getattr("Parameter")?;
    let kind = parameter.getattr("POSITIONAL_OR_KEYWORD")?;
    let from = optional_from::<M::Core>();
    let params = M::Core::FIELDS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let kw = PyDict::new(py);
            if i >= from {
                match M::Core::ABSENT.get(i) {
                    Some(Absent::Empty) => kw.set_item("default", PyTuple::empty(py))?,
                    _ => kw.set_item("default", py.None())?,
                }
            }
            parameter.call((*name, &kind), Some(&kw))
        })
        .collect::<PyResult<Vec<_>>>()?;
    inspect.getattr("Signature")?.call1((params,))
}

/// A model class's `__signature__`, built on first use: building it needs `inspect`, whose
/// import (`ast`, `dis`, `tokenize`...) would otherwise be half the cost of `import fxpay`.
#[pyclass(frozen, module = "fxpay._fxpay", name = "signature")]
pub struct LazySignature {
    build: for<'py> fn(Python<'py>) -> PyResult<Bound<'py, PyAny>>,
    built: PyOnceLock<Py<PyAny>>,
}

#[pymethods]
impl LazySignature {
    fn __get__(
        &self,
        py: Python<'_>,
        obj: Option<&Bound<'_, PyAny>>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (obj, owner);
        self.built
            .get_or_try_init(py, || (self.build)(py).map(Bound::unbind))
            .map(|sig| sig.clone_ref(py))
    }
}

/// Declares a model class around a core model. `money` models keep every number of
/// `to_dict()` exact; `raw` ones have `raw` and pickle it. Extra methods go in braces.
macro_rules! pymodel {
    (
        $(#[$meta:meta])*
        $name:ident($core:ty) { money: $money:literal, raw: true }
        { $($extra:tt)* }
    ) => {
        $crate::models::class::pymodel! { @class $(#[$meta])* $name($core) $money {
            /// The whole JSON object the model was read from, unknown fields included
            /// (numbers exact: ``Decimal`` unless whole); an empty dict for one built by hand.
            /// A new dict on each access: changing it changes nothing in the model.
            #[getter]
            fn raw<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, PyAny>> {
                $crate::models::class::raw(slf)
            }

            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, pyo3::types::PyTuple>> {
                $crate::models::class::reduce(slf, true)
            }

            fn __setstate__(slf: &Bound<'_, Self>, state: &Bound<'_, PyAny>) -> PyResult<()> {
                $crate::models::class::set_raw(slf, state)
            }

            $($extra)*
        } }
    };
    (
        $(#[$meta:meta])*
        $name:ident($core:ty) { money: $money:literal, raw: false }
        { $($extra:tt)* }
    ) => {
        $crate::models::class::pymodel! { @class $(#[$meta])* $name($core) $money {
            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, pyo3::types::PyTuple>> {
                $crate::models::class::reduce(slf, false)
            }

            $($extra)*
        } }
    };
    (@class $(#[$meta:meta])* $name:ident($core:ty) $money:literal { $($extra:tt)* }) => {
        $(#[$meta])*
        #[pyclass(frozen, eq, hash, module = "fxpay._fxpay")]
        pub struct $name {
            core: $core,
            slots: $crate::models::class::Slots,
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.core == other.core
            }
        }

        impl std::hash::Hash for $name {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.core.hash(state)
            }
        }

        impl $crate::models::class::ModelClass for $name {
            type Core = $core;
            type Nested = NestedModels;
            const MONEY: bool = $money;
            fn core(&self) -> &$core {
                &self.core
            }
            fn slots(&self) -> &$crate::models::class::Slots {
                &self.slots
            }
            fn wrap(core: $core, raw: $crate::models::class::Raw) -> Self {
                let fields = <$core as fxpay_core::Model>::FIELDS.len();
                $name { core, slots: $crate::models::class::Slots::new(raw, fields) }
            }
        }

        #[pymethods]
        impl $name {
            #[new]
            #[pyo3(signature = (*args, **kwargs))]
            fn __new__(
                args: &Bound<'_, pyo3::types::PyTuple>,
                kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
            ) -> PyResult<Self> {
                let core = $crate::models::class::new::<Self>(args, kwargs)?;
                Ok(<Self as $crate::models::class::ModelClass>::wrap(core, $crate::models::class::Raw::None))
            }

            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                $crate::models::class::repr(slf)
            }

            fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
                $crate::models::class::repr_html(slf)
            }

            /// The wire form: camelCase keys, amounts as ``Decimal``.
            fn to_dict<'py>(slf: &Bound<'py, Self>) -> $crate::errors::Fallible<Bound<'py, PyAny>> {
                $crate::models::class::to_dict(slf)
            }

            /// A copy with the given fields changed, checked as a new model.
            #[pyo3(signature = (**changes))]
            fn replace(
                slf: &Bound<'_, Self>,
                changes: Option<&Bound<'_, pyo3::types::PyDict>>,
            ) -> PyResult<Self> {
                let core = $crate::models::class::replace(slf, changes)?;
                Ok(<Self as $crate::models::class::ModelClass>::wrap(core, $crate::models::class::Raw::None))
            }

            fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
                slf
            }

            fn __deepcopy__<'py>(slf: Bound<'py, Self>, memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
                let _ = memo;
                slf
            }

            $($extra)*
        }
    };
}
pub(crate) use pymodel;

//! The class attributes of a model class, put on it at import: one data descriptor per
//! field ([`Field`]), `__match_args__`, `__signature__` and `_stub_fields`.
use super::construction::optional_from;
use super::*;

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

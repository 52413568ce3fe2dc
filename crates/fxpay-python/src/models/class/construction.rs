//! A model built from Python: `Model(...)` (each field converted by its rule, the
//! absent ones left out) and `replace(...)`.
use super::*;

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
pub(super) fn optional_from<C: Model>() -> usize {
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

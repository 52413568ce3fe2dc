//! How a model shows: `repr`, the notebook HTML, `to_dict()`, `raw` and pickling.
use super::*;

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
/// every access, made from what the model keeps out of Python's reach: changing a dict `raw`
/// returned changes neither the model nor the next `raw`. An answer kept as text is read
/// straight into Python objects each time (no parsed tree is kept beside the text).
pub fn raw<'py, M: ModelClass>(slf: &Bound<'py, M>) -> Fallible<Bound<'py, PyAny>> {
    let py = slf.py();
    let slots = slf.get().slots();
    if let Some(json) = slots.json.get() {
        return Ok(value_to_py(py, json)?);
    }
    match &slots.source {
        // Read once, a hand-built model's `raw` is fixed: `__setstate__` then refuses one.
        Raw::None => Ok(value_to_py(
            py,
            slots
                .json
                .get_or_init(|| Value::Object(serde_json::Map::new())),
        )?),
        Raw::Text(t) => json_text_to_py(py, t),
        Raw::Value(v) => Ok(value_to_py(py, v)?),
        Raw::Body(b) => {
            let b = b.bind(py);
            match b.cast::<pyo3::types::PyBytes>() {
                Ok(bytes) => match std::str::from_utf8(bytes.as_bytes()) {
                    Ok(text) => json_text_to_py(py, text),
                    Err(e) => {
                        Err(Error::Internal(format!("the kept JSON is not UTF-8: {e}")).into())
                    }
                },
                Err(_) => json_text_to_py(py, b.cast::<PyString>()?.to_str()?),
            }
        }
    }
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

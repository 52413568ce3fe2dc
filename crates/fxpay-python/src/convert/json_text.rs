//! JSON text straight into Python objects, numbers exact: what `raw` returns for an answer
//! kept as text. The same objects [`value_to_py`](super::value_to_py) makes from a parsed
//! `serde_json::Value`, without making the `Value` first (half of a first `raw`'s
//! instructions went to that tree, its ordered maps and their hashes).
//!
//! `serde_json` parses; this only says what each JSON value becomes. With its
//! `arbitrary_precision` feature, a number that is not a whole `i64`/`u64` comes as a
//! one-entry map keyed by serde_json's number token, holding the number's text: the same
//! map `serde_json::Value` reads its numbers from.
use super::values::number_text_to_py;
use crate::errors::Fallible;
use fxpay_core::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::fmt;

/// The key under which `serde_json` (with `arbitrary_precision`) hands a number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// `text` (one JSON value) as Python objects: objects as `dict` (keys in the text's order,
/// the last of a repeated key kept), arrays as `list`, whole numbers as `int`, other numbers
/// as `decimal.Decimal` exactly as written.
pub fn json_text_to_py<'py>(py: Python<'py>, text: &str) -> Fallible<Bound<'py, PyAny>> {
    let failed = RefCell::new(None);
    // From `str`: the text is known to be UTF-8, so no string in it is checked again.
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Seed {
        py,
        failed: &failed,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    if let Some(e) = failed.into_inner() {
        return Err(e.into());
    }
    parsed.map_err(|e| Error::Internal(format!("the kept JSON does not parse: {e}")).into())
}

/// One JSON value to make; a Python error met on the way is kept in `failed` (serde's
/// errors carry text only).
#[derive(Clone, Copy)]
struct Seed<'a, 'py> {
    py: Python<'py>,
    failed: &'a RefCell<Option<PyErr>>,
}

impl<'py> Seed<'_, 'py> {
    fn made<T, E: de::Error>(self, r: PyResult<T>) -> Result<T, E> {
        r.map_err(|e| {
            *self.failed.borrow_mut() = Some(e);
            E::custom("a Python error")
        })
    }
}

impl<'de, 'py> DeserializeSeed<'de> for Seed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for Seed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.py, b).to_owned().into_any())
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Ok(PyInt::new(self.py, n).into_any())
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        Ok(PyInt::new(self.py, n).into_any())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        // Never with `arbitrary_precision`; a binary float is never made into money.
        Err(E::custom("a number read as a binary float"))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.py, s).into_any())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.py);
        while let Some(item) = seq.next_element_seed(self)? {
            self.made(list.append(item))?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.py);
        let mut first = true;
        while let Some(key) = map.next_key_seed(KeySeed(self.py))? {
            let key = match key {
                Key::Number if first => {
                    let text: String = map.next_value()?;
                    return self.made(number_text_to_py(self.py, &text));
                }
                Key::Number => PyString::new(self.py, NUMBER_TOKEN),
                Key::Text(k) => k,
            };
            first = false;
            let value = map.next_value_seed(self)?;
            self.made(dict.set_item(key, value))?;
        }
        Ok(dict.into_any())
    }
}

/// An object's key: text, or serde_json's number token (then the map is a number).
enum Key<'py> {
    Number,
    Text(Bound<'py, PyString>),
}

struct KeySeed<'py>(Python<'py>);

impl<'de, 'py> DeserializeSeed<'de> for KeySeed<'py> {
    type Value = Key<'py>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'py> Visitor<'_> for KeySeed<'py> {
    type Value = Key<'py>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object's key")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(match s == NUMBER_TOKEN {
            true => Key::Number,
            false => Key::Text(super::keys::key(self.0, s)),
        })
    }
}

//! The objects Python hands in, one rule each: checked (a `TypeError` naming the parameter
//! for anything else), then wrapped as the core takes them. `None` is no object.
use super::values::type_name;
use crate::cassette::CoreCassette;
use crate::store::PyTokenStore;
use fxpay_core::{Cassette, TokenStore};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use std::sync::Arc;

/// A token store: anything with `load(key)` and `save(key, token)` (and optionally
/// `lock(key)`), called from the blocking pool (`store.rs`).
pub fn token_store(
    obj: Option<&Bound<'_, PyAny>>,
    name: &str,
) -> PyResult<Option<Arc<dyn TokenStore>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if !(obj.hasattr(intern!(obj.py(), "load"))? && obj.hasattr(intern!(obj.py(), "save"))?) {
        return Err(PyTypeError::new_err(format!(
            "{name} must have load(key) and save(key, token), not {}",
            type_name(obj)
        )));
    }
    Ok(Some(Arc::new(PyTokenStore::new(obj.clone().unbind()))))
}

/// A cassette: a `fxpay.testing.Cassette`, whose `_core` is the core's.
pub fn cassette(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<Arc<Cassette>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let core = obj
        .getattr(intern!(obj.py(), "_core"))
        .ok()
        .and_then(|c| c.cast_into::<CoreCassette>().ok());
    match core {
        Some(c) => Ok(Some(c.get().inner.clone())),
        None => Err(PyTypeError::new_err(format!(
            "{name} must be a fxpay.testing.Cassette, not {}",
            type_name(obj)
        ))),
    }
}

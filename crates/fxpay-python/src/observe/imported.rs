//! Whether a module has been imported, read from `sys.modules` without importing it.
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// The module `name` if it has been imported (from `sys.modules`; this never imports it):
/// `Err` when `sys.modules` cannot be read. Neither logging nor tracing can be on in a
/// process that never imported its module, and importing it (`logging` costs milliseconds)
/// would only slow a cold start.
pub(super) fn imported<'py>(
    py: Python<'py>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // SAFETY: with the GIL held, `PyImport_GetModuleDict` returns a borrowed reference to
    // the interpreter's `sys.modules` dict (never null while the interpreter runs); it is
    // turned into an owned reference at once.
    let modules = unsafe {
        let ptr = pyo3::ffi::PyImport_GetModuleDict();
        if ptr.is_null() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err("no sys.modules"));
        }
        Bound::from_borrowed_ptr(py, ptr)
    };
    modules.cast_into::<PyDict>()?.get_item(name)
}

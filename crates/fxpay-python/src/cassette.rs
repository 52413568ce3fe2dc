//! `fxpay._fxpay.CoreCassette`: a `fxpay_core::Cassette` as Python holds it. The typed
//! facade is `fxpay.testing.Cassette`.
use super::bridge::guard;
use fxpay_core::Cassette;
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct CoreCassette {
    pub inner: Arc<Cassette>,
}

#[pymethods]
impl CoreCassette {
    #[new]
    fn new(path: &str, mode: &str) -> PyResult<Self> {
        let inner = guard(|| Cassette::open(path, mode))?;
        Ok(CoreCassette {
            inner: Arc::new(inner),
        })
    }

    /// `"record"` or `"replay"` (what `"once"` turned into).
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode().as_str()
    }

    #[getter]
    fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    #[getter]
    fn base_url(&self) -> Option<String> {
        self.inner.recorded_by().0
    }

    #[getter]
    fn client_id(&self) -> Option<String> {
        self.inner.recorded_by().1
    }

    /// `(recorded, played)`.
    fn counts(&self) -> (usize, usize) {
        self.inner.counts()
    }

    /// Writes the file now if the cassette records.
    fn save(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner.clone();
        py.detach(|| guard(|| inner.save()))
    }
}

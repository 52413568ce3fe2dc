//! `fxpay._fxpay.CoreSandbox`: the embedded emulator, served on the shared runtime.
use super::bridge::guard;
use super::convert::value_to_py;
use super::errors::to_pyerr;
use crate::error::Error;
use crate::sandbox::{Sandbox, SandboxConfig};
use pyo3::prelude::*;
use std::net::IpAddr;

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct CoreSandbox {
    inner: Sandbox,
}

fn block_on<T: Send>(
    py: Python<'_>,
    fut: impl std::future::Future<Output = Result<T, Error>> + Send,
) -> PyResult<T> {
    crate::runtime::check_not_forked().map_err(to_pyerr)?;
    let rt = crate::runtime::runtime();
    py.detach(|| guard(|| rt.block_on(fut)))
}

#[pymethods]
impl CoreSandbox {
    #[new]
    #[pyo3(signature = (host = "127.0.0.1", port = 0, body_timeout = 10.0))]
    fn new(py: Python<'_>, host: &str, port: u16, body_timeout: f64) -> PyResult<Self> {
        if !(body_timeout.is_finite() && body_timeout > 0.0 && body_timeout <= 86_400.0) {
            return Err(to_pyerr(Error::config(format!(
                "body_timeout must be a number of seconds greater than 0 (at most 86400), \
                 got {body_timeout}"
            ))));
        }
        let body_timeout = std::time::Duration::from_secs_f64(body_timeout);
        let host: IpAddr = host.parse().map_err(|_| {
            to_pyerr(Error::config(format!(
                "host must be an IP address, got {host:?}"
            )))
        })?;
        let config = SandboxConfig {
            host,
            port,
            body_timeout,
        };
        let inner = block_on(py, async move {
            Sandbox::start(config).await.map_err(|e| {
                Error::config(format!(
                    "the sandbox could not listen on {host}:{port}: {e}"
                ))
            })
        })?;
        Ok(CoreSandbox { inner })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.inner.base_url()
    }
    #[getter]
    fn client_id(&self) -> String {
        self.inner.client_id().to_string()
    }
    #[getter]
    fn client_secret(&self) -> String {
        self.inner.client_secret().to_string()
    }
    #[getter]
    fn redirect_uri(&self) -> String {
        self.inner.redirect_uri().to_string()
    }
    #[getter]
    fn username(&self) -> String {
        self.inner.username().to_string()
    }
    #[getter]
    fn password(&self) -> String {
        self.inner.password().to_string()
    }

    fn register_client(&self, client_id: &str, client_secret: &str, redirect_uris: Vec<String>) {
        let uris: Vec<&str> = redirect_uris.iter().map(String::as_str).collect();
        self.inner.register_client(client_id, client_secret, &uris);
    }

    #[pyo3(signature = (auth_url, allow = true))]
    fn approve(&self, py: Python<'_>, auth_url: String, allow: bool) -> PyResult<String> {
        let sb = &self.inner;
        block_on(py, async move {
            sb.approve(&auth_url, allow)
                .await
                .map_err(|e| Error::Internal(format!("sandbox approve failed: {e}")))
        })
    }

    fn advance(&self, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(to_pyerr(Error::invalid(
                "seconds must be a finite number >= 0",
            )));
        }
        self.inner.advance(seconds);
        Ok(())
    }

    fn now(&self) -> f64 {
        self.inner.now()
    }

    fn deal_status(&self, deal_id: &str) -> PyResult<String> {
        self.inner.deal_status(deal_id).ok_or_else(|| {
            to_pyerr(Error::invalid(format!(
                "no deal {deal_id:?} in this sandbox"
            )))
        })
    }

    fn deals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &serde_json::Value::Array(self.inner.deals()))
    }

    fn deliveries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &serde_json::Value::Array(self.inner.deliveries()))
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.inner.stats())
    }

    #[pyo3(signature = (path, status, times = 1, retry_after = None))]
    fn fail_next(
        &self,
        path: &str,
        status: u16,
        times: u32,
        retry_after: Option<u64>,
    ) -> PyResult<()> {
        if !(100..=599).contains(&status) {
            return Err(to_pyerr(Error::invalid(format!(
                "status must be an HTTP status, got {status}"
            ))));
        }
        self.inner.fail_next(path, status, times, retry_after);
        Ok(())
    }

    fn drop_next(&self, path: &str, after_processing: bool) {
        self.inner.drop_next(path, after_processing);
    }

    fn delay_next(&self, path: &str, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(to_pyerr(Error::invalid(
                "seconds must be a finite number >= 0",
            )));
        }
        self.inner.delay_next(path, seconds);
        Ok(())
    }

    fn shutdown(&self) {
        self.inner.shutdown();
    }
}

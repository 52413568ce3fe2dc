//! `fxpay._fxpay.CoreSandbox`: the embedded emulator, served on the shared runtime.
use super::bridge::guard;
use super::convert::value_to_py;
use super::errors::to_pyerr;
use crate::error::Error;
use crate::fork::ProcessBound;
use crate::sandbox::{Sandbox, SandboxConfig};
use pyo3::prelude::*;
use std::net::IpAddr;

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct CoreSandbox {
    /// The server runs on the runtime of the process that started it. A forked child holds
    /// a copy of its state that the server never sees: the child may read the address and
    /// credentials (and call the parent's server over HTTP), but not drive or change it.
    inner: ProcessBound<Sandbox>,
}

impl CoreSandbox {
    /// The sandbox, if this process runs it.
    fn served(&self) -> PyResult<&Sandbox> {
        if self.inner.is_current() {
            Ok(&self.inner)
        } else {
            Err(to_pyerr(Error::config(
                "this sandbox is served by the parent process: a forked child can call it \
                 over HTTP (base_url) but cannot inspect or change it",
            )))
        }
    }
}

fn block_on<T: Send>(
    py: Python<'_>,
    fut: impl std::future::Future<Output = Result<T, Error>> + Send,
) -> PyResult<T> {
    let rt = crate::runtime::runtime();
    py.detach(|| guard(|| rt.block_on(fut)))
}

#[pymethods]
impl CoreSandbox {
    #[new]
    #[pyo3(signature = (host = "127.0.0.1", port = 0, tls = false))]
    fn new(py: Python<'_>, host: &str, port: u16, tls: bool) -> PyResult<Self> {
        let host: IpAddr = host.parse().map_err(|_| {
            to_pyerr(Error::config(format!(
                "host must be an IP address, got {host:?}"
            )))
        })?;
        let config = SandboxConfig { host, port, tls };
        let inner = block_on(py, async move {
            Sandbox::start(config).await.map_err(|e| {
                Error::config(format!(
                    "the sandbox could not listen on {host}:{port}: {e}"
                ))
            })
        })?;
        Ok(CoreSandbox {
            inner: ProcessBound::new(inner),
        })
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

    #[getter]
    fn admin_token(&self) -> String {
        self.inner.admin_token().to_string()
    }
    #[getter]
    fn ca_bundle(&self) -> Option<String> {
        self.inner
            .ca_bundle()
            .map(|p| p.to_string_lossy().into_owned())
    }

    fn reset(&self) -> PyResult<()> {
        self.served()?.reset();
        Ok(())
    }

    fn register_client(
        &self,
        client_id: &str,
        client_secret: &str,
        redirect_uris: Vec<String>,
    ) -> PyResult<()> {
        let uris: Vec<&str> = redirect_uris.iter().map(String::as_str).collect();
        self.served()?
            .register_client(client_id, client_secret, &uris);
        Ok(())
    }

    #[pyo3(signature = (auth_url, allow = true))]
    fn approve(&self, py: Python<'_>, auth_url: String, allow: bool) -> PyResult<String> {
        let sb = self.served()?;
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
        self.served()?.advance(seconds);
        Ok(())
    }

    fn now(&self) -> PyResult<f64> {
        Ok(self.served()?.now())
    }

    fn deal_status(&self, deal_id: &str) -> PyResult<String> {
        self.served()?.deal_status(deal_id).ok_or_else(|| {
            to_pyerr(Error::invalid(format!(
                "no deal {deal_id:?} in this sandbox"
            )))
        })
    }

    fn deals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &serde_json::Value::Array(self.served()?.deals()))
    }

    fn deliveries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &serde_json::Value::Array(self.served()?.deliveries()))
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.served()?.stats())
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
        self.served()?.fail_next(path, status, times, retry_after);
        Ok(())
    }

    fn drop_next(&self, path: &str, after_processing: bool) -> PyResult<()> {
        self.served()?.drop_next(path, after_processing);
        Ok(())
    }

    fn delay_next(&self, path: &str, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(to_pyerr(Error::invalid(
                "seconds must be a finite number >= 0",
            )));
        }
        self.served()?.delay_next(path, seconds);
        Ok(())
    }

    /// Stops the server; in a forked child, does nothing (the parent's server goes on).
    fn shutdown(&self) {
        if self.inner.is_current() {
            self.inner.shutdown();
        }
    }
}

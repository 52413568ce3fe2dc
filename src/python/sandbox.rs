//! `fxpay._fxpay.CoreSandbox`: the embedded emulator, served on the shared runtime.
use super::bridge::guard;
use super::convert::{int, opt_text, text, type_name, value_to_py};
use super::errors::to_pyerr;
use crate::error::Error;
use crate::sandbox::{Sandbox, SandboxConfig};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;
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
    #[pyo3(signature = (host = None, port = None, body_timeout = 10.0))]
    #[pyo3(text_signature = "(host='127.0.0.1', port=0, body_timeout=10.0)")]
    fn new(
        py: Python<'_>,
        host: Option<&Bound<'_, PyAny>>,
        port: Option<&Bound<'_, PyAny>>,
        body_timeout: f64,
    ) -> PyResult<Self> {
        let host = opt_text(host, "host")?.unwrap_or_else(|| "127.0.0.1".into());
        let port = match port {
            Some(p) if !p.is_none() => int(p, "port", Error::Configuration)?,
            _ => 0,
        };
        let port = u16::try_from(port).map_err(|_| {
            to_pyerr(Error::config(format!(
                "port must be between 0 and 65535, got {port}"
            )))
        })?;
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

    fn register_client(
        &self,
        client_id: &Bound<'_, PyAny>,
        client_secret: &Bound<'_, PyAny>,
        redirect_uris: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let client_id = text(client_id, "client_id")?;
        let client_secret = text(client_secret, "client_secret")?;
        if redirect_uris.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "redirect_uris must be a list of str, not a str",
            ));
        }
        let redirect_uris = redirect_uris
            .try_iter()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "redirect_uris must be a list of str, not {}",
                    type_name(redirect_uris)
                ))
            })?
            .enumerate()
            .map(|(i, u)| text(&u?, &format!("redirect_uris[{i}]")))
            .collect::<PyResult<Vec<String>>>()?;
        let uris: Vec<&str> = redirect_uris.iter().map(String::as_str).collect();
        self.inner
            .register_client(&client_id, &client_secret, &uris);
        Ok(())
    }

    #[pyo3(signature = (auth_url, allow = true))]
    fn approve(
        &self,
        py: Python<'_>,
        auth_url: &Bound<'_, PyAny>,
        allow: bool,
    ) -> PyResult<String> {
        let auth_url = text(auth_url, "auth_url")?;
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

    fn deal_status(&self, deal_id: &Bound<'_, PyAny>) -> PyResult<String> {
        let deal_id = text(deal_id, "deal_id")?;
        self.inner.deal_status(&deal_id).ok_or_else(|| {
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

    #[pyo3(signature = (path, status, times = None, retry_after = None))]
    #[pyo3(text_signature = "(self, path, status, times=1, retry_after=None)")]
    fn fail_next(
        &self,
        path: &Bound<'_, PyAny>,
        status: &Bound<'_, PyAny>,
        times: Option<&Bound<'_, PyAny>>,
        retry_after: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let path = text(path, "path")?;
        let status = int(status, "status", Error::InvalidRequest)?;
        let status = u16::try_from(status)
            .ok()
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| {
                to_pyerr(Error::invalid(format!(
                    "status must be an HTTP status, got {status}"
                )))
            })?;
        let times = match times {
            Some(t) if !t.is_none() => int(t, "times", Error::InvalidRequest)?,
            _ => 1,
        };
        let times = u32::try_from(times).map_err(|_| {
            to_pyerr(Error::invalid(format!(
                "times must be between 0 and 4294967295, got {times}"
            )))
        })?;
        let retry_after = match retry_after {
            Some(r) if !r.is_none() => {
                let r = int(r, "retry_after", Error::InvalidRequest)?;
                Some(u64::try_from(r).map_err(|_| {
                    to_pyerr(Error::invalid(format!(
                        "retry_after must be a number of seconds >= 0, got {r}"
                    )))
                })?)
            }
            _ => None,
        };
        self.inner.fail_next(&path, status, times, retry_after);
        Ok(())
    }

    fn drop_next(&self, path: &Bound<'_, PyAny>, after_processing: bool) -> PyResult<()> {
        self.inner.drop_next(&text(path, "path")?, after_processing);
        Ok(())
    }

    fn delay_next(&self, path: &Bound<'_, PyAny>, seconds: f64) -> PyResult<()> {
        let path = text(path, "path")?;
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(to_pyerr(Error::invalid(
                "seconds must be a finite number >= 0",
            )));
        }
        self.inner.delay_next(&path, seconds);
        Ok(())
    }

    fn shutdown(&self) {
        self.inner.shutdown();
    }
}

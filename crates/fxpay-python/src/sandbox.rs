//! `fxpay._fxpay.CoreSandbox`: the embedded emulator, served on the shared runtime, and
//! its inspection (state, deals, deliveries, stats); its faults are in `sandbox/faults.rs`.
mod faults;

use super::convert::{int, opt_text, text, type_name, value_to_py};
use super::errors::guard;
use super::errors::{Failure, Fallible};
use fxpay_core::{Error, ProcessBound};
use fxpay_sandbox::{Sandbox, SandboxConfig, SendError};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;
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
    fn served(&self) -> Fallible<&Sandbox> {
        if self.inner.is_current() {
            Ok(&self.inner)
        } else {
            Err(Failure::from(Error::config(
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
    let rt = fxpay_core::runtime();
    py.detach(|| guard(|| rt.block_on(fut)))
}

/// An inspection value (no money) for pythonize: numbers as the ints or floats they are.
/// (`serde_json::Value` itself, with the `arbitrary_precision` feature fxpay needs for
/// money, serializes a number as a private struct that pythonize would make a dict.)
struct Inspection<'a>(&'a serde_json::Value);

impl serde::Serialize for Inspection<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use serde_json::Value;
        match self.0 {
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => s.serialize_u64(u),
                (_, Some(i), _) => s.serialize_i64(i),
                (_, _, Some(f)) => s.serialize_f64(f),
                _ => s.serialize_str(n.as_str()),
            },
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for item in a {
                    seq.serialize_element(&Inspection(item))?;
                }
                seq.end()
            }
            Value::Object(o) => {
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o {
                    map.serialize_entry(k, &Inspection(v))?;
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

#[pymethods]
impl CoreSandbox {
    #[new]
    #[pyo3(signature = (host = None, port = None, tls = false, body_timeout = 10.0, idle_timeout = 60.0, client_auth = false, rate_limit = None))]
    #[pyo3(
        text_signature = "(host='127.0.0.1', port=0, tls=False, body_timeout=10.0, idle_timeout=60.0, client_auth=False, rate_limit=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        host: Option<&Bound<'_, PyAny>>,
        port: Option<&Bound<'_, PyAny>>,
        tls: bool,
        body_timeout: f64,
        idle_timeout: f64,
        client_auth: bool,
        rate_limit: Option<f64>,
    ) -> Fallible<Self> {
        if let Some(n) = rate_limit {
            fxpay_core::check_per_second("rate_limit", n)?;
        }
        if client_auth && !tls {
            return Err(Failure::from(Error::config(
                "client_auth=True needs tls=True: client certificates are a TLS feature",
            )));
        }
        let host = opt_text(host, "host")?.unwrap_or_else(|| "127.0.0.1".into());
        let port = match port {
            Some(p) if !p.is_none() => int(p, "port", Error::Configuration)?,
            _ => 0,
        };
        let port = u16::try_from(port).map_err(|_| {
            Failure::from(Error::config(format!(
                "port must be between 0 and 65535, got {port}"
            )))
        })?;
        if !(body_timeout.is_finite() && body_timeout > 0.0 && body_timeout <= 86_400.0) {
            return Err(Failure::from(Error::config(format!(
                "body_timeout must be a number of seconds greater than 0 (at most 86400), got {}",
                fxpay_core::seconds_text(body_timeout)
            ))));
        }
        let body_timeout = std::time::Duration::from_secs_f64(body_timeout);
        if !(idle_timeout.is_finite() && idle_timeout > 0.0 && idle_timeout <= 86_400.0) {
            return Err(Failure::from(Error::config(format!(
                "idle_timeout must be a number of seconds greater than 0 (at most 86400), got {}",
                fxpay_core::seconds_text(idle_timeout)
            ))));
        }
        let idle_timeout = std::time::Duration::from_secs_f64(idle_timeout);
        let host: IpAddr = host.parse().map_err(|_| {
            Failure::from(Error::config(format!(
                "host must be an IP address, got {host:?}"
            )))
        })?;
        let config = SandboxConfig {
            host,
            port,
            tls,
            client_auth,
            body_timeout,
            idle_timeout,
            rate_limit,
        };
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
    /// With `client_auth`: a client certificate (PEM) the sandbox's CA issued.
    #[getter]
    fn client_cert(&self) -> Option<String> {
        self.inner
            .client_identity()
            .map(|(c, _)| c.to_string_lossy().into_owned())
    }
    /// With `client_auth`: the key (PEM) of `client_cert`.
    #[getter]
    fn client_key(&self) -> Option<String> {
        self.inner
            .client_identity()
            .map(|(_, k)| k.to_string_lossy().into_owned())
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
            .collect::<Fallible<Vec<String>>>()?;
        let uris: Vec<&str> = redirect_uris.iter().map(String::as_str).collect();
        self.served()?
            .register_client(&client_id, &client_secret, &uris)
            .map_err(|e| Failure::from(Error::invalid(e)))?;
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
        let sb = self.served()?;
        block_on(py, async move {
            sb.approve(&auth_url, allow)
                .await
                .map_err(|e| Error::Internal(format!("sandbox approve failed: {e}")))
        })
    }

    fn advance(&self, seconds: f64) -> Fallible<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(Failure::from(Error::invalid(
                "seconds must be a finite number >= 0",
            )));
        }
        self.served()?.advance(seconds);
        Ok(())
    }

    fn now(&self) -> PyResult<f64> {
        Ok(self.served()?.now())
    }

    fn deal_status(&self, deal_id: &Bound<'_, PyAny>) -> Fallible<String> {
        let deal_id = text(deal_id, "deal_id")?;
        self.served()?.deal_status(&deal_id).ok_or_else(|| {
            Failure::from(Error::invalid(format!(
                "no deal {deal_id:?} in this sandbox"
            )))
        })
    }

    /// The deals hold amounts: exact `Decimal`s (not through pythonize, see `models/class.rs`).
    fn deals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &serde_json::Value::Array(self.served()?.deals()))
    }

    /// No money: counts, statuses, the event bodies and the instants as floats, as a
    /// served sandbox's JSON gives them.
    fn deliveries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = serde_json::Value::Array(self.served()?.deliveries());
        Ok(pythonize::pythonize(py, &Inspection(&list))?)
    }

    #[pyo3(signature = (count, page_size = None))]
    fn set_virtual_accounts(
        &self,
        count: &Bound<'_, PyAny>,
        page_size: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let count = int(count, "count", Error::InvalidRequest)?;
        const MAX: usize = fxpay_sandbox::MAX_GENERATED_ACCOUNTS;
        let count = usize::try_from(count)
            .ok()
            .filter(|c| *c <= MAX)
            .ok_or_else(|| {
                Failure::from(Error::invalid(format!(
                    "count must be between 0 and {MAX}, got {count}"
                )))
            })?;
        let page_size = match page_size {
            Some(p) if !p.is_none() => {
                let p = int(p, "page_size", Error::InvalidRequest)?;
                let ok = usize::try_from(p).ok().filter(|p| (1..=MAX).contains(p));
                Some(ok.ok_or_else(|| {
                    Failure::from(Error::invalid(format!(
                        "page_size must be between 1 and {MAX}, got {p}"
                    )))
                })?)
            }
            _ => None,
        };
        self.served()?.set_virtual_accounts(count, page_size);
        Ok(())
    }

    /// Sends a spot deal's recorded `DealCreated` again; the delivery made.
    fn redeliver<'py>(
        &self,
        py: Python<'py>,
        process_id: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let process_id = text(process_id, "process_id")?;
        let sb = self.served()?.clone();
        let pid = process_id.clone();
        let d = block_on(py, async move { Ok(sb.redeliver(&pid).await) })?;
        let d = d.ok_or_else(|| {
            Failure::from(Error::invalid(format!(
                "no DealCreated was sent for process {process_id:?} in this sandbox"
            )))
        })?;
        Ok(pythonize::pythonize(py, &Inspection(&d))?)
    }

    /// POSTs `body` (a `DealCreated` built by the caller) to `url` once; the delivery made.
    #[pyo3(signature = (url, body, nonce = None))]
    fn send_event<'py>(
        &self,
        py: Python<'py>,
        url: &Bound<'py, PyAny>,
        body: &Bound<'py, PyAny>,
        nonce: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let url = text(url, "url")?;
        let body = text(body, "body")?;
        let nonce = opt_text(nonce, "nonce")?;
        let sb = self.served()?.clone();
        let d = block_on(py, async move {
            sb.send_event(&url, &body, nonce.as_deref())
                .await
                .map_err(|e| {
                    Error::invalid(match e {
                        SendError::Url(e) => format!("url is not deliverable: {e}"),
                        SendError::Nonce => "nonce is not a valid header value".to_owned(),
                    })
                })
        })?;
        Ok(pythonize::pythonize(py, &Inspection(&d))?)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize::pythonize(
            py,
            &Inspection(&self.served()?.stats()),
        )?)
    }

    /// Stops the server; in a forked child, does nothing (the parent's server goes on).
    fn shutdown(&self) {
        if self.inner.is_current() {
            self.inner.shutdown();
        }
    }
}

//! The client made: `Client.__new__`, `__init__` (each argument converted and checked, the
//! core client built) and `from_env`.
use super::{default, Client, Open};
use crate::bridge::guard;
use crate::convert::objects;
use crate::convert::{int, opt_text, path, seconds, text};
use crate::errors::{Failure, Fallible};
use crate::journal::PyJournal;
use fxpay_core::{Client as Core, ClientConfig, Error};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    #[pyo3(
        text_signature = "(client_id, client_secret, *, base_url, timeout=30.0, max_retries=2, token_store=None, user_agent=None, ca_bundle=None, cassette=None, journal=None, deadline=None, proxy=None, client_cert=None, client_key=None, rate_limit=None, max_response_bytes=8388608)"
    )]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Client {
            open: OnceLock::new(),
            closed: Arc::new(AtomicBool::new(false)),
            parent_closed: None,
        }
    }

    #[pyo3(signature = (client_id, client_secret, *, base_url, timeout = default(30.0), max_retries = default(2),  token_store = None, user_agent = None, ca_bundle = None, cassette = None, journal = None, deadline = None, proxy = None, client_cert = None, client_key = None, rate_limit = None, max_response_bytes = default(8 * 1024 * 1024)))]
    #[allow(clippy::too_many_arguments)]
    fn __init__(
        &self,
        py: Python<'_>,
        client_id: &Bound<'_, PyAny>,
        client_secret: &Bound<'_, PyAny>,
        base_url: &Bound<'_, PyAny>,
        timeout: Py<PyAny>,
        max_retries: Py<PyAny>,
        token_store: Option<&Bound<'_, PyAny>>,
        user_agent: Option<&Bound<'_, PyAny>>,
        ca_bundle: Option<&Bound<'_, PyAny>>,
        cassette: Option<&Bound<'_, PyAny>>,
        journal: Option<&Bound<'_, PyAny>>,
        deadline: Option<&Bound<'_, PyAny>>,
        proxy: Option<&Bound<'_, PyAny>>,
        client_cert: Option<&Bound<'_, PyAny>>,
        client_key: Option<&Bound<'_, PyAny>>,
        rate_limit: Option<&Bound<'_, PyAny>>,
        max_response_bytes: Py<PyAny>,
    ) -> Fallible<()> {
        if self.open.get().is_some() {
            return Err(Failure::from(Error::config(
                "this Client is initialised already",
            )));
        }
        let client_id = text(client_id, "client_id")?;
        let client_secret = text(client_secret, "client_secret")?;
        let base_url = text(base_url, "base_url")?;
        let timeout = seconds(timeout.bind(py), "timeout")?;
        let max_retries = int(max_retries.bind(py), "max_retries", Error::Configuration)?;
        let store = objects::token_store(token_store, "token_store")?;
        let user_agent = opt_text(user_agent, "user_agent")?;
        let ca_bundle = match path(ca_bundle, "ca_bundle")? {
            Some(p) => Some(p),
            // As Python's ssl module and requests do.
            None => std::env::var("SSL_CERT_FILE")
                .ok()
                .filter(|p| !p.is_empty()),
        };
        let cassette = objects::cassette(cassette, "cassette")?;
        let deadline = match deadline.filter(|d| !d.is_none()) {
            Some(d) => Some(seconds(d, "deadline")?),
            None => None,
        };
        let proxy = opt_text(proxy, "proxy")?;
        let client_cert = path(client_cert, "client_cert")?;
        let client_key = path(client_key, "client_key")?;
        let rate_limit = crate::rate_limit::from_arg(rate_limit)?;
        let max_response_bytes = int(
            max_response_bytes.bind(py),
            "max_response_bytes",
            Error::Configuration,
        )?;
        if client_key.is_some() && client_cert.is_none() {
            return Err(Failure::from(Error::config(
                "client_key needs client_cert (the certificate it is the key of)",
            )));
        }
        let journal = match journal.filter(|j| !j.is_none()) {
            Some(j) => Some(PyJournal::from_py(j, "journal")?),
            None => None,
        };
        let (for_core, for_config) = (store.clone(), cassette.clone());
        let core = py.detach(|| {
            guard(move || {
                let mut cfg = ClientConfig::new(&client_id, &client_secret, &base_url)?
                    .with_timeout(timeout)?
                    .with_max_retries(max_retries)?
                    .with_max_response_bytes(max_response_bytes)?;
                if let Some(d) = deadline {
                    cfg = cfg.with_deadline(d)?;
                }
                if let Some(p) = &proxy {
                    cfg = cfg.with_proxy(p)?;
                }
                cfg.client_cert = client_cert.map(|c| (c, client_key));
                cfg.user_agent_suffix = user_agent;
                cfg.ca_bundle = ca_bundle;
                cfg.cassette = for_config;
                cfg.rate_limit = rate_limit;
                // The HTTP client must be built inside the runtime that will drive it.
                let _enter = fxpay_core::runtime().enter();
                Core::new(cfg, for_core)
            })
        })?;
        let _ = self.open.set(Open {
            core,
            store,
            cassette,
            journal,
        });
        Ok(())
    }

    /// A client from ``FXPAY_CLIENT_ID``, ``FXPAY_CLIENT_SECRET`` and ``FXPAY_BASE_URL``, and
    /// ``FXPAY_CA_BUNDLE``, ``FXPAY_CLIENT_CERT`` and ``FXPAY_CLIENT_KEY`` when set (the lines
    /// a served sandbox prints); keyword arguments go to the constructor and win.
    #[classmethod]
    #[pyo3(signature = (**kwargs))]
    fn from_env<'py>(
        cls: &Bound<'py, PyType>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> Fallible<Bound<'py, PyAny>> {
        let py = cls.py();
        let environ = py.import("os")?.getattr("environ")?;
        let names = ["FXPAY_CLIENT_ID", "FXPAY_CLIENT_SECRET", "FXPAY_BASE_URL"];
        let mut values = Vec::with_capacity(names.len());
        let mut missing = Vec::new();
        for name in names {
            let v = environ.call_method1("get", (name,))?;
            if v.is_none() || !v.is_truthy()? {
                missing.push(name);
            }
            values.push(v);
        }
        if !missing.is_empty() {
            return Err(Failure::from(Error::config(format!(
                "missing environment variable(s): {}",
                missing.join(", ")
            ))));
        }
        let all = PyDict::new(py);
        if let Some(kw) = kwargs {
            if kw.contains("base_url")? {
                return Err(PyTypeError::new_err(
                    "from_env() takes base_url from FXPAY_BASE_URL, not as an argument",
                )
                .into());
            }
            all.update(kw.as_mapping())?;
        }
        all.set_item("base_url", &values[2])?;
        // The files a served sandbox prints (--tls, --client-auth), when set and not given.
        for (name, arg) in [
            ("FXPAY_CA_BUNDLE", "ca_bundle"),
            ("FXPAY_CLIENT_CERT", "client_cert"),
            ("FXPAY_CLIENT_KEY", "client_key"),
        ] {
            let v = environ.call_method1("get", (name,))?;
            if !v.is_none() && v.is_truthy()? && !all.contains(arg)? {
                all.set_item(arg, v)?;
            }
        }
        Ok(cls.call((&values[0], &values[1]), Some(&all))?)
    }
}

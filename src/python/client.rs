//! `fxpay._fxpay.CoreClient`: the core client as Python sees it. The typed facade
//! `fxpay.Client` wraps it; every method takes `aio` and returns either the result
//! (blocking, GIL released) or an asyncio awaitable.
use super::bridge::{guard, run};
use super::convert::{amount_text, Int, Text};
use super::errors::to_pyerr;
use super::logging::observer;
use super::models::{token_from_py, Out};
use super::session::{on_token_callback, CoreUserSession};
use super::store::PyTokenStore;
use crate::api::Client;
use crate::auth::authorize::AuthorizationRequest;
use crate::auth::TokenStore;
use crate::config::ClientConfig;
use crate::error::Error;
use crate::models::{Beneficiary, DealBeneficiary, DealRequest, QuoteRequest};
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct CoreClient {
    inner: Client,
    store: Option<Arc<dyn TokenStore>>,
}

fn deal_request(
    quote_id: Text,
    funding_source: Text,
    beneficiaries: &Bound<'_, PyAny>,
    channel: Option<Text>,
) -> PyResult<DealRequest> {
    let mut list = Vec::new();
    for (i, b) in beneficiaries.try_iter()?.enumerate() {
        let b = b?;
        let field = format!("beneficiaries[{i}].amount");
        let amount = amount_text(&field, &b.getattr("amount")?)?;
        let text = |name: &str| -> PyResult<String> {
            b.getattr(name)?
                .extract::<Text>()
                .map(|t| t.0)
                .map_err(|e| named(e, &format!("beneficiaries[{i}].{name}")))
        };
        list.push(DealBeneficiary {
            beneficiary_id: text("beneficiary_id")?,
            amount: guard(|| crate::money::parse_amount(&field, &amount))?,
            pay_reason: text("pay_reason")?,
            pay_reference: text("pay_reference")?,
        });
    }
    Ok(DealRequest {
        quote_id: quote_id.0,
        funding_source: funding_source.0,
        channel: channel.map(|c| c.0),
        beneficiaries: list,
    })
}

/// A `TypeError` from a conversion, with the field it was about in front.
fn named(e: PyErr, field: &str) -> PyErr {
    Python::attach(|py| {
        if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
            pyo3::exceptions::PyTypeError::new_err(format!("{field}: {}", e.value(py)))
        } else {
            e
        }
    })
}

#[pymethods]
impl CoreClient {
    #[new]
    #[pyo3(signature = (client_id, client_secret, base_url, timeout = 30.0, max_retries = Int(2), token_store = None, user_agent = None, ca_bundle = None))]
    #[pyo3(
        text_signature = "(client_id, client_secret, base_url, timeout=30.0, max_retries=2, token_store=None, user_agent=None, ca_bundle=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        client_id: Text,
        client_secret: Text,
        base_url: Text,
        timeout: f64,
        max_retries: Int,
        token_store: Option<Py<PyAny>>,
        user_agent: Option<Text>,
        ca_bundle: Option<Text>,
    ) -> PyResult<Self> {
        let (client_id, client_secret, base_url) = (client_id.0, client_secret.0, base_url.0);
        let (max_retries, user_agent, ca_bundle) = (
            max_retries.0,
            user_agent.map(|t| t.0),
            ca_bundle.map(|t| t.0),
        );
        let store: Option<Arc<dyn TokenStore>> =
            token_store.map(|s| Arc::new(PyTokenStore::new(s)) as Arc<dyn TokenStore>);
        let store_for_client = store.clone();
        let inner = guard(move || {
            let mut cfg = ClientConfig::new(&client_id, &client_secret, &base_url)?
                .with_timeout(timeout)?
                .with_max_retries(max_retries)?;
            cfg.user_agent_suffix = user_agent;
            cfg.ca_bundle = ca_bundle;
            // The HTTP client must be built inside the runtime that will drive it.
            let _enter = crate::runtime::runtime().enter();
            Client::new(cfg, store_for_client)
        })?;
        Ok(CoreClient { inner, store })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.inner.config().base_url.clone()
    }

    #[getter]
    fn client_id(&self) -> String {
        self.inner.config().client_id.clone()
    }

    #[getter]
    fn timeout(&self) -> f64 {
        self.inner.config().timeout.as_secs_f64()
    }

    #[getter]
    fn max_retries(&self) -> u32 {
        self.inner.config().retry.max_retries
    }

    #[getter]
    fn user_agent(&self) -> String {
        self.inner.config().user_agent()
    }

    fn payments_token(&self, py: Python<'_>, aio: bool) -> PyResult<Py<PyAny>> {
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            let t = c.payments_token(obs.as_deref()).await?;
            Ok(Out::Token(Box::new((*t).clone())))
        })
    }

    fn create_quote(
        &self,
        py: Python<'_>,
        buy_currency: Text,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: Text,
        beneficiaries: Int,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let amount = amount_text("buy_amount", buy_amount)?;
        let req = guard(|| {
            QuoteRequest::new(&buy_currency.0, &amount, &sell_currency.0, beneficiaries.0)
        })?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Str(c.create_quote(&req, obs.as_deref()).await?.0))
        })
    }

    fn get_quote(&self, py: Python<'_>, quote_id: Text, aio: bool) -> PyResult<Py<PyAny>> {
        let quote_id = quote_id.0;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            // `raw` goes to Python as the answer's JSON text, decoded on first use.
            let (quote, text) = c.get_quote(&quote_id, obs.as_deref()).await?;
            Ok(Out::Quote(Box::new((quote, text))))
        })
    }

    /// `body` is the beneficiary's wire form as JSON text (it carries no amounts).
    fn create_beneficiary(&self, py: Python<'_>, body: Text, aio: bool) -> PyResult<Py<PyAny>> {
        let b: Beneficiary = serde_json::from_str(&body.0)
            .map_err(|e| to_pyerr(Error::invalid(format!("the beneficiary is not valid: {e}"))))?;
        guard(|| b.check())?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Str(c.create_beneficiary(&b, obs.as_deref()).await?.0))
        })
    }

    #[pyo3(signature = (quote_id, funding_source, beneficiaries, channel, aio))]
    fn create_deal(
        &self,
        py: Python<'_>,
        quote_id: Text,
        funding_source: Text,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<Text>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let req = deal_request(quote_id, funding_source, beneficiaries, channel)?;
        guard(|| req.check())?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Deal(Box::new(
                c.create_deal(req, obs.as_deref()).await?,
            )))
        })
    }

    #[pyo3(signature = (quote_id, funding_source, beneficiaries, channel, callback_url, callback_nonce, aio))]
    #[allow(clippy::too_many_arguments)]
    fn create_spot_deal(
        &self,
        py: Python<'_>,
        quote_id: Text,
        funding_source: Text,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<Text>,
        callback_url: Option<Text>,
        callback_nonce: Option<Text>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let (callback_url, callback_nonce) =
            (callback_url.map(|t| t.0), callback_nonce.map(|t| t.0));
        let req = deal_request(quote_id, funding_source, beneficiaries, channel)?;
        guard(|| req.check())?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            let out = c
                .create_spot_deal(req, callback_url, callback_nonce, obs.as_deref())
                .await?;
            Ok(Out::Spot(Box::new(out)))
        })
    }

    /// Returns `(url, state, redirect_uri)`.
    #[pyo3(signature = (redirect_uri, state = None))]
    fn authorization_url(
        &self,
        redirect_uri: Text,
        state: Option<Text>,
    ) -> PyResult<(String, String, String)> {
        let state = state.map(|s| s.0);
        let a = guard(|| {
            self.inner
                .authorization_url(&redirect_uri.0, state.as_deref())
        })?;
        Ok((a.url, a.state, a.redirect_uri))
    }

    fn exchange_code(
        &self,
        py: Python<'_>,
        url: Text,
        state: Text,
        redirect_uri: Text,
        callback: Text,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let auth = AuthorizationRequest {
            url: url.0,
            state: state.0,
            redirect_uri: redirect_uri.0,
        };
        let callback = callback.0;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Token(Box::new(
                c.exchange_code(&auth, &callback, obs.as_deref()).await?,
            )))
        })
    }

    fn refresh_token(&self, py: Python<'_>, refresh_token: Text, aio: bool) -> PyResult<Py<PyAny>> {
        let refresh_token = refresh_token.0;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Token(Box::new(
                c.refresh_token(&refresh_token, obs.as_deref()).await?,
            )))
        })
    }

    /// A session over `token`. With `key` and a token store, refreshes are shared with every
    /// process that uses the same store and key.
    #[pyo3(signature = (token, on_token = None, key = None))]
    fn user_session(
        &self,
        token: &Bound<'_, PyAny>,
        on_token: Option<Py<PyAny>>,
        key: Option<Text>,
    ) -> PyResult<CoreUserSession> {
        let t = token_from_py(token)?;
        let shared = match (key.map(|k| k.0), &self.store) {
            (Some(k), Some(store)) => Some((
                store.clone(),
                format!("fxpay:{}:user:{k}", self.inner.config().base_url),
            )),
            (Some(_), None) => {
                return Err(to_pyerr(Error::config(
                    "user_session(key=...) needs a Client with a token_store",
                )));
            }
            _ => None,
        };
        let session = self
            .inner
            .user_session(t, on_token.map(on_token_callback), shared);
        Ok(CoreUserSession::new(session))
    }
}

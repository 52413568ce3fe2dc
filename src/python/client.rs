//! `fxpay._fxpay.CoreClient`: the core client as Python sees it. The typed facade
//! `fxpay.Client` wraps it; every method takes `aio` and returns either the result
//! (blocking, GIL released) or an asyncio awaitable.
use super::bridge::{guard, run};
use super::convert::amount_text;
use super::errors::to_pyerr;
use super::models::{token_from_py, Out};
use super::session::{on_token_callback, CoreUserSession};
use super::store::PyTokenStore;
use super::trace::observer;
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
    quote_id: String,
    funding_source: String,
    beneficiaries: &Bound<'_, PyAny>,
    channel: Option<String>,
) -> PyResult<DealRequest> {
    let mut list = Vec::new();
    for (i, b) in beneficiaries.try_iter()?.enumerate() {
        let b = b?;
        let field = format!("beneficiaries[{i}].amount");
        let amount = amount_text(&field, &b.getattr("amount")?)?;
        list.push(DealBeneficiary {
            beneficiary_id: b.getattr("beneficiary_id")?.extract()?,
            amount: guard(|| crate::money::parse_amount(&field, &amount))?,
            pay_reason: b.getattr("pay_reason")?.extract()?,
            pay_reference: b.getattr("pay_reference")?.extract()?,
        });
    }
    Ok(DealRequest {
        quote_id,
        funding_source,
        channel,
        beneficiaries: list,
    })
}

#[pymethods]
impl CoreClient {
    #[new]
    #[pyo3(signature = (client_id, client_secret, base_url, timeout = 30.0, max_retries = 2, token_store = None, user_agent = None, ca_bundle = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        client_id: &str,
        client_secret: &str,
        base_url: &str,
        timeout: f64,
        max_retries: i64,
        token_store: Option<Py<PyAny>>,
        user_agent: Option<String>,
        ca_bundle: Option<String>,
    ) -> PyResult<Self> {
        let store: Option<Arc<dyn TokenStore>> =
            token_store.map(|s| Arc::new(PyTokenStore::new(s)) as Arc<dyn TokenStore>);
        let store_for_client = store.clone();
        let inner = guard(move || {
            let mut cfg = ClientConfig::new(client_id, client_secret, base_url)?
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
        buy_currency: &str,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: &str,
        beneficiaries: i64,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let amount = amount_text("buy_amount", buy_amount)?;
        let req = guard(|| QuoteRequest::new(buy_currency, &amount, sell_currency, beneficiaries))?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Str(c.create_quote(&req, obs.as_deref()).await?.0))
        })
    }

    fn get_quote(&self, py: Python<'_>, quote_id: String, aio: bool) -> PyResult<Py<PyAny>> {
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            // `raw` goes to Python as the answer's JSON text, decoded on first use.
            let (quote, text) = c.get_quote(&quote_id, obs.as_deref()).await?;
            Ok(Out::Quote(Box::new((quote, text))))
        })
    }

    /// `body` is the beneficiary's wire form as JSON text (it carries no amounts).
    fn create_beneficiary(&self, py: Python<'_>, body: &str, aio: bool) -> PyResult<Py<PyAny>> {
        let b: Beneficiary = serde_json::from_str(body)
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
        quote_id: String,
        funding_source: String,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<String>,
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
        quote_id: String,
        funding_source: String,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<String>,
        callback_url: Option<String>,
        callback_nonce: Option<String>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
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
        redirect_uri: &str,
        state: Option<&str>,
    ) -> PyResult<(String, String, String)> {
        let a = guard(|| self.inner.authorization_url(redirect_uri, state))?;
        Ok((a.url, a.state, a.redirect_uri))
    }

    fn exchange_code(
        &self,
        py: Python<'_>,
        url: String,
        state: String,
        redirect_uri: String,
        callback: String,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let auth = AuthorizationRequest {
            url,
            state,
            redirect_uri,
        };
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Token(Box::new(
                c.exchange_code(&auth, &callback, obs.as_deref()).await?,
            )))
        })
    }

    fn refresh_token(
        &self,
        py: Python<'_>,
        refresh_token: String,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
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
        key: Option<String>,
    ) -> PyResult<CoreUserSession> {
        let t = token_from_py(token)?;
        let shared = match (key, &self.store) {
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

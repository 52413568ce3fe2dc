//! `fxpay._fxpay.CoreClient`: the core client as Python sees it. The typed facade
//! `fxpay.Client` wraps it; every method takes `aio` and returns either the result
//! (blocking, GIL released) or an asyncio awaitable.
use super::bridge::{guard, run};
use super::convert::{amount_text, int, opt_text, text};
use super::errors::to_pyerr;
use super::models::{token_from_py, Out};
use super::session::{on_token_callback, CoreUserSession};
use super::store::PyTokenStore;
use super::trace::observer;
use fxpay_core::api::Client;
use fxpay_core::auth::authorize::{AuthorizationRequest, AuthorizeParams};
use fxpay_core::auth::TokenStore;
use fxpay_core::config::ClientConfig;
use fxpay_core::error::Error;
use fxpay_core::models::{Beneficiary, DealBeneficiary, DealRequest, QuoteRequest};
use pyo3::prelude::*;
use std::sync::Arc;

#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct CoreClient {
    inner: Client,
    store: Option<Arc<dyn TokenStore>>,
}

fn deal_request(
    quote_id: &Bound<'_, PyAny>,
    funding_source: &Bound<'_, PyAny>,
    beneficiaries: &Bound<'_, PyAny>,
    channel: Option<&Bound<'_, PyAny>>,
) -> PyResult<DealRequest> {
    let quote_id = text(quote_id, "quote_id")?;
    let funding_source = text(funding_source, "funding_source")?;
    let channel = opt_text(channel, "channel")?;
    let mut list = Vec::new();
    for (i, b) in beneficiaries.try_iter()?.enumerate() {
        let b = b?;
        let field = format!("beneficiaries[{i}].amount");
        let amount = amount_text(&field, &b.getattr("amount")?)?;
        let field_text =
            |name: &str| text(&b.getattr(name)?, &format!("beneficiaries[{i}].{name}"));
        list.push(DealBeneficiary {
            beneficiary_id: field_text("beneficiary_id")?,
            amount: guard(|| fxpay_core::money::parse_amount(&field, &amount))?,
            pay_reason: field_text("pay_reason")?,
            pay_reference: field_text("pay_reference")?,
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
    #[pyo3(signature = (client_id, client_secret, base_url, timeout = 30.0, max_retries = None, token_store = None, user_agent = None, ca_bundle = None, cassette = None))]
    #[pyo3(
        text_signature = "(client_id, client_secret, base_url, timeout=30.0, max_retries=2, token_store=None, user_agent=None, ca_bundle=None, cassette=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        client_id: &Bound<'_, PyAny>,
        client_secret: &Bound<'_, PyAny>,
        base_url: &Bound<'_, PyAny>,
        timeout: f64,
        max_retries: Option<&Bound<'_, PyAny>>,
        token_store: Option<Py<PyAny>>,
        user_agent: Option<&Bound<'_, PyAny>>,
        ca_bundle: Option<&Bound<'_, PyAny>>,
        cassette: Option<Bound<'_, super::cassette::CoreCassette>>,
    ) -> PyResult<Self> {
        let cassette = cassette.map(|c| c.get().inner.clone());
        let client_id = text(client_id, "client_id")?;
        let client_secret = text(client_secret, "client_secret")?;
        let base_url = text(base_url, "base_url")?;
        let max_retries = match max_retries {
            Some(n) if !n.is_none() => int(n, "max_retries", Error::Configuration)?,
            _ => 2,
        };
        let user_agent = opt_text(user_agent, "user_agent")?;
        let ca_bundle = opt_text(ca_bundle, "ca_bundle")?;
        let store: Option<Arc<dyn TokenStore>> =
            token_store.map(|s| Arc::new(PyTokenStore::new(s)) as Arc<dyn TokenStore>);
        let store_for_client = store.clone();
        let inner = guard(move || {
            let mut cfg = ClientConfig::new(&client_id, &client_secret, &base_url)?
                .with_timeout(timeout)?
                .with_max_retries(max_retries)?;
            cfg.user_agent_suffix = user_agent;
            cfg.ca_bundle = ca_bundle;
            cfg.cassette = cassette;
            // The HTTP client must be built inside the runtime that will drive it.
            let _enter = fxpay_core::runtime::runtime().enter();
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
        buy_currency: &Bound<'_, PyAny>,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let buy_currency = text(buy_currency, "buy_currency")?;
        let amount = amount_text("buy_amount", buy_amount)?;
        let sell_currency = text(sell_currency, "sell_currency")?;
        let beneficiaries = int(beneficiaries, "beneficiaries", Error::InvalidRequest)?;
        let req =
            guard(|| QuoteRequest::new(&buy_currency, &amount, &sell_currency, beneficiaries))?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            Ok(Out::Str(c.create_quote(&req, obs.as_deref()).await?.0))
        })
    }

    fn get_quote(
        &self,
        py: Python<'_>,
        quote_id: &Bound<'_, PyAny>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let quote_id = text(quote_id, "quote_id")?;
        let (c, obs) = (self.inner.clone(), observer(py));
        run(py, aio, async move {
            // `raw` goes to Python as the answer's JSON text, decoded on first use.
            let (quote, text) = c.get_quote(&quote_id, obs.as_deref()).await?;
            Ok(Out::Quote(Box::new((quote, text))))
        })
    }

    /// `body` is the beneficiary's wire form as JSON text (it carries no amounts).
    fn create_beneficiary(
        &self,
        py: Python<'_>,
        body: &Bound<'_, PyAny>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let b: Beneficiary = serde_json::from_str(&text(body, "beneficiary")?)
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
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
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
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
        callback_url: Option<&Bound<'_, PyAny>>,
        callback_nonce: Option<&Bound<'_, PyAny>>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let callback_url = opt_text(callback_url, "callback_url")?;
        let callback_nonce = opt_text(callback_nonce, "callback_nonce")?;
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

    /// Returns `(url, state, redirect_uri, code_verifier)`.
    #[pyo3(signature = (redirect_uri, state = None, scope = None, pkce = true))]
    fn authorization_url(
        &self,
        redirect_uri: &Bound<'_, PyAny>,
        state: Option<&Bound<'_, PyAny>>,
        scope: Option<&Bound<'_, PyAny>>,
        pkce: bool,
    ) -> PyResult<(String, String, String, Option<String>)> {
        let redirect_uri = text(redirect_uri, "redirect_uri")?;
        let state = opt_text(state, "state")?;
        let scope = opt_text(scope, "scope")?.unwrap_or_else(|| "gca-aisp".to_owned());
        let params = AuthorizeParams {
            redirect_uri: &redirect_uri,
            state: state.as_deref(),
            scope: &scope,
            pkce,
        };
        let a = guard(|| self.inner.authorization_url(&params))?;
        Ok((a.url, a.state, a.redirect_uri, a.code_verifier))
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange_code(
        &self,
        py: Python<'_>,
        url: &Bound<'_, PyAny>,
        state: &Bound<'_, PyAny>,
        redirect_uri: &Bound<'_, PyAny>,
        code_verifier: Option<&Bound<'_, PyAny>>,
        callback: &Bound<'_, PyAny>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let auth = AuthorizationRequest {
            url: text(url, "auth.url")?,
            state: text(state, "auth.state")?,
            redirect_uri: text(redirect_uri, "auth.redirect_uri")?,
            code_verifier: opt_text(code_verifier, "auth.code_verifier")?,
        };
        let callback = text(callback, "callback")?;
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
        refresh_token: &Bound<'_, PyAny>,
        aio: bool,
    ) -> PyResult<Py<PyAny>> {
        let refresh_token = text(refresh_token, "refresh_token")?;
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
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CoreUserSession> {
        let t = token_from_py(token)?;
        let shared = match (opt_text(key, "key")?, &self.store) {
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

//! `fxpay.Client`: the client as Python sees it. Each network method has a blocking form
//! (GIL released while it waits) and an `_async` twin returning a coroutine; both take the
//! same arguments, converted here (a wrong type is a `TypeError` naming the parameter) and
//! checked once, by the core.
use super::bridge::guard;
use super::bridge::ready;
use super::convert::objects;
use super::convert::{amount_text, int, opt_text, path, seconds, text, type_name};
use super::errors::{closed_error, Failure, Fallible};
use super::journal::PyJournal;
use super::models::{
    authorization_from_py, authorization_into_py, beneficiary_from_py, deal_beneficiaries_from_py,
    token_from_py, Out,
};
use super::payout_stream::PayoutStream;
use super::session::{on_token_callback, UserSession};
use super::twin::{self, Obs, Start};
use fxpay_core::{
    journaled_create_beneficiary, journaled_create_deal, journaled_create_quote,
    journaled_create_spot_deal, lost_answer_named_by_sender, AuthorizationRequest, AuthorizeParams,
    Beneficiary, Cassette, Client as Core, ClientConfig, DealRequest, Error, QuoteRequest, Store,
    TokenStore,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString, PyTuple, PyType};
use pyo3::IntoPyObjectExt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A client of the payments and account-information service.
///
/// Every network method has an awaitable ``*_async`` twin with the same arguments, result
/// and exceptions. Blocking calls release the GIL while they wait; one client is safe to
/// share between threads and asyncio tasks.
///
/// ``base_url`` is the service address without ``/v1``; it must be ``https://`` except on
/// loopback hosts. Payments calls fetch a client-credentials token on first use, reuse it
/// and renew it before it expires; many concurrent first calls cause one token request.
#[pyclass(module = "fxpay._fxpay", frozen, subclass, weakref)]
pub struct Client {
    /// Set by `__init__` (so a subclass may give `__init__` a signature of its own).
    open: OnceLock<Open>,
    /// Shared with the client's sessions: closing the client ends them.
    closed: Arc<AtomicBool>,
    /// A client made by `with_options`: the flag of the client it came from (closing that
    /// one closes this one too; closing this one closes nothing shared).
    parent_closed: Option<Arc<AtomicBool>>,
}

struct Open {
    core: Core,
    store: Option<Arc<dyn TokenStore>>,
    cassette: Option<Arc<Cassette>>,
    journal: Option<Arc<dyn Store>>,
}

/// A creating call's idempotency key and the journal it is kept in.
type Keyed = Option<(Arc<dyn Store>, String)>;

/// A creating call made once: with a key, through the journal (`journaled`: a repeat of the
/// key is answered from it), else sent as it is (`direct`); `args` go to the one it makes.
async fn once<'a, A, T, J, D>(
    keyed: &'a Keyed,
    args: A,
    journaled: impl FnOnce(&'a Arc<dyn Store>, &'a str, A) -> J,
    direct: impl FnOnce(A) -> D,
) -> Result<T, Error>
where
    J: Future<Output = Result<(T, bool), Error>>,
    D: Future<Output = Result<T, Error>>,
{
    match keyed {
        // An outcome made unknown by this call's own lost answer names the request it sent.
        Some((j, key)) => Ok(journaled(j, key, args)
            .await
            .map_err(lost_answer_named_by_sender)?
            .0),
        None => direct(args).await,
    }
}

/// A payout method of `fxpay._payouts` (`name`), called with the client and its arguments.
fn payouts<'py>(
    client: &Bound<'py, Client>,
    name: &str,
    rows: &Bound<'py, PyAny>,
    funding_source: &Bound<'py, PyAny>,
    concurrency: Py<PyAny>,
    progress: Py<PyAny>,
    max_rate: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = client.py();
    py.import(intern!(py, "fxpay._payouts"))?.call_method1(
        name,
        (
            client,
            rows,
            funding_source,
            concurrency,
            max_rate,
            progress,
        ),
    )
}

impl Client {
    /// The journal and key of a creating call given `idempotency_key` (None without one);
    /// a key on a client without a journal is a `ConfigurationError`.
    fn keyed(&self, key: Option<&Bound<'_, PyAny>>) -> Fallible<Keyed> {
        let Some(key) = opt_text(key, "idempotency_key")? else {
            return Ok(None);
        };
        match &self.initialised()?.journal {
            Some(j) => Ok(Some((j.clone(), key))),
            None => Err(Failure::from(Error::config(
                "idempotency_key needs a journal: Client(..., journal=fxpay.SqliteJournal(path))",
            ))),
        }
    }

    /// The core client, or `ConfigurationError` when closed (or never initialised).
    fn core(&self) -> PyResult<&Core> {
        let open = self.initialised()?;
        if self.is_closed() {
            return Err(closed_error("Client"));
        }
        Ok(&open.core)
    }

    fn quote_request(
        buy_currency: &Bound<'_, PyAny>,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
    ) -> Fallible<QuoteRequest> {
        let buy_currency = text(buy_currency, "buy_currency")?;
        let amount = amount_text("buy_amount", buy_amount)?;
        let sell_currency = text(sell_currency, "sell_currency")?;
        let beneficiaries = int(beneficiaries, "beneficiaries", Error::InvalidRequest)?;
        let req = QuoteRequest::new(&buy_currency, &amount, &sell_currency, beneficiaries)?;
        Ok(req)
    }

    fn spot_args(
        callback_url: Option<&Bound<'_, PyAny>>,
        callback_nonce: Option<&Bound<'_, PyAny>>,
    ) -> Fallible<(Option<String>, Option<String>)> {
        Ok((
            opt_text(callback_url, "callback_url")?,
            opt_text(callback_nonce, "callback_nonce")?,
        ))
    }
}

/// A default argument as the Python object a caller would pass (so that an explicit `None`
/// is a wrong type, not the default).
fn default<T>(value: T) -> Py<PyAny>
where
    T: for<'py> IntoPyObject<'py>,
{
    Python::attach(|py| match value.into_bound_py_any(py) {
        Ok(v) => v.unbind(),
        Err(_) => py.None(),
    })
}

/// A `fxpay.Beneficiary` as the core's; anything else is a `TypeError`.
fn beneficiary(b: &Bound<'_, PyAny>) -> PyResult<Beneficiary> {
    beneficiary_from_py(b)
}

/// A deal's arguments as the core's request; `beneficiaries` must be a sequence (list,
/// tuple or any `collections.abc.Sequence` but text) of `fxpay.DealBeneficiary`.
fn deal_request(
    quote_id: &Bound<'_, PyAny>,
    funding_source: &Bound<'_, PyAny>,
    beneficiaries: &Bound<'_, PyAny>,
    channel: Option<&Bound<'_, PyAny>>,
) -> PyResult<DealRequest> {
    let quote_id = text(quote_id, "quote_id")?;
    let funding_source = text(funding_source, "funding_source")?;
    let channel = opt_text(channel, "channel")?;
    let list = deal_beneficiaries_from_py(beneficiaries)?;
    Ok(DealRequest {
        quote_id,
        funding_source,
        channel,
        beneficiaries: list,
    })
}

/// A `fxpay.AuthorizationRequest` as the core's; anything else is a `TypeError`.
fn authorization_request(auth: &Bound<'_, PyAny>) -> PyResult<AuthorizationRequest> {
    authorization_from_py(auth)
}

/// What each network method and its ``_async`` twin share: the arguments converted (with the
/// GIL, so a wrong type raises at the call) and how to start the call once its tracing
/// observer is known (`twin.rs`).
impl Client {
    /// The call of :meth:`_payments_token` and :meth:`_payments_token_async`.
    fn payments_token_call(&self) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        Ok(move |obs: Obs| async move {
            let t = c.payments_token(obs.as_deref()).await?;
            Ok(Out::Token(Box::new((*t).clone())))
        })
    }

    /// The call of :meth:`create_quote` and :meth:`create_quote_async`.
    fn create_quote_call(
        &self,
        py: Python<'_>,
        buy_currency: &Bound<'_, PyAny>,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: &Bound<'_, PyAny>,
        beneficiaries: Py<PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let beneficiaries = beneficiaries.bind(py);
        let req = Self::quote_request(buy_currency, buy_amount, sell_currency, beneficiaries)?;
        let keyed = self.keyed(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, req| journaled_create_quote(&c, j, key, req, obs);
            let (id, _) = once(&keyed, &req, journaled, |req| c.create_quote(req, obs)).await?;
            Ok(Out::Str(id))
        })
    }

    /// The call of :meth:`get_quote` and :meth:`get_quote_async`.
    fn get_quote_call(&self, quote_id: &Bound<'_, PyAny>) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let quote_id = text(quote_id, "quote_id")?;
        Ok(move |obs: Obs| async move {
            // `raw` goes to Python as the answer's JSON text, decoded on first use.
            let (quote, text) = c.get_quote(&quote_id, obs.as_deref()).await?;
            Ok(Out::Quote(Box::new((quote, text))))
        })
    }

    /// The call of :meth:`create_beneficiary` and :meth:`create_beneficiary_async`.
    fn create_beneficiary_call(
        &self,
        beneficiary: &Bound<'_, PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let b = self::beneficiary(beneficiary)?;
        let keyed = self.keyed(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, b| journaled_create_beneficiary(&c, j, key, b, obs);
            let (id, _) = once(&keyed, &b, journaled, |b| c.create_beneficiary(b, obs)).await?;
            Ok(Out::Str(id))
        })
    }

    /// The call of :meth:`create_deal` and :meth:`create_deal_async`.
    fn create_deal_call(
        &self,
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let req = deal_request(quote_id, funding_source, beneficiaries, channel)?;
        let keyed = self.keyed(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, req| journaled_create_deal(&c, j, key, req, obs);
            let deal = once(&keyed, req, journaled, |req| c.create_deal(req, obs)).await?;
            Ok(Out::Deal(Box::new(deal)))
        })
    }

    /// The call of :meth:`create_spot_deal` and :meth:`create_spot_deal_async`.
    #[allow(clippy::too_many_arguments)]
    fn create_spot_deal_call(
        &self,
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
        callback_url: Option<&Bound<'_, PyAny>>,
        callback_nonce: Option<&Bound<'_, PyAny>>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let req = deal_request(quote_id, funding_source, beneficiaries, channel)?;
        let callback = Self::spot_args(callback_url, callback_nonce)?;
        let keyed = self.keyed(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, (req, (url, nonce))| {
                journaled_create_spot_deal(&c, j, key, req, url, nonce, obs)
            };
            let direct = |(req, (url, nonce))| c.create_spot_deal(req, url, nonce, obs);
            let spot = once(&keyed, (req, callback), journaled, direct).await?;
            Ok(Out::Spot(Box::new(spot)))
        })
    }

    /// The call of :meth:`exchange_code` and :meth:`exchange_code_async`.
    fn exchange_code_call(
        &self,
        auth: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let auth = authorization_request(auth)?;
        let callback = text(callback, "callback")?;
        Ok(move |obs: Obs| async move {
            let token = c.exchange_code(&auth, &callback, obs.as_deref()).await?;
            Ok(Out::Token(Box::new(token)))
        })
    }

    /// The call of :meth:`refresh_token` and :meth:`refresh_token_async`.
    fn refresh_token_call(&self, refresh_token: &Bound<'_, PyAny>) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let refresh_token = text(refresh_token, "refresh_token")?;
        Ok(move |obs: Obs| async move {
            let token = c.refresh_token(&refresh_token, obs.as_deref()).await?;
            Ok(Out::Token(Box::new(token)))
        })
    }
}

#[pymethods]
impl Client {
    /// The client-credentials token payments calls use (for tests and diagnostics).
    fn _payments_token(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        twin::blocking(py, self.deadline(), self.payments_token_call()?)
    }

    /// :meth:`_payments_token`, awaitable.
    fn _payments_token_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "_payments_token_async",
            self.payments_token_call()?,
        )
    }

    /// Creates a quote and returns its id. With ``idempotency_key`` (and a client
    /// ``journal``), a repeat of the key returns the first call's id without sending.
    #[pyo3(signature = (*, buy_currency, buy_amount, sell_currency, beneficiaries = default(1), idempotency_key = None))]
    #[pyo3(
        text_signature = "(self, /, *, buy_currency, buy_amount, sell_currency, beneficiaries=1, idempotency_key=None)"
    )]
    fn create_quote(
        &self,
        py: Python<'_>,
        buy_currency: &Bound<'_, PyAny>,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: &Bound<'_, PyAny>,
        beneficiaries: Py<PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(
            py,
            self.deadline(),
            self.create_quote_call(
                py,
                buy_currency,
                buy_amount,
                sell_currency,
                beneficiaries,
                idempotency_key,
            )?,
        )
    }

    /// :meth:`create_quote`, awaitable.
    #[pyo3(signature = (*, buy_currency, buy_amount, sell_currency, beneficiaries = default(1), idempotency_key = None))]
    #[pyo3(
        text_signature = "(self, /, *, buy_currency, buy_amount, sell_currency, beneficiaries=1, idempotency_key=None)"
    )]
    fn create_quote_async(
        &self,
        py: Python<'_>,
        buy_currency: &Bound<'_, PyAny>,
        buy_amount: &Bound<'_, PyAny>,
        sell_currency: &Bound<'_, PyAny>,
        beneficiaries: Py<PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "create_quote_async",
            self.create_quote_call(
                py,
                buy_currency,
                buy_amount,
                sell_currency,
                beneficiaries,
                idempotency_key,
            )?,
        )
    }

    /// Reads a quote.
    fn get_quote(&self, py: Python<'_>, quote_id: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        twin::blocking(py, self.deadline(), self.get_quote_call(quote_id)?)
    }

    /// :meth:`get_quote`, awaitable.
    fn get_quote_async(&self, py: Python<'_>, quote_id: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "get_quote_async",
            self.get_quote_call(quote_id)?,
        )
    }

    /// Registers a beneficiary and returns its ``beneficiaryId``.
    #[pyo3(signature = (beneficiary, *, idempotency_key = None))]
    fn create_beneficiary(
        &self,
        py: Python<'_>,
        beneficiary: &Bound<'_, PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(
            py,
            self.deadline(),
            self.create_beneficiary_call(beneficiary, idempotency_key)?,
        )
    }

    /// :meth:`create_beneficiary`, awaitable.
    #[pyo3(signature = (beneficiary, *, idempotency_key = None))]
    fn create_beneficiary_async(
        &self,
        py: Python<'_>,
        beneficiary: &Bound<'_, PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "create_beneficiary_async",
            self.create_beneficiary_call(beneficiary, idempotency_key)?,
        )
    }

    /// Books a deal at once. It is never sent twice by the client's own retries, nor, under
    /// an ``idempotency_key``, by any later call with that key.
    #[pyo3(signature = (*, quote_id, funding_source, beneficiaries, channel = None, idempotency_key = None))]
    fn create_deal(
        &self,
        py: Python<'_>,
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(
            py,
            self.deadline(),
            self.create_deal_call(
                quote_id,
                funding_source,
                beneficiaries,
                channel,
                idempotency_key,
            )?,
        )
    }

    /// :meth:`create_deal`, awaitable.
    #[pyo3(signature = (*, quote_id, funding_source, beneficiaries, channel = None, idempotency_key = None))]
    fn create_deal_async(
        &self,
        py: Python<'_>,
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "create_deal_async",
            self.create_deal_call(
                quote_id,
                funding_source,
                beneficiaries,
                channel,
                idempotency_key,
            )?,
        )
    }

    /// Starts a spot deal; its outcome arrives as a ``DealCreated`` notification.
    ///
    /// With ``callback_url`` and no ``callback_nonce`` a nonce of 256 random bits is made and
    /// returned in the result: store it next to ``process_id`` to verify the notification.
    #[pyo3(signature = (*, quote_id, funding_source, beneficiaries, channel = None, callback_url = None, callback_nonce = None, idempotency_key = None))]
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
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(
            py,
            self.deadline(),
            self.create_spot_deal_call(
                quote_id,
                funding_source,
                beneficiaries,
                channel,
                callback_url,
                callback_nonce,
                idempotency_key,
            )?,
        )
    }

    /// :meth:`create_spot_deal`, awaitable.
    #[pyo3(signature = (*, quote_id, funding_source, beneficiaries, channel = None, callback_url = None, callback_nonce = None, idempotency_key = None))]
    #[allow(clippy::too_many_arguments)]
    fn create_spot_deal_async(
        &self,
        py: Python<'_>,
        quote_id: &Bound<'_, PyAny>,
        funding_source: &Bound<'_, PyAny>,
        beneficiaries: &Bound<'_, PyAny>,
        channel: Option<&Bound<'_, PyAny>>,
        callback_url: Option<&Bound<'_, PyAny>>,
        callback_nonce: Option<&Bound<'_, PyAny>>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "create_spot_deal_async",
            self.create_spot_deal_call(
                quote_id,
                funding_source,
                beneficiaries,
                channel,
                callback_url,
                callback_nonce,
                idempotency_key,
            )?,
        )
    }

    /// Checks the callback (state, ``error=``) and trades its code (and PKCE verifier) for a
    /// user token.
    fn exchange_code(
        &self,
        py: Python<'_>,
        auth: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(
            py,
            self.deadline(),
            self.exchange_code_call(auth, callback)?,
        )
    }

    /// :meth:`exchange_code`, awaitable.
    fn exchange_code_async(
        &self,
        py: Python<'_>,
        auth: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "exchange_code_async",
            self.exchange_code_call(auth, callback)?,
        )
    }

    /// Trades a refresh token for a new token (the old refresh token is then spent).
    fn refresh_token(
        &self,
        py: Python<'_>,
        refresh_token: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::blocking(py, self.deadline(), self.refresh_token_call(refresh_token)?)
    }

    /// :meth:`refresh_token`, awaitable.
    fn refresh_token_async(
        &self,
        py: Python<'_>,
        refresh_token: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        twin::awaitable(
            py,
            self.deadline(),
            "refresh_token_async",
            self.refresh_token_call(refresh_token)?,
        )
    }

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
        let rate_limit = super::rate_limit::from_arg(rate_limit)?;
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

    /// The service address, without ``/v1``.
    #[getter]
    fn base_url(&self) -> PyResult<String> {
        Ok(self.initialised()?.core.config().base_url.clone())
    }

    #[getter]
    fn client_id(&self) -> PyResult<String> {
        Ok(self.initialised()?.core.config().client_id.clone())
    }

    /// Whether :meth:`close` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// ``with_raw_response.<method>(...)``: the call, returning a ``fxpay.RawResponse``.
    #[getter]
    fn with_raw_response<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import(intern!(slf.py(), "fxpay._raw"))?
            .getattr(intern!(slf.py(), "WithRawResponse"))?
            .call1((slf,))
    }

    /// A client with other per-call options that shares this one's connection pools, token
    /// cache, token store, journal and cassette. Options left ``None`` are this client's;
    /// this client is unchanged. Closing this client closes the derived one too; closing
    /// the derived one alone closes nothing shared.
    #[pyo3(signature = (*, timeout = None, max_retries = None, deadline = None))]
    fn with_options(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
        max_retries: Option<&Bound<'_, PyAny>>,
        deadline: Option<&Bound<'_, PyAny>>,
    ) -> Fallible<Client> {
        let open = self.initialised()?;
        let mut cfg = open.core.config().clone();
        if let Some(t) = timeout.filter(|t| !t.is_none()) {
            cfg = cfg.with_timeout(seconds(t, "timeout")?)?;
        }
        if let Some(n) = max_retries.filter(|n| !n.is_none()) {
            cfg = cfg.with_max_retries(int(n, "max_retries", Error::Configuration)?)?;
        }
        if let Some(d) = deadline.filter(|d| !d.is_none()) {
            cfg = cfg.with_deadline(seconds(d, "deadline")?)?;
        }
        let core = py.detach(|| open.core.with_config(cfg));
        let derived = Client {
            open: OnceLock::new(),
            closed: Arc::new(AtomicBool::new(self.is_closed())),
            parent_closed: Some(self.closed.clone()),
        };
        let _ = derived.open.set(Open {
            core,
            store: open.store.clone(),
            // Saved when the client it came from closes, not when this one does.
            cassette: None,
            journal: open.journal.clone(),
        });
        Ok(derived)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let name = slf.get_type().name()?;
        match slf.get().open.get() {
            Some(o) => Ok(format!(
                "{name}(client_id={}, base_url={})",
                PyString::new(py, &o.core.config().client_id).repr()?,
                PyString::new(py, &o.core.config().base_url).repr()?
            )),
            None => Ok(format!("{name}(<not initialised>)")),
        }
    }

    // -- lifecycle ----------------------------------------------------------------------

    /// Releases the client and ends its sessions; its pooled connections close once no call
    /// uses them. A recording cassette is written now.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        match self.open.get().and_then(|o| o.cassette.clone()) {
            Some(cassette) => py.detach(|| guard(|| cassette.save())),
            None => Ok(()),
        }
    }

    /// :meth:`close`, as an awaitable.
    fn aclose(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.close(py)?;
        ready(py, py.None())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.close(py)
    }

    fn __aenter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        ready(py, slf.into_any())
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __aexit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.aclose(py)
    }

    // -- payouts ---------------------------------------------------------------------------

    /// Pays out a table: see ``fxpay._payouts`` (rows in and out) and docs/payouts.md.
    #[pyo3(signature = (rows, *, funding_source, concurrency = default(8), progress = default(true), max_rate = None))]
    #[pyo3(
        text_signature = "(self, /, rows, *, funding_source, concurrency=8, progress=True, max_rate=None)"
    )]
    fn pay_out<'py>(
        slf: &Bound<'py, Self>,
        rows: &Bound<'py, PyAny>,
        funding_source: &Bound<'py, PyAny>,
        concurrency: Py<PyAny>,
        progress: Py<PyAny>,
        max_rate: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        payouts(
            slf,
            "pay_out",
            rows,
            funding_source,
            concurrency,
            progress,
            max_rate,
        )
    }

    /// :meth:`pay_out`, awaitable.
    #[pyo3(signature = (rows, *, funding_source, concurrency = default(8), progress = default(true), max_rate = None))]
    #[pyo3(
        text_signature = "(self, /, rows, *, funding_source, concurrency=8, progress=True, max_rate=None)"
    )]
    fn pay_out_async<'py>(
        slf: &Bound<'py, Self>,
        rows: &Bound<'py, PyAny>,
        funding_source: &Bound<'py, PyAny>,
        concurrency: Py<PyAny>,
        progress: Py<PyAny>,
        max_rate: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        payouts(
            slf,
            "pay_out_async",
            rows,
            funding_source,
            concurrency,
            progress,
            max_rate,
        )
    }

    /// Pays out a table row by row, yielding each row's result (the fields of
    /// :meth:`pay_out`'s) as it ends: rows are read only as fast as they are paid, so memory
    /// grows with ``concurrency``, not with the table (any iterable of mappings, a pandas or
    /// polars DataFrame, or a polars LazyFrame). ``max_rate`` caps rows started per second.
    #[pyo3(signature = (rows, *, funding_source, concurrency = default(8), max_rate = None, progress = default(false)))]
    #[pyo3(
        text_signature = "(self, /, rows, *, funding_source, concurrency=8, max_rate=None, progress=False)"
    )]
    fn pay_out_iter<'py>(
        slf: &Bound<'py, Self>,
        rows: &Bound<'py, PyAny>,
        funding_source: &Bound<'py, PyAny>,
        concurrency: Py<PyAny>,
        max_rate: Option<Py<PyAny>>,
        progress: Py<PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        payouts(
            slf,
            "pay_out_iter",
            rows,
            funding_source,
            concurrency,
            progress,
            max_rate,
        )
    }

    /// :meth:`pay_out_iter`, as an async iterator (``async for``).
    #[pyo3(signature = (rows, *, funding_source, concurrency = default(8), max_rate = None, progress = default(false)))]
    #[pyo3(
        text_signature = "(self, /, rows, *, funding_source, concurrency=8, max_rate=None, progress=False)"
    )]
    fn pay_out_iter_async<'py>(
        slf: &Bound<'py, Self>,
        rows: &Bound<'py, PyAny>,
        funding_source: &Bound<'py, PyAny>,
        concurrency: Py<PyAny>,
        max_rate: Option<Py<PyAny>>,
        progress: Py<PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        payouts(
            slf,
            "pay_out_iter_async",
            rows,
            funding_source,
            concurrency,
            progress,
            max_rate,
        )
    }

    /// The engine of ``pay_out_iter``: rows pushed one at a time, outcomes as they end
    /// (``fxpay._payouts`` keeps ``concurrency`` rows in flight).
    fn _pay_out_stream(&self, funding_source: &Bound<'_, PyAny>) -> Fallible<PayoutStream> {
        let Some(journal) = self.initialised()?.journal.clone() else {
            return Err(Failure::from(Error::config(
                "pay_out_iter needs a journal: Client(..., journal=fxpay.SqliteJournal(path))",
            )));
        };
        let funding = text(funding_source, "funding_source")?;
        Ok(PayoutStream::new(self.core()?.clone(), journal, funding))
    }

    // -- account information ------------------------------------------------------------

    /// The URL to send the user's browser to, with a fresh random state (256 bits).
    ///
    /// With ``pkce`` (the default) the URL carries an RFC 7636 ``S256`` ``code_challenge``;
    /// its ``code_verifier`` stays in the returned request (``to_dict()`` keeps it, ``repr``
    /// never shows it) and :meth:`exchange_code` sends it.
    #[pyo3(signature = (redirect_uri, *, state = None, scope = default("gca-aisp"), pkce = default(true)))]
    #[pyo3(text_signature = "(self, /, redirect_uri, *, state=None, scope='gca-aisp', pkce=True)")]
    fn authorization_url<'py>(
        &self,
        py: Python<'py>,
        redirect_uri: &Bound<'py, PyAny>,
        state: Option<&Bound<'py, PyAny>>,
        scope: Py<PyAny>,
        pkce: Py<PyAny>,
    ) -> Fallible<Bound<'py, PyAny>> {
        let core = self.initialised()?;
        let redirect_uri = text(redirect_uri, "redirect_uri")?;
        let state = opt_text(state, "state")?;
        let (scope, pkce) = (scope.bind(py), pkce.bind(py));
        let scope = text(scope, "scope")?;
        let pkce = pkce.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
            PyTypeError::new_err(format!("pkce must be a bool, not {}", type_name(pkce)))
        })?;
        let params = AuthorizeParams {
            redirect_uri: &redirect_uri,
            state: state.as_deref(),
            scope: &scope,
            pkce,
        };
        let a = core.core.authorization_url(&params)?;
        Ok(authorization_into_py(py, a)?.into_bound(py).into_any())
    }

    /// A session over a user's token that refreshes it (with rotation) as needed.
    ///
    /// ``on_token(new)`` is called before a new token is first used: no request carries
    /// ``new`` before ``on_token(new)`` has returned. If it raises, the call fails with that
    /// exception and the session offers the same token again before its next use. With
    /// ``key`` (and a ``token_store`` on this client) refreshes are shared across processes
    /// under that key; a store that fails is passed over (the session refreshes on its own).
    #[pyo3(signature = (token, *, on_token = None, key = None))]
    fn user_session(
        &self,
        token: &Bound<'_, PyAny>,
        on_token: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
    ) -> Fallible<UserSession> {
        let core = self.core()?;
        let open = self.initialised()?;
        let on_token = match on_token.filter(|f| !f.is_none()) {
            Some(f) if !f.is_callable() => {
                return Err(PyTypeError::new_err(format!(
                    "on_token must be callable, not {}",
                    type_name(f)
                ))
                .into())
            }
            f => f.map(|f| f.clone().unbind()),
        };
        let t = token_from_py(token)?;
        let shared = match (opt_text(key, "key")?, &open.store) {
            (Some(k), Some(store)) => Some((
                store.clone(),
                format!("fxpay:{}:user:{k}", core.config().base_url),
            )),
            (Some(_), None) => {
                return Err(Failure::from(Error::config(
                    "user_session(key=...) needs a Client with a token_store",
                )));
            }
            _ => None,
        };
        let session = core.user_session(t, on_token.map(on_token_callback), shared);
        Ok(UserSession::new(session, self.closed.clone()))
    }
}

impl Client {
    /// The deadline of one call of this client, if it has one.
    fn deadline(&self) -> Option<Duration> {
        self.open.get().and_then(|o| o.core.config().deadline)
    }

    /// Closed itself, or the client it was derived from (`with_options`) is.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
            || self
                .parent_closed
                .as_ref()
                .is_some_and(|p| p.load(Ordering::Acquire))
    }

    /// The initialised state, closed or not.
    fn initialised(&self) -> Fallible<&Open> {
        self.open.get().ok_or_else(|| {
            Failure::from(Error::config(
                "this Client was not initialised (Client.__init__ was not called)",
            ))
        })
    }
}

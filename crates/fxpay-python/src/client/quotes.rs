//! The client's quotes: `create_quote` and `get_quote`, with their `_async` twins.
use super::{default, journaled_or_direct, Client};
use crate::convert::{amount_text, int, text};
use crate::errors::Fallible;
use crate::models::out::Out;
use crate::twin::{self, Obs, Start};
use fxpay_core::{journaled_create_quote, Error, QuoteRequest};
use pyo3::prelude::*;

impl Client {
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
        let key_and_journal = self.key_and_journal(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, req| journaled_create_quote(&c, j, key, req, obs);
            let (id, _) = journaled_or_direct(&key_and_journal, &req, journaled, |req| {
                c.create_quote(req, obs)
            })
            .await?;
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
}

#[pymethods]
impl Client {
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
}

//! The client's deals: `create_deal` (booked at once) and `create_spot_deal` (its outcome a
//! `DealCreated` notification), with their `_async` twins.
use super::{journaled_or_direct, Client};
use crate::convert::{opt_text, text};
use crate::errors::Fallible;
use crate::models::deal_beneficiaries_from_py;
use crate::models::out::Out;
use crate::twin::{self, Obs, Start};
use fxpay_core::{journaled_create_deal, journaled_create_spot_deal, DealRequest};
use pyo3::prelude::*;

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

impl Client {
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
        let key_and_journal = self.key_and_journal(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, req| journaled_create_deal(&c, j, key, req, obs);
            let deal = journaled_or_direct(&key_and_journal, req, journaled, |req| {
                c.create_deal(req, obs)
            })
            .await?;
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
        let key_and_journal = self.key_and_journal(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, (req, (url, nonce))| {
                journaled_create_spot_deal(&c, j, key, req, url, nonce, obs)
            };
            let direct = |(req, (url, nonce))| c.create_spot_deal(req, url, nonce, obs);
            let spot =
                journaled_or_direct(&key_and_journal, (req, callback), journaled, direct).await?;
            Ok(Out::Spot(Box::new(spot)))
        })
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

#[pymethods]
impl Client {
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
}

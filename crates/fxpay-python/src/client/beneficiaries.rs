//! The client's beneficiaries: `create_beneficiary` and its `_async` twin.
use super::{journaled_or_direct, Client};
use crate::models::beneficiary_from_py;
use crate::models::out::Out;
use crate::twin::{self, Obs, Start};
use fxpay_core::{journaled_create_beneficiary, Beneficiary};
use pyo3::prelude::*;

/// A `fxpay.Beneficiary` as the core's; anything else is a `TypeError`.
fn beneficiary(b: &Bound<'_, PyAny>) -> PyResult<Beneficiary> {
    beneficiary_from_py(b)
}

impl Client {
    /// The call of :meth:`create_beneficiary` and :meth:`create_beneficiary_async`.
    fn create_beneficiary_call(
        &self,
        beneficiary: &Bound<'_, PyAny>,
        idempotency_key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<impl Start> {
        let c = self.core()?.clone();
        let b = self::beneficiary(beneficiary)?;
        let key_and_journal = self.key_and_journal(idempotency_key)?;
        Ok(move |obs: Obs| async move {
            let obs = obs.as_deref();
            let journaled = |j, key, b| journaled_create_beneficiary(&c, j, key, b, obs);
            let (id, _) = journaled_or_direct(&key_and_journal, &b, journaled, |b| {
                c.create_beneficiary(b, obs)
            })
            .await?;
            Ok(Out::Str(id))
        })
    }
}

#[pymethods]
impl Client {
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
}

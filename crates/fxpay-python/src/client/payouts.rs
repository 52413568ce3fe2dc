//! The client's payouts: `pay_out`, `pay_out_iter` and their twins hand the table to
//! `fxpay._payouts`, whose rows run through `_pay_out_stream` (`payout_stream.rs`).
use super::{default, Client};
use crate::convert::text;
use crate::errors::{Failure, Fallible};
use crate::payout_stream::PayoutStream;
use fxpay_core::Error;
use pyo3::intern;
use pyo3::prelude::*;

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

#[pymethods]
impl Client {
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
}

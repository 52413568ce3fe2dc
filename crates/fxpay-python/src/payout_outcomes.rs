//! A payout's outcomes out (`pay_out`, `pay_out_iter`): each row's outcome as a dict.
use super::convert::decimal_to_py;
use fxpay_core::{PayoutOutcome as Outcome, PayoutStatus as Status};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// One row's outcome as a dict. Its keys and its status are interned strings: a table of
/// 100,000 results holds one `"quote_id"` and one `"booked"`, not 100,000 of each.
pub fn outcome_into_py(py: Python<'_>, o: Outcome) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "quote_id"), o.quote_id)?;
    d.set_item(intern!(py, "beneficiary_id"), o.beneficiary_id)?;
    d.set_item(intern!(py, "deal_id"), o.deal_id)?;
    match o.sell_amount {
        Some(a) => d.set_item(intern!(py, "sell_amount"), decimal_to_py(py, &a)?)?,
        None => d.set_item(intern!(py, "sell_amount"), py.None())?,
    }
    let status = o.status.map(|s| match s {
        Status::Booked => intern!(py, "booked"),
        Status::Replayed => intern!(py, "replayed"),
        Status::Unknown => intern!(py, "unknown"),
        Status::Refused => intern!(py, "refused"),
    });
    d.set_item(intern!(py, "status"), status)?;
    d.set_item(intern!(py, "error"), o.error)?;
    Ok(d)
}

//! `Client.pay_out`'s (and `pay_out_iter`'s) outcomes out: each row's outcome as a dict.
use super::convert::decimal_to_py;
use fxpay_core::{PayoutOutcome as Outcome, PayoutStatus as Status};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Each outcome as a dict (None for a row never started).
pub fn outcomes_into_py<'py>(
    py: Python<'py>,
    outcomes: Vec<Option<Outcome>>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for o in outcomes {
        match o {
            Some(o) => list.append(outcome_into_py(py, o)?)?,
            None => list.append(py.None())?,
        }
    }
    Ok(list)
}

/// One row's outcome as a dict.
pub fn outcome_into_py(py: Python<'_>, o: Outcome) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("quote_id", o.quote_id)?;
    d.set_item("beneficiary_id", o.beneficiary_id)?;
    d.set_item("deal_id", o.deal_id)?;
    match o.sell_amount {
        Some(a) => d.set_item("sell_amount", decimal_to_py(py, &a)?)?,
        None => d.set_item("sell_amount", py.None())?,
    }
    d.set_item("status", o.status.map(Status::as_str))?;
    d.set_item("error", o.error)?;
    Ok(d)
}

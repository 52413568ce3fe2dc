//! `Out`: what a core call hands back to Python (an id, a model, a list of them, a payout
//! row's outcome), made a Python object on the caller's thread.
use super::{deal_into_py, quote_into_py, spot_deal_into_py, token_into_py};
use fxpay_core as core;
use pyo3::prelude::*;
use serde_json::Value;

/// What a core call hands back to Python.
pub enum Out {
    None,
    Str(String),
    /// A quote and its answer's JSON text (decoded into `raw` on first use).
    Quote(Box<(core::Quote, String)>),
    Deal(Box<(core::Deal, Value)>),
    Spot(Box<(core::SpotDeal, Value)>),
    Token(Box<core::Token>),
    Accounts(Vec<core::VirtualAccount>),
    /// One row of a streamed payout: its index in the table and its outcome.
    Row(usize, Box<fxpay_core::PayoutOutcome>),
}

impl<'py> IntoPyObject<'py> for Out {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        Ok(match self {
            Out::None => py.None().into_bound(py),
            Out::Str(s) => s.into_pyobject(py)?.into_any(),
            Out::Quote(b) => quote_into_py(py, b.0, b.1)?.into_bound(py).into_any(),
            Out::Deal(b) => deal_into_py(py, b.0, b.1)?.into_bound(py).into_any(),
            Out::Spot(b) => spot_deal_into_py(py, b.0, b.1)?.into_bound(py).into_any(),
            Out::Token(t) => token_into_py(py, *t)?.into_bound(py).into_any(),
            Out::Accounts(list) => crate::account::accounts_into_py(py, list)?
                .into_pyobject(py)?
                .into_any(),
            Out::Row(i, o) => (i, crate::payout_outcomes::outcome_into_py(py, *o)?)
                .into_pyobject(py)?
                .into_any(),
        })
    }
}

//! `Client.pay_out`'s rows in: a table's records (dicts that `fxpay._payouts` made of a
//! list, a pandas or a polars frame) become the core's rows.
use super::convert::{amount_text, opt_text, text, type_name};
use super::errors::{Failure, Fallible};
use super::models::beneficiary_from_py;
use fxpay_core::{
    Error, PayoutOutcome as Outcome, PayoutRow as Row, PayoutRowBeneficiary as RowBeneficiary,
    PayoutStatus as Status, QuoteRequest,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn field<'py>(rec: &Bound<'py, PyDict>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(rec.get_item(name)?.filter(|v| !v.is_none()))
}

fn need<'py>(
    rec: &Bound<'py, PyDict>,
    i: usize,
    name: &str,
) -> PyResult<Result<Bound<'py, PyAny>, String>> {
    Ok(field(rec, name)?.ok_or_else(|| format!("rows[{i}] has no {name}")))
}

/// Record `i` (a dict) as a row, its key too. A wrong type is a `TypeError` naming
/// `rows[i].field` (nothing is sent); a wrong or missing value refuses that row only.
pub fn record_from_py(
    rec: Bound<'_, PyAny>,
    i: usize,
    funding_source: &str,
) -> Fallible<Result<Row, String>> {
    let rec = rec.cast_into::<PyDict>().map_err(|e| {
        PyTypeError::new_err(format!(
            "rows[{i}] must be a mapping, not {}",
            type_name(e.into_inner().as_any())
        ))
    })?;
    row_from_py(&rec, i, funding_source)
}

fn row_from_py(
    rec: &Bound<'_, PyDict>,
    i: usize,
    funding_source: &str,
) -> Fallible<Result<Row, String>> {
    let name = |f: &str| format!("rows[{i}].{f}");
    let key = match field(rec, "key")? {
        Some(k) => text(&k, &name("key"))?,
        None => return Err(Error::invalid(format!("rows[{i}] has no key")).into()),
    };
    let mut texts = Vec::new();
    for f in [
        "buy_currency",
        "sell_currency",
        "pay_reason",
        "pay_reference",
    ] {
        match need(rec, i, f)? {
            Ok(v) => texts.push(text(&v, &name(f))?),
            Err(e) => return Ok(Err(e)),
        }
    }
    let amount = match need(rec, i, "buy_amount")? {
        Ok(v) => match amount_text(&name("buy_amount"), &v) {
            Ok(a) => a,
            // A value refused by its size (an int of 400 digits) refuses this row only, as
            // a 29-digit one does; a wrong type is still a `TypeError` for the table.
            Err(Failure::Core(e)) => return Ok(Err(e.to_string())),
            Err(e) => return Err(e),
        },
        Err(e) => return Ok(Err(e)),
    };
    let funding = opt_text(
        field(rec, "funding_source")?.as_ref(),
        &name("funding_source"),
    )?
    .unwrap_or_else(|| funding_source.to_string());
    let beneficiary = match (field(rec, "beneficiary_id")?, field(rec, "beneficiary")?) {
        (Some(id), None) => RowBeneficiary::Id(text(&id, &name("beneficiary_id"))?),
        (None, Some(b)) => {
            RowBeneficiary::New(Box::new(beneficiary_from_py(&b).map_err(|_| {
                PyTypeError::new_err(format!(
                    "{} must be a fxpay.Beneficiary, not {}",
                    name("beneficiary"),
                    type_name(&b)
                ))
            })?))
        }
        (Some(_), Some(_)) => {
            return Ok(Err(format!(
                "rows[{i}] has both beneficiary_id and beneficiary"
            )))
        }
        (None, None) => {
            return Ok(Err(format!(
                "rows[{i}] has neither beneficiary_id nor beneficiary"
            )))
        }
    };
    let quote = match QuoteRequest::new(&texts[0], &amount, &texts[1], 1) {
        Ok(q) => q,
        Err(e) => return Ok(Err(format!("rows[{i}]: {e}"))),
    };
    if let RowBeneficiary::New(b) = &beneficiary {
        if let Err(e) = b.check() {
            return Ok(Err(format!("rows[{i}].beneficiary: {e}")));
        }
    }
    Ok(Ok(Row {
        key,
        quote,
        beneficiary,
        pay_reason: texts[2].clone(),
        pay_reference: texts[3].clone(),
        funding_source: funding,
    }))
}

/// A refused row's outcome.
pub fn refused(error: String) -> Outcome {
    Outcome {
        status: Some(Status::Refused),
        error: Some(error),
        ..Outcome::default()
    }
}

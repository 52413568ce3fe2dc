//! `POST /v1/payments/beneficiaries`.
//!
//! Every field is required and validated, and every error is reported:
//! `currency` (ISO 4217), `name` (≤ 140), `classification` (`Own Account`, `Individual`,
//! `Business`, exactly), `paymentReason` (≤ 140; empty → `validation:beneficiary:1004`
//! on `PaymentReason`), `beneficiaryBankDetails` {`bankName` ≤ 140, `bankBranchName` ≤ 140,
//! `branchCode` ≤ 35, `account` ≤ 34, `bankAddress`}, `beneficiaryAddress`; addresses have
//! `addressLine` ≤ 140, `citySuburb` ≤ 100, `stateProvince` ≤ 100, `postCode` ≤ 20 and
//! `country` (ISO 3166-1 alpha-2).
use std::sync::Arc;

use axum::extract::{Request, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::bearer;
use super::body::json_object;
use super::errors::{json_response, ApiError};
use super::fields::Checker;
use super::state::{lock, Beneficiary, Scope, State};

/// Allowed values of `classification`.
pub const CLASSIFICATIONS: &[&str] = &["Own Account", "Individual", "Business"];

fn address(c: &mut Checker, parent: &Map<String, Value>, key: &str, field: &str) {
    let Some(a) = c.object(parent, key, field) else {
        return;
    };
    c.string(a, "addressLine", &format!("{field}.AddressLine"), 140);
    c.string(a, "citySuburb", &format!("{field}.CitySuburb"), 100);
    c.string(a, "stateProvince", &format!("{field}.StateProvince"), 100);
    c.string(a, "postCode", &format!("{field}.PostCode"), 20);
    c.country(a, "country", &format!("{field}.Country"));
}

/// Validates a beneficiary; returns its currency.
fn validate(obj: &Map<String, Value>) -> Result<String, ApiError> {
    let mut c = Checker::new("beneficiary");
    let currency = c.currency(obj, "currency", "Currency", false);
    c.string(obj, "name", "Name", 140);
    c.one_of(obj, "classification", "Classification", CLASSIFICATIONS);
    c.string(obj, "paymentReason", "PaymentReason", 140);
    if let Some(bank) = c.object(obj, "beneficiaryBankDetails", "BeneficiaryBankDetails") {
        c.string(bank, "bankName", "BeneficiaryBankDetails.BankName", 140);
        c.string(
            bank,
            "bankBranchName",
            "BeneficiaryBankDetails.BankBranchName",
            140,
        );
        c.string(bank, "branchCode", "BeneficiaryBankDetails.BranchCode", 35);
        c.string(bank, "account", "BeneficiaryBankDetails.Account", 34);
        address(
            &mut c,
            bank,
            "bankAddress",
            "BeneficiaryBankDetails.BankAddress",
        );
    }
    address(&mut c, obj, "beneficiaryAddress", "BeneficiaryAddress");
    match currency {
        Some(cur) if c.is_ok() => Ok(cur),
        _ => Err(ApiError::validation(c.errors)),
    }
}

/// The handler.
pub async fn create(AxState(state): AxState<Arc<State>>, req: Request) -> Response {
    let principal = match bearer::check(&state, req.headers(), Scope::Payments) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let (parts, body) = req.into_parts();
    let currency = match json_object(&parts.headers, body)
        .await
        .and_then(|o| validate(&o))
    {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let id = super::ids::uuid();
    lock(&state.ledger).beneficiaries.insert(
        id.clone(),
        Beneficiary {
            client_id: principal.client_id,
            currency,
        },
    );
    json_response(
        StatusCode::CREATED,
        json!({"beneficiaryId": id}).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_payment_reason_and_bad_country() {
        let body = json!({
            "currency": "GBP", "name": "Jane", "classification": "Own Account", "paymentReason": "",
            "beneficiaryBankDetails": {"bankName": "B", "bankBranchName": "C", "branchCode": "1",
                "account": "2", "bankAddress": {"addressLine": "a", "citySuburb": "b",
                "stateProvince": "c", "postCode": "d", "country": "ZZ"}},
            "beneficiaryAddress": {"addressLine": "a", "citySuburb": "b", "stateProvince": "c",
                "postCode": "d", "country": "GB"}
        });
        let Value::Object(m) = body else { return };
        let errs = validate(&m).err().map(|e| e.errors).unwrap_or_default();
        let got: Vec<(&str, &str)> = errs
            .iter()
            .map(|e| (e.code.as_str(), e.field.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("validation:beneficiary:1004", "PaymentReason"),
                (
                    "validation:beneficiary:1007",
                    "BeneficiaryBankDetails.BankAddress.Country"
                )
            ]
        );
    }
}

//! A beneficiary the sandbox accepts: `tests/journal_keyed_call.rs` uses it, and so do the
//! payout's unit tests (`src/journal/payout.rs` compiles this file as its test module
//! `beneficiary`, where `fxpay_core` names the crate itself).
use fxpay_core::Beneficiary;
use serde_json::json;

pub(crate) fn beneficiary() -> Beneficiary {
    let address = json!({"addressLine": "1 Main St", "citySuburb": "Sydney",
        "stateProvince": "NSW", "postCode": "2000", "country": "AU"});
    serde_json::from_value(json!({
        "currency": "AUD", "name": "Jane Doe", "classification": "Individual",
        "paymentReason": "Invoice 42",
        "beneficiaryBankDetails": {"bankName": "Bank", "bankBranchName": "Main",
            "branchCode": "062000", "account": "12345678", "bankAddress": address},
        "beneficiaryAddress": address,
    }))
    .expect("a beneficiary")
}

//! Beneficiaries: the create request with its bank details and addresses.
use crate::error::{Error, Result};
use crate::money::{check_country, check_currency};
use serde::{Deserialize, Serialize};

model! {
    /// A postal address; `country` is an ISO 3166-1 alpha-2 code.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Address {
        pub address_line: String,
        pub city_suburb: String,
        pub state_province: String,
        pub post_code: String,
        pub country: String,
    }
}

model! {
    /// The beneficiary's bank account.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct BankDetails {
        pub bank_name: String,
        pub bank_branch_name: String,
        pub branch_code: String,
        pub account: String,
        pub bank_address: Address,
    }
}

model! {
    /// A payment recipient: the `POST /v1/payments/beneficiaries` body.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Beneficiary {
        pub currency: String,
        pub name: String,
        pub classification: String,
        pub payment_reason: String,
        #[serde(rename = "beneficiaryBankDetails")]
        pub bank_details: BankDetails,
        #[serde(rename = "beneficiaryAddress")]
        pub address: Address,
    }
}

impl Address {
    fn check(&self, at: &str) -> Result<()> {
        check_country(&format!("{at}.country"), &self.country)
    }
}

impl Beneficiary {
    /// Client-side checks that need no knowledge of the service's rules: codes are ISO codes,
    /// and the payment reason is not empty (the service refuses it on field `PaymentReason`).
    pub fn check(&self) -> Result<()> {
        check_currency("currency", &self.currency)?;
        if self.name.trim().is_empty() {
            return Err(Error::invalid("name must not be empty"));
        }
        if self.payment_reason.trim().is_empty() {
            return Err(Error::invalid("payment_reason must not be empty"));
        }
        self.bank_details
            .bank_address
            .check("bank_details.bank_address")?;
        self.address.check("address")
    }
}

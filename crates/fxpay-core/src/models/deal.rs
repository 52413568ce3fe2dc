//! Deals and spot deals.
use crate::error::{Error, Result};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

model! {
    /// One recipient of a deal and the amount paid to it (more than zero).
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DealBeneficiary check(DealBeneficiary::check_amount) {
        pub beneficiary_id: String,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub amount: Decimal,
        pub pay_reason: String,
        pub pay_reference: String,
    }
}

impl DealBeneficiary {
    fn check_amount(&self) -> Result<()> {
        check_amount("amount", self.amount)
    }
}

fn check_amount(field: &str, amount: Decimal) -> Result<()> {
    if amount <= Decimal::ZERO {
        return Err(Error::invalid(format!(
            "{field} must be greater than zero, got {amount}"
        )));
    }
    Ok(())
}

/// Body of `POST /v1/payments/deals` and `POST /v1/payments/deals/spot`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DealRequest {
    pub quote_id: String,
    pub funding_source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    pub beneficiaries: Vec<DealBeneficiary>,
}

impl DealRequest {
    pub(crate) fn check(&self) -> Result<()> {
        if self.quote_id.trim().is_empty() {
            return Err(Error::invalid("quote_id must not be empty"));
        }
        if self.funding_source.trim().is_empty() {
            return Err(Error::invalid("funding_source must not be empty"));
        }
        if self.beneficiaries.is_empty() {
            return Err(Error::invalid("a deal needs at least one beneficiary"));
        }
        for (i, b) in self.beneficiaries.iter().enumerate() {
            if b.beneficiary_id.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "beneficiaries[{i}].beneficiary_id must not be empty"
                )));
            }
            check_amount(&format!("beneficiaries[{i}].amount"), b.amount)?;
        }
        Ok(())
    }
}

model! {
    /// A booked deal: the service's `dealId` with the request that booked it.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Deal {
        pub deal_id: String,
        pub quote_id: String,
        pub funding_source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub channel: Option<String>,
        pub beneficiaries: Vec<DealBeneficiary>,
    }
}

impl Deal {
    /// The deal `deal_id` that `req` booked.
    pub(crate) fn booked(deal_id: String, req: DealRequest) -> Deal {
        Deal {
            deal_id,
            quote_id: req.quote_id,
            funding_source: req.funding_source,
            channel: req.channel,
            beneficiaries: req.beneficiaries,
        }
    }
}

model! {
    /// An accepted spot deal: its outcome arrives later in a `DealCreated` notification.
    /// Its wire form is the service's answer (`processId`); the callback URL and nonce are
    /// the client's own.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct SpotDeal secret(callback_nonce) {
        pub process_id: String,
        #[serde(default, skip_serializing)]
        pub callback_url: Option<String>,
        #[serde(default, skip_serializing)]
        pub callback_nonce: Option<String>,
    }
}

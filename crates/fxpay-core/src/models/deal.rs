//! Deals and spot deals.
use crate::error::{Error, Result};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DealBeneficiary {
    pub beneficiary_id: String,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    pub amount: Decimal,
    pub pay_reason: String,
    pub pay_reference: String,
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
    pub fn check(&self) -> Result<()> {
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
            if b.amount <= Decimal::ZERO {
                return Err(Error::invalid(format!(
                    "beneficiaries[{i}].amount must be greater than zero"
                )));
            }
        }
        Ok(())
    }
}

/// A booked deal: the service's `dealId` with the request that booked it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deal {
    pub deal_id: String,
    pub request: DealRequest,
}

/// An accepted spot deal: its outcome arrives later in a `DealCreated` notification.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotDeal {
    pub process_id: String,
    pub callback_url: Option<String>,
    pub callback_nonce: Option<String>,
}

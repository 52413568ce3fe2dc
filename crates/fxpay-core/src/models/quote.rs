//! Quotes: the create request and the read response.
use crate::error::Result;
use crate::money::{check_currency, parse_amount};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// `POST /v1/payments/quotes` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuoteRequest {
    pub(crate) buy_currency: String,
    #[serde(with = "rust_decimal::serde::arbitrary_precision")]
    pub(crate) buy_amount: Decimal,
    pub(crate) sell_currency: String,
    pub(crate) beneficiaries: u32,
}

impl QuoteRequest {
    /// Builds and checks a request; nothing is sent when this fails.
    pub fn new(
        buy_currency: &str,
        buy_amount: &str,
        sell_currency: &str,
        beneficiaries: i64,
    ) -> Result<Self> {
        check_currency("buy_currency", buy_currency)?;
        check_currency("sell_currency", sell_currency)?;
        let buy_amount = parse_amount("buy_amount", buy_amount)?;
        let beneficiaries = u32::try_from(beneficiaries)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                crate::error::Error::invalid(format!(
                    "beneficiaries must be a whole number of at least 1, got {beneficiaries}"
                ))
            })?;
        Ok(QuoteRequest {
            buy_currency: buy_currency.to_string(),
            buy_amount,
            sell_currency: sell_currency.to_string(),
            beneficiaries,
        })
    }
}

model! {
    /// `freebies` of a quote: fee-free deals of a client.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
    pub struct Freebies {
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub total: Decimal,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub claimed: Decimal,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub remaining: Decimal,
    }
}

model! {
    /// `GET /v1/payments/quotes/<id>` response. `id` is filled from the request path when the
    /// service leaves it out; an answer with another quote's id is an error of the call. The amounts and rates are required; `fee`, `feeCurrency` and
    /// `freebies` may be absent or null (`None`): a service may waive fees or run no freebies.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Quote {
        #[serde(default)]
        pub id: String,
        pub buy_currency: String,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub buy_amount: Decimal,
        pub sell_currency: String,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub sell_amount: Decimal,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub customer_rate: Decimal,
        #[serde(with = "rust_decimal::serde::arbitrary_precision")]
        pub inverse_customer_rate: Decimal,
        // The optional fields' wire form is as the service sent them: absent ones stay absent.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "rust_decimal::serde::arbitrary_precision_option"
        )]
        pub fee: Option<Decimal>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub fee_currency: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub freebies: Option<Freebies>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_serialises_exact_numbers() {
        let q = QuoteRequest::new("USD", "1000.10", "AUD", 1).expect("valid");
        let json = serde_json::to_string(&q).expect("json");
        assert_eq!(
            json,
            r#"{"buyCurrency":"USD","buyAmount":1000.10,"sellCurrency":"AUD","beneficiaries":1}"#
        );
    }

    #[test]
    fn request_refuses_bad_input() {
        assert!(QuoteRequest::new("usd", "1", "AUD", 1).is_err());
        assert!(QuoteRequest::new("USD", "0", "AUD", 1).is_err());
        assert!(QuoteRequest::new("USD", "1", "AUD", 0).is_err());
    }

    #[test]
    fn response_keeps_decimal_digits() {
        let body = r#"{"id":"q1","buyCurrency":"USD","buyAmount":1000.00,"sellCurrency":"AUD",
            "sellAmount":1523.45,"customerRate":1.523450,"inverseCustomerRate":0.656405,
            "fee":0,"feeCurrency":"USD","freebies":{"total":3,"claimed":0,"remaining":3}}"#;
        let q: Quote = serde_json::from_str(body).expect("parse");
        assert_eq!(q.buy_amount.to_string(), "1000.00");
        assert_eq!(q.customer_rate.to_string(), "1.523450");
        assert_eq!(q.sell_amount.to_string(), "1523.45");
        assert_eq!(q.fee.map(|f| f.to_string()).as_deref(), Some("0"));
    }

    #[test]
    fn optional_fields_may_be_null_or_absent() {
        let body = r#"{"buyCurrency":"USD","buyAmount":1,"sellCurrency":"AUD",
            "sellAmount":1.5,"customerRate":1.5,"inverseCustomerRate":0.6,"fee":null,
            "somethingNew":{"x":1}}"#;
        let q: Quote = serde_json::from_str(body).expect("parse");
        assert_eq!((q.fee, q.fee_currency, q.freebies), (None, None, None));
        let missing = r#"{"buyCurrency":"USD","buyAmount":1,"sellCurrency":"AUD",
            "customerRate":1.5,"inverseCustomerRate":0.6}"#;
        let err = serde_json::from_str::<Quote>(missing)
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("sellAmount")));
    }
}
